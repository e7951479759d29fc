"""The rule on trial for several candidates (measure.tree_trial): the exact law by enumeration is p for
the two exact rules and not p for the two lossy ones, it agrees with the engine's own sampled rule, and
more candidates keep more."""

import pytest
import torch

from specdec.config import Q_KEPT, TOP_K_AS_SAMPLED, TREE_RULE_NAMES, WITH_REPLACEMENT, WITHOUT_REPLACEMENT
from specdec.core.tree_rule import TREE_RULES
from specdec.measure.tree_trial import coarse, exact_tree_law, sample_rule, single_acceptance, tree_trial


def random_pair(seed: int, size: int = 5):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(size, generator=g, dtype=torch.float64) ** 2
    q = torch.rand(size, generator=g, dtype=torch.float64) ** 2
    p[int(torch.randint(size, (1,), generator=g))] = 0.0  # a token the target never emits
    q[int(torch.randint(size, (1,), generator=g))] = 0.0  # and one the draft never proposes
    return p / p.sum(), q / q.sum()


EDGE_PAIRS = [
    (torch.tensor([0.5, 0.3, 0.2, 0.0]), torch.tensor([0.0, 0.3, 0.3, 0.4])),  # q(x) = 0 < p(x)
    (torch.tensor([0.4, 0.3, 0.2, 0.1]), torch.tensor([0.4, 0.3, 0.2, 0.1])),  # p = q
    (torch.tensor([0.0, 1.0, 0.0, 0.0]), torch.tensor([0.5, 0.2, 0.2, 0.1])),  # one-hot p
    (torch.tensor([0.4, 0.3, 0.2, 0.1]), torch.tensor([0.0, 0.0, 1.0, 0.0])),  # one-hot q
]


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("name", [WITHOUT_REPLACEMENT, WITH_REPLACEMENT])
def test_the_exact_rules_emit_p_exactly(name, width):
    edges = [(p.double() / p.double().sum(), q.double() / q.double().sum()) for p, q in EDGE_PAIRS]
    pairs = [random_pair(seed) for seed in range(40)] + edges
    for p, q in pairs:
        law = exact_tree_law(p, q, TREE_RULES[name], width)
        assert law.tv < 1e-12, (name, width, p, q)
        assert law.law.sum().item() == pytest.approx(1.0, abs=1e-12)
        assert 0 <= law.acceptance <= 1 + 1e-12


@pytest.mark.parametrize("name", [Q_KEPT, TOP_K_AS_SAMPLED])
def test_the_lossy_rules_are_caught_on_most_pairs(name):
    tvs = [exact_tree_law(*random_pair(seed), TREE_RULES[name], 3).tv for seed in range(40)]
    assert sum(tv > 1e-6 for tv in tvs) >= 30, tvs  # a broken rule passes on a few pairs, not on most


@pytest.mark.slow  # 24,000 samples: seconds on a 2-core machine
def test_the_enumeration_agrees_with_the_engines_sampled_rule():
    p, q = random_pair(7, size=6)
    pair = coarse(p, q)
    for name in TREE_RULE_NAMES:
        law = exact_tree_law(pair.target_probs, pair.draft_probs, TREE_RULES[name], 3)
        counts, kept = sample_rule(pair, TREE_RULES[name], 3, 6000, torch.Generator().manual_seed(1))
        sampled = torch.tensor([counts.get(i, 0) / 6000 for i in range(len(pair.target_probs))])
        assert 0.5 * float((sampled - law.law).abs().sum()) < 0.03, name
        assert kept / 6000 == pytest.approx(law.acceptance, abs=0.03), name


def test_more_candidates_keep_more_and_one_candidate_is_the_single_rule():
    p, q = random_pair(3, size=8)
    pair = coarse(p, q)
    rule = TREE_RULES[WITHOUT_REPLACEMENT]
    kept = [exact_tree_law(pair.target_probs, pair.draft_probs, rule, w).acceptance for w in (1, 2, 3, 4)]
    assert kept[0] == pytest.approx(single_acceptance(pair), abs=1e-12)
    assert kept == sorted(kept) and kept[-1] > kept[0]


def test_coarse_keeps_the_likeliest_and_lumps_the_rest():
    p = torch.softmax(torch.arange(30, dtype=torch.float64) / 4, dim=0)
    q = torch.softmax(-torch.arange(30, dtype=torch.float64) / 4, dim=0)
    pair = coarse(p, q, shown=6)
    assert pair.has_rest and len(pair.target_probs) == 7
    assert pair.ids[0] == 29  # p's likeliest first
    assert float(pair.target_probs.sum()) == pytest.approx(1.0)
    small = coarse(torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.0, 0.5, 0.5]))
    assert not small.has_rest and len(small.ids) == 3


@pytest.mark.slow  # 3,200 samples and the noise band's re-splits
def test_a_trial_reports_each_rule_with_its_noise_band():
    p, q = random_pair(11, size=6)
    _, laws, rows = tree_trial(p, q, 2, 400, seed=3)
    assert [row.rule for row in rows] == list(TREE_RULE_NAMES) == list(laws)
    for row in rows:
        assert row.tv_noise_band >= row.tv_noise_floor > 0 and 0 <= row.chi2_p <= 1
        assert (row.tv_exact < 1e-9) == row.lossless or row.tv_exact > 0
        assert len(row.kept_at_exact) == 2
