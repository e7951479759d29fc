"""The four acceptance rules, exactly: enumerate every drafted token; the first emitted token's law.

For each drafted x the rule reports its chance of keeping x (`accept_probs`) and, on a rejection, the
distribution it draws the replacement from (`Rule.replacement`, the same function the rule uses).
The lossless rules give exactly p; the lossy ones miss p by the TV distance worked out by hand.
"""

import pytest
import torch
from rule_laws import CASES, P, Q, first_token_law, tv

from specdec.config import RULE_NAMES, SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL, Settings
from specdec.core.acceptance import RULES, typical_thresholds
from specdec.errors import SpecDecError


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", [SPECULATIVE, SAMPLE_COMPARE])
def test_lossless_rules_give_exactly_p(name, case):
    target_probs, draft_probs = CASES[case]
    law = first_token_law(RULES[name], target_probs, draft_probs)
    assert RULES[name].lossless
    assert torch.allclose(law, target_probs, atol=1e-12)


def test_top_choice_misses_p_by_q_of_the_argmax_times_one_minus_its_p():
    # The argmax (token 0) is kept whenever drafted (q = 0.1), else p is drawn: 0.1·δ_0 + 0.9·p.
    law = first_token_law(RULES[TOP_CHOICE], P, Q)
    assert torch.allclose(law, torch.tensor([0.64, 0.27, 0.045, 0.045], dtype=torch.float64))
    assert tv(law, P) == pytest.approx(0.1 * (1 - 0.6))  # 0.04
    assert not RULES[TOP_CHOICE].lossless


def test_typical_misses_p_by_two_fifteenths():
    # H(P) = 0.967 nats, 0.3·exp(-H) = 0.114 > 0.09, so the bar is 0.09: tokens 0 and 1 pass.
    # Kept: q on {0, 1} = 0.1, 0.2. Otherwise (0.7) a draw from p cut to {0, 1}: 2/3, 1/3.
    # Law: [0.1 + 0.7·2/3, 0.2 + 0.7/3, 0, 0] = [0.5667, 0.4333, 0, 0]; TV = (1/30 + 2/15 + 0.1)/2.
    assert float(typical_thresholds(P[None])[0]) == pytest.approx(0.09)
    law = first_token_law(RULES[TYPICAL], P, Q)
    assert torch.allclose(law, torch.tensor([0.1 + 0.7 * 2 / 3, 0.2 + 0.7 / 3, 0, 0], dtype=torch.float64))
    assert tv(law, P) == pytest.approx(2 / 15)
    assert not RULES[TYPICAL].lossless


def test_typical_bar_follows_the_entropy():
    # A flat p over 20 tokens: H = log 20, 0.3·exp(-H) = 0.015 < 0.09 sets the bar, and every token passes.
    flat = torch.full((1, 20), 0.05, dtype=torch.float64)
    assert float(typical_thresholds(flat)[0]) == pytest.approx(0.3 / 20, rel=1e-3)
    verdict = RULES[TYPICAL].accept(torch.tensor([7]), flat, flat.repeat(2, 1), torch.Generator())
    assert verdict.num_accepted == 1 and verdict.thresholds is not None


@pytest.mark.parametrize("name", RULE_NAMES)
def test_expected_acceptance_matches_the_enumeration(name):
    target_probs, draft_probs = CASES["random"]
    rule = RULES[name]
    kept = 0.0
    for x in range(target_probs.shape[0]):
        verdict = rule.accept(torch.tensor([x]), draft_probs[None], torch.stack([target_probs] * 2),
                              torch.Generator().manual_seed(0))
        kept += float(draft_probs[x] * verdict.accept_probs[0])
    assert float(rule.expected(draft_probs[None], target_probs[None])[0]) == pytest.approx(kept)


def test_expected_acceptance_orders_the_rules():
    # Σ min(p, q) >= Σ p·q: the ratio rule keeps at least as much as sample-and-compare.
    expected = {n: float(RULES[n].expected(Q[None], P[None])[0]) for n in RULE_NAMES}
    assert expected[SPECULATIVE] == pytest.approx(0.1 + 0.2 + 0.05 + 0.05)
    assert expected[SAMPLE_COMPARE] == pytest.approx(0.06 + 0.06 + 0.02 + 0.015)
    assert expected[TOP_CHOICE] == pytest.approx(0.1) and expected[TYPICAL] == pytest.approx(0.3)


def test_sample_compare_emits_its_own_draw_on_a_mismatch():
    p = torch.tensor([[0.0, 1.0], [0.5, 0.5]])  # y is token 1 for sure; the draft proposed 0
    verdict = RULES[SAMPLE_COMPARE].accept(torch.tensor([0]), torch.tensor([[1.0, 0.0]]), p,
                                           torch.Generator().manual_seed(0))
    assert verdict.num_accepted == 0 and verdict.next_token == 1 and verdict.target_draws.tolist() == [1]


def test_every_rule_handles_an_empty_draft():
    p = torch.tensor([[0.2, 0.8]])
    for rule in RULES.values():
        verdict = rule.accept(torch.empty(0, dtype=torch.long), torch.empty(0, 2), p, torch.Generator())
        assert verdict.is_bonus and verdict.num_accepted == 0


def test_an_unknown_rule_is_one_clear_error():
    with pytest.raises(SpecDecError, match="rule must be one of"):
        Settings(rule="argmax")
