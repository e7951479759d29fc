"""The early exit (core.early_exit): the target's own first layers draft, on the target's own cache.

Exactness as for every drafter (the output law is the target's; greedy output is the target's), and the
point of the design: layers 1..L have one cache, the target's, which holds verified tokens only after
every round, and the drafter adds no second copy of it.
"""

import pytest
import torch
from round_laws import PROMPT, emitted, exact_target_law
from scipy.stats import chisquare
from tiny_models import tiny_model

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, ReducedHead
from specdec.core.early_exit import EarlyExitDrafter, ExitAdapter, adapter_config
from specdec.core.records import STOP_CAP
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.errors import SpecDecError
from specdec.kernels.matmul import Int8OnlyLinear, int8_available
from specdec.model_names import check_drafter_name, early_exit_layers

EXIT = 2  # of the tiny target's 3 layers


@pytest.fixture(scope="module")
def deep_target(vocab):
    return tiny_model(vocab, seed=0, layers=3)


def adapter_for(target_model, layers: int = EXIT) -> ExitAdapter:
    """An adapter that is the rest of the target: it reads layer L's state as it is (no embedding added),
    through copies of the target's remaining layers and its norm. Its drafts are the target's own."""
    depth = target_model.config.num_hidden_layers
    adapter = ExitAdapter(adapter_config(target_model.config, layers, depth - layers))
    for mine, theirs in zip(adapter.decoder.layers, target_model.model.layers[layers:], strict=True):
        mine.load_state_dict(theirs.state_dict())
    adapter.decoder.norm.load_state_dict(target_model.model.norm.state_dict())
    adapter.fuse = lambda embeddings, shallow: shallow
    return adapter.eval()


def exit_run(target_model, vocab, sampling, with_adapter, seed=0, max_new_tokens=24, gamma=4, prompt=PROMPT,
             head=None):
    target = CachedModel(target_model, vocab, keep_layer=EXIT if with_adapter else 0)
    adapter = adapter_for(target_model) if with_adapter else None
    drafter = EarlyExitDrafter(target, EXIT, head, adapter)
    lengths = []  # after each round: every layer's cache length, and the tokens so far

    def rounds():
        tokens = len(prompt)
        for trace in speculative_rounds(target, drafter, prompt, Settings(gamma, sampling, max_new_tokens),
                                        torch.Generator().manual_seed(seed)):
            tokens += len(trace.emitted_tokens)
            lengths.append(([layer.get_seq_length() for layer in target.cache.layers], tokens))
            yield trace

    return list(rounds()), target, drafter, lengths


