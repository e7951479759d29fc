"""The per-session stepper on the tiny pair: step, back, reset, replays, counters, labels, export."""

import csv
import io
import json
import threading

import pytest

from specdec.config import SamplingConfig, Settings
from specdec.core.metrics import summarize
from specdec.models.pair import ModelPair
from specdec.views.stepper import ACCEPTED, BONUS, RESAMPLED, Stepper
from specdec.views.tokens import token_label, visible_text

PROMPT = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def pair(tiny_pair_dirs):
    return ModelPair.load(tiny_pair_dirs["target"], tiny_pair_dirs["draft"])


def make(pair, temperature=1.0, max_new_tokens=20, seed=0, lock=None, prompt=PROMPT, **options):
    settings = Settings(3, SamplingConfig(temperature=temperature), max_new_tokens, seed)
    ids = pair.encode_prompt(prompt, chat=False, max_new_tokens=max_new_tokens)
    return Stepper(pair, ids, settings, **({"lock": lock} if lock else {}), **options)


def run_to_end(stepper):
    while stepper.step() is not None:
        pass
    return stepper


def test_step_back_and_forward_replays_the_same_round(pair):
    stepper = make(pair)
    assert stepper.current is None and stepper.counters().rounds == 0
    first = stepper.step()
    second = stepper.step()
    assert stepper.counters().rounds == 2 and stepper.current is second
    stepper.back()
    assert stepper.current is first and stepper.counters().rounds == 1
    assert stepper.step() is second  # replayed, not recomputed
    assert len(stepper.traces) == 2


def test_show_round_jumps_to_a_computed_round_without_running_models(pair):
    stepper = make(pair)
    traces = [stepper.step() for _ in range(3)]
    stepper.show_round(0)
    assert stepper.current is traces[0] and stepper.counters().rounds == 1
    stepper.show_round(7)  # not computed: ignored
    assert stepper.current is traces[0]
    assert stepper.step() is traces[1] and len(stepper.traces) == 3  # replayed, not recomputed
    assert set(stepper.labels_for_all()) >= {t for trace in traces for t in trace.emitted_tokens}


def test_same_seed_same_rounds_and_reset_replays(pair):
    one, two = run_to_end(make(pair, seed=3)), run_to_end(make(pair, seed=3))
    assert [t.emitted_tokens for t in one.traces] == [t.emitted_tokens for t in two.traces]
    before = [t.emitted_tokens for t in one.traces]
    one.reset()
    assert one.traces == [] and one.shown == -1 and not one.finished
    assert [t.emitted_tokens for t in run_to_end(one).traces] == before


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_runs_to_the_budget_and_stops(pair, temperature):
    stepper = run_to_end(make(pair, temperature=temperature, max_new_tokens=12))
    emitted = sum(len(t.emitted_tokens) for t in stepper.traces)
    assert stepper.at_end and emitted <= 12
    assert stepper.step() is None and stepper.at_end
    if temperature == 0:
        assert all(t.uniforms is None for t in stepper.traces)


def test_counters_and_output_tokens_agree_with_metrics(pair):
    stepper = run_to_end(make(pair))
    counters, metrics = stepper.counters(), summarize(stepper.traces)
    assert counters.rounds == counters.target_passes == metrics.rounds
    assert counters.tokens_emitted == metrics.tokens_emitted
    assert counters.acceptance_rate == pytest.approx(metrics.acceptance_rate)
    assert counters.tokens_per_pass == pytest.approx(metrics.tokens_per_pass)
    tokens = stepper.output_tokens()
    assert [t.token_id for t in tokens] == [x for t in stepper.traces for x in t.emitted_tokens]
    for trace in stepper.traces:
        origins = [t.origin for t in tokens if t.round_index == trace.index]
        assert origins[: trace.num_accepted] == [ACCEPTED] * trace.num_accepted
        assert origins[-1] in (BONUS, RESAMPLED) or len(origins) == trace.num_accepted  # cut at EOS
    assert len(stepper.output_tokens(upto=0)) == len(stepper.traces[0].emitted_tokens)


class CountingLock:
    def __init__(self):
        self.lock, self.entered = threading.Lock(), 0

    def __enter__(self):
        self.entered += 1
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_model_use_goes_through_the_lock(pair):
    lock = CountingLock()
    stepper = make(pair, lock=lock)
    stepper.step()
    stepper.step()
    stepper.back()
    stepper.step()  # a replay: no model call
    # The prompt fits one chunk: target prefill, draft prefill, the prefill's end, then two rounds.
    assert lock.entered == 2 + 1 + 2


