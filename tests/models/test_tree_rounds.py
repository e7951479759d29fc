"""Tree rounds (core.tree_rounds) through the real verifier: a tree fed level by level computes what its
paths fed one at a time compute, greedy trees write the target's greedy text, sampled trees the
target's law, and both caches keep the accepted path only."""

import copy

import pytest
import torch
from round_laws import PROMPT, emitted, exact_target_law
from scipy.stats import chisquare
from tiny_models import perturbed_copy

from specdec.config import TOP_K_AS_SAMPLED, SamplingConfig, Settings
from specdec.core.cached_model import CachedModel, tree_attention
from specdec.core.drafters import LookupThenModelDrafter, ModelDrafter, NgramDrafter
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.core.tree_rounds import TreeBudget, TreeShape, chain_shape, grow_tree
from specdec.core.tree_rule import TREE_RULES

GREEDY = SamplingConfig(temperature=0)


@pytest.fixture(scope="module")
def tiny_draft(tiny_target):
    return perturbed_copy(tiny_target, scale=0.6, seed=7)


def run(target_model, draft_model, vocab, sampling, tree="6", seed=0, max_new_tokens=24, gamma=4,
        prompt=PROMPT, tree_rule="without-replacement"):
    target = CachedModel(target_model, vocab)
    drafter = ModelDrafter(draft_model, vocab)
    settings = Settings(gamma, sampling, max_new_tokens, adaptive=False, tree=tree, tree_rule=tree_rule)
    traces = list(speculative_rounds(target, drafter, prompt, settings, torch.Generator().manual_seed(seed)))
    return traces, target, drafter


def test_a_tree_fed_in_two_calls_sees_what_it_sees_fed_at_once():
    parents = [-1, 0, 0, 1, 2, 3]
    whole, positions = tree_attention(parents, cached=3)
    later, later_positions = tree_attention(parents, cached=3, new=2)
    assert torch.equal(later[0, 0], whole[0, 0, 4:])
    assert later_positions.tolist() == [positions[0, 4:].tolist()] == [[5, 6]]


def test_each_node_of_a_tree_fed_level_by_level_gets_its_paths_logits(tiny_target, vocab):
    # Root's children 7 and 9; 7's children 11 and 12; 11's child 13 (fed in three calls).
    tokens, parents = [7, 9, 11, 12, 13], [-1, -1, 0, 0, 2]
    tree = CachedModel(tiny_target, vocab)
    tree.extend(PROMPT)
    logits = torch.cat([tree.extend_tree(tokens[:2], parents[:2]), tree.extend_tree(tokens[2:4], parents[:4]),
                        tree.extend_tree(tokens[4:], parents)])
    for node, path in enumerate([[7], [9], [7, 11], [7, 12], [7, 11, 13]]):
        chain = CachedModel(tiny_target, vocab).extend([*PROMPT, *path])[-1]
        torch.testing.assert_close(logits[node], chain, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("tree", ["1", "3", "6", "auto", "20"])
def test_greedy_trees_write_the_targets_greedy_text(tiny_target, tiny_draft, vocab, tree):
    traces, target, drafter = run(tiny_target, tiny_draft, vocab, GREEDY, tree=tree, max_new_tokens=40)
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, GREEDY,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    assert all(t.tree is not None for t in traces)
    # Both caches hold the sequence but its last token (the draft may lag: it catches up next round).
    assert target.cache_length == len(PROMPT) + len(plain) - 1
    assert drafter.cache_length <= target.cache_length
    if tree in ("auto", "20"):  # shapes that branch (at 3 or 6 nodes the measured best may be a chain):
        # a sibling was kept somewhere, the tree did what a chain could not
        assert any(s.kept not in (None, s.candidates[0]) for t in traces for s in t.tree.siblings)


def test_the_tree_record_reads_as_the_round_went(tiny_target, tiny_draft, vocab):
    traces, _, _ = run(tiny_target, tiny_draft, vocab, SamplingConfig(temperature=1), tree="6", seed=3)
    for trace in traces:
        tree = trace.tree
        assert len(tree.tokens) == len(tree.parents) and tree.parents[0] == -1
        node = 0  # the path runs from the root through each kept child
        for step in tree.path:
            assert tree.parents[step] == node
            node = step
        judged = [s for s in tree.siblings]
        assert len(trace.expected_accept) == trace.num_drafted == len(judged)
        assert all(0 <= e <= 1 for e in trace.expected_accept)
        assert [s.node for s in judged] == [0, *tree.path][: len(judged)]
        assert trace.emitted_tokens == [tree.tokens[n] for n in tree.path] + [trace.next_token] or \
            len(trace.emitted_tokens) < len(tree.path) + 1
        last = judged[-1] if judged else None
        if last is not None and last.kept is None:  # every child rejected: drawn from the last residual
            assert last.residual is not None and not trace.is_bonus
            assert all(u >= c for u, c in zip(last.uniforms, last.keep_chances, strict=True))


def test_lookup_first_copies_one_branch_and_drafts_trees_elsewhere(tiny_target, tiny_draft, vocab):
    target = CachedModel(tiny_target, vocab)
    drafter = LookupThenModelDrafter(NgramDrafter(vocab, min_ngram=1), ModelDrafter(tiny_draft, vocab))
    traces = list(speculative_rounds(target, drafter, PROMPT, Settings(4, GREEDY, 40, tree="6"),
                                     torch.Generator()))
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), PROMPT, GREEDY,
                                                torch.Generator(), 40)]
    assert emitted(traces) == plain
    branches = [max(len(s.candidates) for s in t.tree.siblings) for t in traces if t.tree.siblings]
    assert 1 in branches and max(branches) > 1  # copied rounds (one branch) beside drafted trees


