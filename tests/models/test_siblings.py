"""Second choices beside the drafts (core.siblings): the tree pass computes what feeding the tokens one
path at a time computes, the round keeps a sibling only where the target chose it, and greedy output
stays the target's."""

import copy

import pytest
import torch

from specdec.cli.bench import parse_race_lengths, race_methods
from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, tree_attention
from specdec.core.drafters import ModelDrafter
from specdec.core.metrics import summarize
from specdec.core.rounds import prefill, speculative_rounds, target_only_steps
from specdec.core.siblings import SIBLING_FLOOR, Siblings, choose_siblings
from specdec.errors import SpecDecError
from specdec.views import kvcache

PROMPT = [5, 17, 42, 8, 99, 3]
GREEDY = SamplingConfig(temperature=0)


def test_tree_attention_lets_each_token_see_the_cache_its_ancestors_and_itself():
    # [last, x1, x2, sibling of x1]: the sibling's parent is `last`, as x1's is.
    mask, positions = tree_attention([-1, 0, 1, 0], cached=2)
    expected = torch.tensor([
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expected)
    assert positions.tolist() == [[2, 3, 4, 3]]


def q_rows(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_siblings_are_the_second_choices_likely_enough_likeliest_first():
    q = q_rows([0.5, 0.3, 0.2, 0.0], [0.6, 0.0, 0.1, 0.3])
    drafts = torch.tensor([0, 0])
    siblings = choose_siblings(q, drafts, pass_costs=(), step_price=0.1)
    # Chances: token 1 beside draft 1, 0.3; token 3 beside draft 2, 0.5 (draft 1 survives) x 0.3 = 0.15.
    assert siblings.positions == [0, 1] and siblings.tokens == [1, 3]
    assert siblings.parents(num_drafted=2) == [-1, 0, 1, 0, 1]


def test_a_sibling_must_lower_what_the_rounds_tokens_cost():
    q = q_rows([0.5, 0.3, 0.2, 0.0], [0.6, 0.0, 0.1, 0.3])
    drafts = torch.tensor([0, 0])
    # The chain expects 1 + 0.5 + 0.3 = 1.8 tokens for a pass over 3 tokens (1.0) and two drafting steps
    # (0.1 each): 1.8 / 1.2 tokens per pass it costs. The first sibling (chance 0.3) adds 0.1 to the
    # pass and joins (0.3 > 0.1 x 1.5); the second (0.15) adds 0.2 and does not (0.15 < 0.2 x 2.1 / 1.3).
    siblings = choose_siblings(q, drafts, pass_costs=(1.0, 1.0, 1.0, 1.1, 1.3), step_price=0.1)
    assert siblings.positions == [0] and siblings.tokens == [1]
    assert not choose_siblings(q, drafts, pass_costs=(1.0, 1.0, 1.0, 1.5, 2.0), step_price=0.1)


def test_the_same_sibling_must_beat_more_in_a_round_that_expects_more_tokens():
    """Where the drafts are sure, a pass already yields many tokens, and a token costs less on average:
    a sibling's price there is higher."""
    linear = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2)  # every token adds 0.2
    unsure = q_rows([0.6, 0.3, 0.1, 0.0])
    assert choose_siblings(unsure, torch.tensor([0]), linear, step_price=0.0).positions == [0]  # 0.3 > 0.27
    sure_after = torch.cat([unsure, q_rows([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0])])
    assert not choose_siblings(sure_after, torch.tensor([0, 0, 0]), linear, step_price=0.0)  # 0.3 < 0.35


def test_no_sibling_without_a_second_choice_worth_the_floor():
    lookup_q = q_rows([0.0, 1.0, 0.0, 0.0])  # a lookup is sure: q is a point mass
    assert not choose_siblings(lookup_q, torch.tensor([1]), pass_costs=(), step_price=0.1)
    almost_sure = q_rows([1 - SIBLING_FLOOR / 2, SIBLING_FLOOR / 2, 0.0, 0.0])
    assert not choose_siblings(almost_sure, torch.tensor([0]), pass_costs=(), step_price=0.1)
    nothing_drafted = torch.empty(0, 4), torch.empty(0, dtype=torch.long)
    assert not choose_siblings(*nothing_drafted, pass_costs=(), step_price=0.1)


def test_only_the_sibling_at_the_first_rejection_that_the_target_chose_is_kept():
    siblings = Siblings(positions=[2, 0], tokens=[7, 9])
    assert siblings.kept(num_accepted=0, next_token=9) == 1
    assert siblings.kept(num_accepted=2, next_token=7) == 0
    assert siblings.kept(num_accepted=0, next_token=7) is None  # the target chose another token
    assert siblings.kept(num_accepted=1, next_token=9) is None  # no sibling at that position
    assert Siblings([], []).kept(num_accepted=0, next_token=9) is None


def prefilled(model, vocab, keep_features=False):
    cached = CachedModel(model, vocab, keep_features=keep_features)
    for _ in prefill(cached, PROMPT):
        pass
    return cached


@pytest.mark.parametrize(("keep_features", "attention"), [(False, "sdpa"), (True, "sdpa"), (False, "eager")])
def test_a_tree_pass_and_its_kept_path_equal_feeding_that_path_alone(tiny_target, vocab, keep_features,
                                                                     attention):
    last, x1, x2, sibling = PROMPT[-1], 40, 41, 77
    tiny_target = copy.deepcopy(tiny_target)
    tiny_target.set_attn_implementation(attention)  # eager adds the mask to the scores, sdpa reads it
    tree = prefilled(tiny_target, vocab, keep_features)
    cached = tree.cache_length
    logits = tree.extend_tree([last, x1, x2, sibling], [-1, 0, 1, 0])
    chain = prefilled(tiny_target, vocab, keep_features)
    torch.testing.assert_close(logits[:3], chain.extend([last, x1, x2]))
    path = prefilled(tiny_target, vocab, keep_features)
    torch.testing.assert_close(logits[3:], path.extend([last, sibling])[1:])
    # Keep [cache, last, sibling]: the next token's logits are the path's.
    tree.keep(cached + 1, [cached + 3])
    assert tree.cache_length == path.cache_length
    torch.testing.assert_close(tree.extend([9]), path.extend([9]))
    if keep_features:
        torch.testing.assert_close(tree.features, path.features)


def test_keeping_the_wrong_path_would_be_caught(tiny_target, vocab):
    """Negative control: keeping the rejected draft's keys and values in the sibling's place changes the
    next token's logits, so the comparison above can fail."""
    last, x1, x2, sibling = PROMPT[-1], 40, 41, 77
    tree = prefilled(tiny_target, vocab)
    cached = tree.cache_length
    tree.extend_tree([last, x1, x2, sibling], [-1, 0, 1, 0])
    tree.keep(cached + 2, [])  # x1 where the sibling should be
    path = prefilled(tiny_target, vocab)
    path.extend([last, sibling])
    assert not torch.allclose(tree.extend([9]), path.extend([9]), atol=1e-3)


def greedy_run(tiny_target, draft_model, vocab, siblings=True, sampling=GREEDY, max_new_tokens=40):
    target = CachedModel(tiny_target, vocab)
    settings = Settings(4, sampling, max_new_tokens, adaptive=False, siblings=siblings)
    return list(speculative_rounds(target, ModelDrafter(draft_model, vocab), PROMPT, settings,
                                   torch.Generator().manual_seed(0)))


def plain_greedy(tiny_target, vocab, max_new_tokens=40):
    steps = target_only_steps(CachedModel(tiny_target, vocab), PROMPT, GREEDY, torch.Generator(),
                              max_new_tokens)
    return [s.token for s in steps]


def test_greedy_with_siblings_equals_the_target_alone_and_keeps_some(sharp_target, unsure_draft, vocab):
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert [t for trace in traces for t in trace.emitted_tokens] == plain_greedy(sharp_target, vocab)
    kept = [t for t in traces if t.kept_sibling is not None]
    assert kept, "no sibling was kept: the test would not exercise the tree"
    for trace in kept:
        assert trace.sibling_tokens[trace.kept_sibling] == trace.next_token
        assert trace.sibling_positions[trace.kept_sibling] == trace.num_accepted
        assert len(trace.emitted_tokens) == trace.num_accepted + 2
    # Each kept second choice is one token beyond the chain's (accepted drafts + one per pass).
    metrics = summarize(traces)
    assert metrics.second_choices_kept == len(kept) and metrics.second_choices >= len(kept)
    assert metrics.tokens_emitted - metrics.accepted - metrics.rounds == metrics.second_choices_kept
    chains = greedy_run(sharp_target, unsure_draft, vocab, siblings=False)
    assert len(traces) < len(chains)  # fewer target passes for the same tokens
    assert all(not t.sibling_positions for t in chains)


def test_a_round_that_kept_the_wrong_keys_would_be_caught(sharp_target, unsure_draft, vocab, monkeypatch):
    """Negative control: a cache that keeps the rejected draft's keys and values where the kept sibling's
    belong breaks the equality above."""
    monkeypatch.setattr(CachedModel, "keep", lambda self, length, then: self.rollback(length + len(then)))
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert [t for trace in traces for t in trace.emitted_tokens] != plain_greedy(sharp_target, vocab)


def test_an_attention_without_the_trees_mask_verifies_chains(sharp_target, unsure_draft, vocab, monkeypatch):
    monkeypatch.setattr(CachedModel, "takes_trees", property(lambda self: False))
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert all(not t.sibling_positions for t in traces)
    assert [t for trace in traces for t in trace.emitted_tokens] == plain_greedy(sharp_target, vocab)


def test_sampling_rounds_verify_chains_only(sharp_target, unsure_draft, vocab):
    traces = greedy_run(sharp_target, unsure_draft, vocab, sampling=SamplingConfig(temperature=1.0))
    assert all(not t.sibling_positions and t.kept_sibling is None for t in traces)


def test_bench_races_rows_with_and_without_second_choices():
    assert parse_race_lengths("6::tree, 4:0.2:free:chain") == [(6, None, None, True), (4, 0.2, False, False)]
    methods = race_methods(["ngram+bundled:A"], adaptive=True, lengths=parse_race_lengths("6::tree,6::chain"))
    assert [m.label for m in methods[1:]] == ["n-gram, then model, adaptive",
                                              "n-gram, then model, adaptive, γ 6, second choices",
                                              "n-gram, then model, adaptive, γ 6, chains only"]
    assert [m.settings(Settings(siblings=False)).siblings for m in methods[1:]] == [False, True, False]
    assert [m.settings(Settings(siblings=True)).siblings for m in methods[1:]] == [True, True, False]
    for bad in ("6::tree:chain", "6::tree:tree", "6::bush"):
        with pytest.raises(SpecDecError):
            parse_race_lengths(bad)


def test_the_cache_strip_draws_the_siblings_and_keeps_only_the_kept_one(sharp_target, unsure_draft, vocab):
    traces = [t for t in greedy_run(sharp_target, unsure_draft, vocab) if t.sibling_positions]
    assert any(t.kept_sibling is not None for t in traces) and any(t.kept_sibling is None for t in traces)
    for trace in traces:
        k, siblings = trace.num_drafted, len(trace.sibling_positions)
        target_row = kvcache.cache_rows(trace, stage=5)[0]
        kinds = [kvcache.READ] + [kvcache.DRAFT] * k + [kvcache.SIBLING] * siblings
        assert [c.kind for c in target_row.cells] == kinds
        # The strip's kept length is the cache's own after the roll-back.
        assert target_row.kept == trace.caches.target_kept
        kept_cells = [c for c in target_row.cells if c.kind == kvcache.SIBLING and not c.dropped]
        if trace.kept_sibling is None:
            assert not kept_cells
        else:
            assert [c.token for c in kept_cells] == [trace.next_token]
            assert kept_cells[0].position == trace.context_length + trace.num_accepted