def test_a_long_prompt_goes_in_chunks_with_the_lock_released_between(pair):
    """Chunked prefill: each chunk holds the lock alone, so another session waits one chunk at most;
    and the run is the same as with the prompt fed in one pass."""
    prompt = "def add(a, b):\n    return a + b\n" * 6
    ids = pair.encode_prompt(prompt, chat=False, max_new_tokens=20)
    lock = CountingLock()
    chunked = make(pair, lock=lock, prompt=prompt, prefill_chunk=8, seed=2)
    first = chunked.step()
    chunks = -(-(len(ids) - 1) // 8)  # per model, rounded up
    assert lock.entered == 2 * chunks + 1 + 1
    whole = make(pair, prompt=prompt, prefill_chunk=10_000, seed=2)
    assert first.emitted_tokens == whole.step().emitted_tokens
    assert [t.emitted_tokens for t in run_to_end(chunked).traces] == [
        t.emitted_tokens for t in run_to_end(whole).traces]


def test_sessions_in_threads_do_not_disturb_each_other(pair):
    expected = [t.emitted_tokens for t in run_to_end(make(pair, seed=5)).traces]
    results = []

    def work():
        results.append([t.emitted_tokens for t in run_to_end(make(pair, seed=5)).traces])

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [expected] * 3


def test_visible_text_and_byte_tokens(pair):
    assert visible_text(" a\n\tb") == "␣a↵⇥b"
    assert visible_text("x\x00") == "x<0x00>"
    tokenizer = pair.target.tokenizer
    space = tokenizer.convert_tokens_to_ids("Ġ")
    assert token_label(pair, space) == "␣"
    half_char = tokenizer.convert_tokens_to_ids("Ã")  # byte 0xC3: the first half of a UTF-8 letter
    assert token_label(pair, half_char) == "⟨piece·C3⟩"  # bytes in words, not <0xC3>
    end = tokenizer.convert_tokens_to_ids("<eos>")  # a special token: in words, never as its raw name
    assert token_label(pair, end) == "⟨eos⟩"


def test_export_json_and_csv(pair):
    stepper = make(pair)
    for _ in range(3):
        stepper.step()
    data = json.loads(json.dumps(stepper.to_dict()))
    assert len(data["rounds"]) == 3 and data["settings"]["gamma"] == 3
    assert data["metrics"]["rounds"] == 3
    for trace in data["rounds"]:
        for token in trace["drafted_tokens"]:
            assert str(token) in data["token_labels"]
    rows = list(csv.DictReader(io.StringIO(stepper.to_csv())))
    assert [int(r["round"]) for r in rows] == [1, 2, 3]
    assert [int(r["num_accepted"]) for r in rows] == [t.num_accepted for t in stepper.traces]
    assert {r["rule"] for r in rows} == {"speculative"} and not any(r["target_draws"] for r in rows)


@pytest.mark.parametrize(("rule", "column"), [("sample-compare", "target_draws"), ("typical", "thresholds")])
def test_csv_carries_the_rules_own_test(pair, rule, column):
    settings = Settings(3, SamplingConfig(temperature=1.0), 20, 0, rule=rule)
    stepper = Stepper(pair, pair.encode_prompt(PROMPT, chat=False, max_new_tokens=20), settings)
    for _ in range(3):
        stepper.step()
    rows = list(csv.DictReader(io.StringIO(stepper.to_csv())))
    for row, trace in zip(rows, stepper.traces, strict=True):
        assert row["rule"] == rule
        kept = trace.target_draws if column == "target_draws" else trace.thresholds
        assert len(row[column].split()) == len(kept) > 0  # one per drafted position


def test_the_cap_on_live_runs_frees_the_idle_run_and_a_step_replays_its_rounds(pair):
    """Past the server's cap the run stepped least recently drops its caches; when its student steps
    again its rounds are replayed, so it goes on exactly as a run that was never freed."""
    from specdec.views.stepper import LiveRuns

    live = LiveRuns(limit=1)
    freed, other = make(pair, max_new_tokens=24, live_runs=live), make(pair, seed=1, live_runs=live)
    never_freed = make(pair, max_new_tokens=24)
    for _ in range(2):
        freed.step(), never_freed.step()
    assert freed.prompt_read
    other.step()  # a second run: over the cap of one, the idle run lets its caches go
    assert not freed.prompt_read and other.prompt_read and live.holding() == 1
    run_to_end(freed)  # replays its two rounds, then goes on
    run_to_end(never_freed)
    assert [t.emitted_tokens for t in freed.traces] == [t.emitted_tokens for t in never_freed.traces]
    assert not other.prompt_read  # now the idle one


def test_out_of_memory_in_a_round_is_a_clear_error_and_the_run_can_go_on(pair, monkeypatch):
    import torch

    from specdec.errors import SpecDecError
    from specdec.views import stepper as stepper_module
    stepper = make(pair)
    first = stepper.step()
    real_rounds = stepper_module.rounds

    def failing_rounds(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        yield  # a generator, as the real one

    stepper.drop_caches()
    monkeypatch.setattr(stepper_module, "rounds", failing_rounds)
    with pytest.raises(SpecDecError, match="out of memory on the GPU while running a round: try a smaller"):
        stepper.step()
    monkeypatch.setattr(stepper_module, "rounds", real_rounds)
    assert stepper.step() is not None and stepper.traces[0] is first and len(stepper.traces) == 2
