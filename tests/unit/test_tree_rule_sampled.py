"""The tree rule as the engine runs it, coins and all (core.tree_rule): its samples follow p, its verdict
says what happened, and the lossy rules' samples visibly do not follow p."""

import pytest
import torch
from scipy.stats import chisquare

from specdec.config import TREE_RULE_NAMES, WITHOUT_REPLACEMENT
from specdec.core.tree_rule import TREE_RULES

# q(0) = 0 < p(0); a pair where both lossy rules are off by a total variation of 0.42 at width 2
# (tests/unit/test_tree_rule_exact.py's enumeration gives it).
P = torch.tensor([8, 4, 4, 3], dtype=torch.float64) / 19
Q = torch.tensor([0, 1, 9, 1], dtype=torch.float64) / 11


def emitted_counts(rule_name: str, width: int, samples: int, seed: int = 0) -> list[int]:
    rule, generator = TREE_RULES[rule_name], torch.Generator().manual_seed(seed)
    counts = [0] * len(P)
    for _ in range(samples):
        candidates = rule.draw(Q, width, generator)
        counts[rule.accept(candidates, Q, P, generator).token] += 1
    return counts


@pytest.mark.slow  # thousands of draws
@pytest.mark.parametrize("rule", TREE_RULE_NAMES)
def test_sampled_siblings_follow_p_exactly_for_the_exact_rules_only(rule):
    samples = 2000
    counts = emitted_counts(rule, 2, samples)
    pvalue = chisquare(counts, [samples * float(p) for p in P]).pvalue
    if TREE_RULES[rule].lossless:
        assert pvalue > 1e-3
    else:
        assert pvalue < 1e-6


def test_the_verdict_tells_each_test_and_where_the_token_came_from():
    rule, generator = TREE_RULES[WITHOUT_REPLACEMENT], torch.Generator().manual_seed(5)
    for _ in range(200):
        candidates = rule.draw(Q, 3, generator)
        verdict = rule.accept(candidates, Q, P, generator)
        assert sorted(candidates) == [1, 2, 3]  # distinct, never q = 0
        kept = [t.kept for t in verdict.tests]
        assert kept.count(True) <= 1 and (not any(kept) or kept[-1])  # judged in turn, up to the kept one
        assert all((t.uniform < float(t.step.keep_chance)) == t.kept for t in verdict.tests)
        if verdict.kept is None:
            assert len(verdict.tests) == 3 and verdict.residual is not None
            assert verdict.residual[verdict.token] > 0
        else:
            assert verdict.token == candidates[verdict.kept] and verdict.residual is None
        # each test after the first saw q without the candidates before it
        for before, test in enumerate(verdict.tests[1:], start=1):
            assert all(float(test.step.draft_probs[c]) == 0 for c in candidates[:before])
