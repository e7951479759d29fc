"""The instructor pages' measurements on the tiny pair: shapes, invariants, and the guarantee."""

import threading

import pytest

from specdec.config import SamplingConfig, Settings
from specdec.errors import SpecDecError
from specdec.measure import guarantee
from specdec.measure import timing as ex
from specdec.measure.stats import tv_distance
from specdec.models.pair import ModelPair

PROMPT = "def add(a, b):\n    return a + b\n"  # the prompt of the `prompt_ids` fixture (conftest)


def test_race_interleaves_and_both_finish(pair, prompt_ids):
    settings = Settings(gamma=3, max_new_tokens=12, seed=1)
    states = [(len(s.token_ids), len(p.token_ids)) for s, p in ex.race(pair, prompt_ids, settings)]
    spec = ex.timed_run(pair, prompt_ids, settings, True)
    plain = ex.timed_run(pair, prompt_ids, settings, False)
    assert states[-1] == (len(spec.token_ids), len(plain.token_ids))
    # Both lanes moved before either finished: the race interleaves them.
    assert any(0 < s < states[-1][0] and 0 < p < states[-1][1] for s, p in states)
    report = ex.speedup_report(spec, plain)
    assert report.measured > 0 and report.theory.paper > 0 and 0 <= report.theory.alpha <= 1


def test_the_lock_is_released_between_passes(pair, prompt_ids):
    lock = threading.Lock()
    run, passes = ex.lane(pair, prompt_ids, Settings(gamma=2, max_new_tokens=6), True, lock)
    for _ in passes:
        assert not lock.locked()
    assert run.finished and run.token_ids


def test_gamma_sweep_rows(pair, prompt_ids):
    rows = list(ex.gamma_sweep(pair, prompt_ids, Settings(max_new_tokens=8), gammas=[1, 3]))
    assert [r["gamma"] for r in rows] == [1, 3] and all(r["speedup"] > 0 for r in rows)


def test_prompt_sets_and_summary(pair):
    sets = {"code": [PROMPT, "for i in range(10):\n", "x = 1"], "prose": ["The quick brown fox"],
            "math": ["1 + 1 =", "2 * 3 ="]}
    rows = list(ex.prompt_set_runs(pair, sets, Settings(gamma=2, max_new_tokens=6), chat=False))
    # Round robin, every set's first prompt before any second one: each kind shows early on a page.
    assert [(r["category"], r["prompt"]) for r in rows] == [
        ("code", 1), ("prose", 1), ("math", 1), ("code", 2), ("math", 2), ("code", 3)]
    assert [r["text"] for r in rows] == [PROMPT, "The quick brown fox", "1 + 1 =", "for i in range(10):\n",
                                         "2 * 3 =", "x = 1"]
    summary = ex.category_summary(rows)
    assert [s["category"] for s in summary] == ["code", "prose", "math"] and summary[0]["prompts"] == 3


@pytest.mark.slow
def test_sampled_first_tokens_match_the_target(pair, prompt_ids):
    """Same seeds, different algorithms: the two samples differ draw by draw, not in distribution."""
    settings = Settings(gamma=2, sampling=SamplingConfig(1.0, top_k=3), max_new_tokens=1)
    *_, tally = guarantee.sample_outcomes(pair, prompt_ids, settings, num_samples=300, num_tokens=1)
    assert tally.samples == 300 and tally.drafted > 0
    assert tv_distance(tally.speculative, tally.target) < 0.12


def test_greedy_equals_target_only(pair, prompt_ids):
    check = guarantee.greedy_check(pair, prompt_ids, Settings(gamma=3, max_new_tokens=16))
    assert check.first_difference is None and check.speculative == check.target


def test_forward_cost_by_size(pair, prompt_ids):
    rows = list(ex.forward_cost_by_size(pair, prompt_ids, sizes=(1, 4), repeats=2))
    assert [r["tokens"] for r in rows] == [1, 4] and all(r["seconds"] > 0 for r in rows)
    assert ex.device_name(pair).startswith(("CPU", "GPU"))


