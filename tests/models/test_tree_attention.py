"""Tree attention (CachedModel.extend_tree and keep): a tree pass computes what feeding each path alone
computes, the cache keeps the accepted path only, and a greedy tree round that keeps a second choice
writes the target's own text in fewer passes than a chain."""

import copy

import pytest
import torch

from specdec.config import SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, tree_attention
from specdec.core.drafters import ModelDrafter
from specdec.core.rounds import prefill, speculative_rounds, target_only_steps
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


def greedy_run(tiny_target, draft_model, vocab, tree="auto", sampling=GREEDY, max_new_tokens=40):
    target = CachedModel(tiny_target, vocab)
    settings = Settings(4, sampling, max_new_tokens, adaptive=False, tree=tree)
    return list(speculative_rounds(target, ModelDrafter(draft_model, vocab), PROMPT, settings,
                                   torch.Generator().manual_seed(0)))


def plain_greedy(tiny_target, vocab, max_new_tokens=40):
    steps = target_only_steps(CachedModel(tiny_target, vocab), PROMPT, GREEDY, torch.Generator(),
                              max_new_tokens)
    return [s.token for s in steps]


def emitted(traces):
    return [t for trace in traces for t in trace.emitted_tokens]


def kept_second_choices(traces):
    """Rounds where a node's second candidate was the kept one: what a chain could not have given."""
    return [t for t in traces for s in t.tree.siblings if s.kept is not None and s.kept != s.candidates[0]]


def test_greedy_trees_keep_second_choices_and_take_fewer_passes_than_chains(sharp_target, unsure_draft,
                                                                            vocab):
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert emitted(traces) == plain_greedy(sharp_target, vocab)
    assert kept_second_choices(traces), "no second choice was kept: the test would not exercise the tree"
    chains = greedy_run(sharp_target, unsure_draft, vocab, tree="off")
    assert emitted(chains) == emitted(traces)
    assert len(traces) < len(chains)  # fewer target passes for the same tokens
    assert all(t.tree is None for t in chains)


def test_a_round_that_kept_the_wrong_keys_would_be_caught(sharp_target, unsure_draft, vocab, monkeypatch):
    """Negative control: a cache that keeps the rejected candidates' keys and values where the kept
    path's belong breaks the equality above."""
    monkeypatch.setattr(CachedModel, "keep", lambda self, length, then: self.rollback(length + len(then)))
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert emitted(traces) != plain_greedy(sharp_target, vocab)


def test_an_attention_without_the_trees_mask_verifies_chains(sharp_target, unsure_draft, vocab, monkeypatch):
    monkeypatch.setattr(CachedModel, "takes_trees", property(lambda self: False))
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    assert all(t.tree is None for t in traces)
    assert emitted(traces) == plain_greedy(sharp_target, vocab)


def test_the_cache_strip_draws_the_other_branches_and_keeps_only_the_path(sharp_target, unsure_draft, vocab):
    traces = greedy_run(sharp_target, unsure_draft, vocab)
    branched = [t for t in traces if len(t.tree.tokens) > len(set(t.tree.parents))]
    assert branched, "no round drafted a node with two children"
    for trace in traces:
        target_row = next(row for row in kvcache.cache_rows(trace, stage=5) if row.model == "target")
        assert target_row.kept == trace.caches.target_kept  # the strip's kept length is the cache's own
        kept = [c for c in target_row.cells if not c.dropped]
        assert [c.token for c in kept[1:]] == [trace.tree.tokens[node] for node in trace.tree.path]
        assert all(c.kind == kvcache.OTHER_BRANCH for c in target_row.cells if c.dropped)