def test_lookup_drafters_keep_verifying_chains(tiny_target, vocab):
    target = CachedModel(tiny_target, vocab)
    settings = Settings(4, GREEDY, 12, tree="6")
    traces = list(speculative_rounds(target, NgramDrafter(vocab, min_ngram=1), PROMPT, settings,
                                     torch.Generator()))
    assert traces and all(t.tree is None for t in traces)


def test_a_shape_cut_at_the_budget_keeps_a_tree():
    shape = TreeShape((-1, 0, 0, 1, 1, 3))
    assert shape.cut(1).parents == (-1, 0, 0)
    assert chain_shape(3).cut(2) == chain_shape(2)


def grown(tiny_target, tiny_draft, vocab, budget, sampling, seed=0):
    target, draft = CachedModel(tiny_target, vocab), CachedModel(tiny_draft, vocab)
    target.extend(PROMPT[:-1])
    return grow_tree(draft, PROMPT, budget, sampling.greedy, TREE_RULES["without-replacement"], sampling,
                     torch.Generator().manual_seed(seed))


def test_a_grown_tree_stays_in_its_budget_and_shrinks_where_passes_cost_more(tiny_target, tiny_draft, vocab):
    warp = SamplingConfig(temperature=1.0)
    free = TreeBudget(nodes=12, depth=3, pass_costs=(1.0,) * 13, step_price=0.0)
    dear = TreeBudget(nodes=12, depth=3, pass_costs=tuple(1.0 + 0.5 * n for n in range(13)), step_price=0.3)
    trees = [grown(tiny_target, tiny_draft, vocab, free, warp, seed) for seed in range(6)]
    for tree in trees:
        depth = {0: 0}
        for node, parent in enumerate(tree.parents[1:], start=1):
            assert parent < node  # parents before children
            depth[node] = depth[parent] + 1
        assert len(tree.tokens) - 1 <= 12 and max(depth.values()) <= 3
        assert all(node in tree.draft_probs for node in range(len(tree.tokens)) if tree.children(node))
    assert max(len(tree.tokens) for tree in trees) > 4  # free passes: a real tree, not a chain
    # Whether a candidate joins is decided before it is drawn: the root's children count alike whatever
    # the seed draws (the exactness of the rule rests on it).
    assert len({len(tree.children(0)) for tree in trees}) == 1
    small = [grown(tiny_target, tiny_draft, vocab, dear, warp, seed) for seed in range(6)]
    assert sum(len(t.tokens) for t in small) < sum(len(t.tokens) for t in trees)


@pytest.mark.slow  # thousands of sampled runs
@pytest.mark.parametrize("tree", ["3", "6", "auto"])
def test_sampled_trees_follow_the_targets_law(tiny_target, tiny_draft, vocab, tree):
    """The law of the first three tokens through the real verifier, trees with siblings at every level."""
    warp, prompt, samples = SamplingConfig(temperature=1.0, top_k=3), PROMPT[:3], 2000
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 3)
    counts = dict.fromkeys(exact, 0)
    for seed in range(samples):
        traces, _, _ = run(tiny_target, tiny_draft, vocab, warp, tree=tree, seed=seed, max_new_tokens=3,
                           gamma=2, prompt=prompt)
        counts[tuple(emitted(traces))] += 1  # KeyError = a sequence the target cannot produce
    keys = list(exact)
    total = sum(exact.values())
    expected = [exact[k] / total * samples for k in keys]
    assert chisquare([counts[k] for k in keys], expected).pvalue > 1e-3


@pytest.mark.slow
def test_the_lossy_tree_rule_is_caught_through_the_verifier(tiny_target, vocab):
    """The negative control of the test above: q's top two judged as if drawn. The draft is the target
    with a flatter head (q overlaps p but is not p); the first token's law is off by 0.3 here."""
    draft = copy.deepcopy(tiny_target)
    with torch.no_grad():
        draft.lm_head.weight.mul_(0.5)
    warp, prompt, samples = SamplingConfig(temperature=1.0, top_k=3), PROMPT[:3], 600
    exact = exact_target_law(tiny_target, vocab, prompt, warp, 1)
    counts = dict.fromkeys(exact, 0)
    for seed in range(samples):
        traces, _, _ = run(tiny_target, draft, vocab, warp, tree="2", seed=seed, max_new_tokens=2, gamma=1,
                           prompt=prompt, tree_rule=TOP_K_AS_SAMPLED)
        counts[tuple(emitted(traces)[:1])] += 1
    keys = list(exact)
    total = sum(exact.values())
    assert chisquare([counts[k] for k in keys], [exact[k] / total * samples for k in keys]).pvalue < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("tree", ["8", "auto"])
def test_greedy_trees_on_the_bundled_pair_write_the_targets_text(bundled_pair, tree):
    prompt = bundled_pair.encode_prompt("Write a Python function that reverses a list.", True, 48)
    settings = Settings(6, GREEDY, 48, tree=tree)
    target = bundled_pair.new_target()
    traces = list(speculative_rounds(target, bundled_pair.new_drafter(target), prompt, settings,
                                     torch.Generator(), bundled_pair.stop_token_ids))
    plain = [s.token for s in target_only_steps(bundled_pair.new_target(), prompt, GREEDY, torch.Generator(),
                                                48, bundled_pair.stop_token_ids)]
    assert emitted(traces) == plain
    assert all(t.tree is not None for t in traces)
    assert any(len(s.candidates) > 1 for t in traces for s in t.tree.siblings)  # drafted trees, not copies