def test_a_race_of_several_drafters_moves_the_laggard_first(pair, prompt_ids):
    settings = Settings(max_new_tokens=8)
    lanes = {ex.TARGET: (pair, settings, False), "n-gram": (ModelPair(pair.target, None), settings, True),
             "model": (pair, settings, True)}
    tokens_when_one_finished = None
    for runs in ex.race_lanes(lanes, prompt_ids):
        if tokens_when_one_finished is None and any(run.finished for run in runs.values()):
            tokens_when_one_finished = [len(run.token_ids) for run in runs.values()]
    assert all(run.finished and len(run.token_ids) == 8 for run in runs.values())
    assert min(tokens_when_one_finished) > 0  # interleaved: no lane waited for another to finish
    rows = [ex.drafter_row(runs[label], runs[ex.TARGET], pair) for label in lanes]
    assert [r["drafter"] for r in rows] == [ex.TARGET, "n-gram", "model"]
    assert rows[0]["speedup"] == 1.0 and "origins" not in rows[0] and "origins" in rows[2]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rows": [{"category": "code", "prompt": "p", "acceptance_rate": "abc", "tokens_per_pass": 1.0,
                    "speedup": 1.0}]}, "acceptance_rate must be a number, got 'abc'"),
        ({"rows": [{"category": "code", "prompt": "p", "acceptance_rate": None, "tokens_per_pass": 1.0,
                    "speedup": 1.0}]}, "acceptance_rate must be a number, got None"),
        ({"rows": [{"category": "code", "prompt": "p", "acceptance_rate": 0.5, "tokens_per_pass": True,
                    "speedup": 1.0}]}, "tokens_per_pass must be a number"),
        ({"rows": [{"category": "code"}]}, "row 1 of the file lacks"),
        ({"rows": []}, "expected JSON with a 'rows' list"),
        ([1, 2], "expected JSON with a 'rows' list"),
    ],
    ids=["text", "null", "bool", "missing-keys", "no-rows", "not-an-object"],
)
def test_saved_results_are_checked_for_types_as_well_as_keys(data, message):
    with pytest.raises(SpecDecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ex.check_saved_results(data)
    good = {"rows": [{"category": "code", "prompt": "p", "acceptance_rate": 0.5, "tokens_per_pass": 2,
                      "speedup": 1.2}]}
    assert ex.check_saved_results(good) is good


def test_saved_results_round_trip_through_the_check(pair):
    """What the page saves is what its reload accepts, with the run's settings beside the rows."""
    settings = Settings(gamma=3, max_new_tokens=12, sampling=SamplingConfig(temperature=0.5))
    rows = [{"category": "code", "prompt": "p", "acceptance_rate": 0.5, "tokens_per_pass": 2, "speedup": 1.2}]
    saved = ex.saved_results(pair, settings, chat=True, rows=rows)
    assert ex.check_saved_results(saved) is saved
    assert saved["drafter"] == pair.drafter_name and saved["rows"] == rows
    assert saved["settings"] == {"gamma": 3, "temperature": 0.5, "top_k": settings.sampling.top_k,
                                 "top_p": settings.sampling.top_p, "max_new_tokens": 12, "chat": True}


def test_the_drafters_raced_are_the_pair_s_own_and_a_drafter_that_fails_is_said(pair):
    from specdec.measure import drafter_race

    asked = []

    def pair_with(drafter):
        asked.append(drafter)
        return pair

    lanes, note = drafter_race.lanes_to_race(pair, Settings(), pair_with)
    assert note is None and asked[0] == "ngram"
    assert list(lanes)[:4] == [ex.TARGET, "n-gram lookup", "draft model, γ fixed", "draft model, adaptive"]
    assert lanes[ex.TARGET][2] is False and all(speculates for _, _, speculates in list(lanes.values())[1:])
    assert not lanes["draft model, γ fixed"][1].adaptive and lanes["draft model, adaptive"][1].adaptive

    def failing(drafter):
        if drafter != "ngram":
            raise SpecDecError("that drafter does not load here")
        return pair

    lanes, note = drafter_race.lanes_to_race(pair, Settings(), failing)
    assert note == "that drafter does not load here" and list(lanes) == [ex.TARGET, "n-gram lookup"]