@pytest.mark.parametrize("with_adapter", [False, True], ids=["early:L", "adapter"])
def test_greedy_output_is_the_targets(deep_target, vocab, with_adapter):
    greedy = SamplingConfig(temperature=0)
    traces, *_ = exit_run(deep_target, vocab, greedy, with_adapter, max_new_tokens=40)
    plain = [s.token for s in target_only_steps(CachedModel(deep_target, vocab), PROMPT, greedy,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    accepted, drafted = sum(t.num_accepted for t in traces), sum(t.num_drafted for t in traces)
    if with_adapter:
        # This adapter is the target's remaining layer, so drafting is the target itself: every draft
        # survives only if the adapter read the target's layer-L states at the right positions.
        assert accepted == drafted > 0
    else:
        assert 0 < accepted < drafted


@pytest.mark.parametrize("with_adapter", [False, True], ids=["early:L", "adapter"])
def test_short_continuations_match_the_target_distribution(deep_target, vocab, with_adapter):
    """Sampled at T = 1 with top-k 3, the law of the first three tokens is the target's (chi-squared),
    with the drafts written into the target's own cache and cut off again every round."""
    warp, prompt, samples = SamplingConfig(temperature=1.0, top_k=3), PROMPT[:3], 1500
    exact = exact_target_law(deep_target, vocab, prompt, warp, 3)
    counts = dict.fromkeys(exact, 0)
    head = ReducedHead.of(deep_target, list(range(0, vocab, 2)))  # q = 0 off half the vocabulary
    accepted = 0
    for seed in range(samples):
        traces, *_ = exit_run(deep_target, vocab, warp, with_adapter, seed=seed, max_new_tokens=3, gamma=2,
                              prompt=prompt, head=head)
        counts[tuple(emitted(traces))] += 1  # KeyError = a sequence the target cannot produce
        accepted += sum(t.num_accepted for t in traces)
    assert accepted > 0  # drafts really were kept
    keys = list(exact)
    total = sum(exact.values())
    expected = [exact[k] / total * samples for k in keys]
    assert chisquare([counts[k] for k in keys], expected).pvalue > 1e-3


@pytest.mark.parametrize("with_adapter", [False, True], ids=["early:L", "adapter"])
def test_one_cache_holds_verified_tokens_only_after_every_round(deep_target, vocab, with_adapter,
                                                                monkeypatch):
    written = []  # the shared layers' lengths when the drafter cuts its drafts off, the deeper layers'
    crop = CachedModel.crop_layers

    def spy(self, layers, length):
        written.append(([layer.get_seq_length() for layer in self.cache.layers], length))
        crop(self, layers, length)

    monkeypatch.setattr(CachedModel, "crop_layers", spy)
    traces, target, drafter, lengths = exit_run(deep_target, vocab, SamplingConfig(temperature=1.0),
                                                with_adapter, max_new_tokens=30)
    for layer_lengths, tokens in lengths:  # every layer alike: the tokens but the last, fed next round
        assert layer_lengths == [tokens - 1] * 3
    # While drafting, the drafts went into the target's own first EXIT layers, never its deeper ones.
    assert any(shared[0] > verified for shared, verified in written)
    for shared, verified in written:
        assert shared[EXIT:] == [verified] * (3 - EXIT)
        assert shared[0] == shared[EXIT - 1] >= verified
    if with_adapter:  # the adapter's own cache: its one layer, no longer than the verified tokens
        assert len(drafter.cache.layers) == 1
        assert drafter.cache.get_seq_length() <= target.cache_length


def test_the_drafter_holds_no_copy_of_the_shared_layers(deep_target, vocab):
    """No weights and no cache of layers 1..L of its own: the tensors it owns are the adapter's layer and
    its one-layer cache. The target's cache is as long as target-only decoding's would be."""
    traces, target, drafter, _ = exit_run(deep_target, vocab, SamplingConfig(temperature=1.0), True)
    adapter_parameters = {p.data_ptr() for p in drafter.adapter.parameters()}
    target_parameters = {p.data_ptr() for p in deep_target.parameters()}
    shared_layer = {p.data_ptr() for p in deep_target.model.layers[0].parameters()}
    assert shared_layer <= target_parameters
    assert not shared_layer & adapter_parameters
    assert drafter.decoder is deep_target.model  # it runs the target's own modules
    own_cache = sum(t.numel() for layer in drafter.cache.layers for t in (layer.keys, layer.values))
    target_cache = sum(t.numel() for layer in target.cache.layers for t in (layer.keys, layer.values))
    per_position = own_cache / drafter.cache.get_seq_length()  # one layer's keys and values a position
    assert per_position * 3 == target_cache / target.cache_length  # next to the target's three layers
    assert drafter.cache_length == target.cache_length


def test_the_adapter_keeps_its_own_entries_for_the_drafts_that_survive(deep_target, vocab, monkeypatch):
    """The adapter feeds every drafted token it drafts after; of the verified positions it reads the
    target's layer-L states only for those it never fed: the prompt, and a round's last draft when the
    round stopped at its cap and every draft survived. So it reads far fewer than the tokens verified,
    and the positions line up (every draft survives: test_greedy_output_is_the_targets)."""
    fed = []  # positions each catch-up read from the target's states
    catch_up = EarlyExitDrafter._catch_up

    def spy(self, token_ids, verified):
        before = self.cache.get_seq_length()
        catch_up(self, token_ids, verified)
        fed.append(self.cache.get_seq_length() - before)

    monkeypatch.setattr(EarlyExitDrafter, "_catch_up", spy)
    traces, target, drafter, _ = exit_run(deep_target, vocab, SamplingConfig(temperature=1.0), True,
                                          max_new_tokens=40, gamma=2)
    assert fed[0] == len(PROMPT) - 1  # the prompt, read from the target's states
    unfed = [int(t.num_accepted == t.num_drafted and t.draft_stop == STOP_CAP) for t in traces[:-1]]
    assert fed[1:] == unfed  # after that, the last draft of a round that stopped at its cap, all kept
    assert 0 < sum(unfed) < len(unfed)  # both kinds of round happened


@pytest.mark.skipif(not int8_available(), reason="this torch has no int8 weight product")
def test_on_a_cpu_an_exit_drafts_through_int8_rows_of_its_own_and_keeps_the_targets_output(tiny_pair_dirs):
    """With an fp32 target on a CPU, the loader rounds a copy of layers 1..L to int8 and keeps only the
    int8 rows (a quarter of the fp32 bytes); the target's layers are untouched, and the output is the
    target's."""
    from specdec.models.pair import ModelPair
    from specdec.models.runs import generate

    pair = ModelPair.load(tiny_pair_dirs["target"], "early:1")
    target_layer = pair.target.model.get_decoder().layers[0]
    copy = pair.exit.drafting_layers[0]
    assert type(target_layer.mlp.up_proj) is not Int8OnlyLinear
    assert all(isinstance(m, Int8OnlyLinear) for m in copy.modules() if isinstance(m, torch.nn.Linear))
    fp32_bytes = sum(p.numel() * 4 for p in target_layer.parameters())
    assert fp32_bytes / 5 < pair.exit.own_bytes < fp32_bytes / 3  # int8 rows, their scales, the norms
    assert "int8 copy" in pair.exit.describe()
    prompt = pair.encode_prompt("Hello there", chat=False)
    settings = Settings(sampling=SamplingConfig(temperature=0), max_new_tokens=24)
    assert generate(pair, prompt, settings).token_ids == generate(pair, prompt, settings,
                                                                  speculative=False).token_ids


def test_early_exit_names_are_checked_before_any_load():
    assert early_exit_layers("early:4") == 4
    assert early_exit_layers("bundled:SmolLM2-135M-Instruct-draft") is None
    check_drafter_name("ngram+early:2")
    for bad in ("early:", "early:0", "early:x", "ngram+early:-1"):
        with pytest.raises(SpecDecError, match="early exit takes"):
            check_drafter_name(bad)


def test_an_exit_deeper_than_the_target_is_refused(tiny_pair_dirs):
    from specdec.models.pair import ModelPair

    pair = ModelPair.load(tiny_pair_dirs["target"], "ngram")
    with pytest.raises(SpecDecError, match="has 2 layers"):
        pair.with_drafter("early:2")
    assert pair.with_drafter("early:1").drafter_name == "early:1"


@pytest.mark.slow
@pytest.mark.parametrize("drafter", ["early:8", "bundled:SmolLM2-135M-Instruct-exit"])
def test_greedy_early_exit_equals_the_bundled_target(bundled_pair, drafter):
    from specdec.models.runs import generate

    pair = bundled_pair.with_drafter(drafter)
    prompt = pair.encode_prompt("Write a Python function that reverses a list.", chat=True)
    settings = Settings(sampling=SamplingConfig(temperature=0), max_new_tokens=32)
    plain = generate(pair, prompt, settings, speculative=False).token_ids
    result = generate(pair, prompt, settings)
    assert result.token_ids == plain
    assert sum(t.num_drafted for t in result.rounds) > 0
    if drafter.startswith("bundled:"):  # the shipped adapter guesses well enough to be kept often
        assert sum(t.num_accepted for t in result.rounds) > sum(t.num_drafted for t in result.rounds) / 2
        assert pair.exit.adapter is not None and pair.exit.layers == 4
