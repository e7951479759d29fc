import pytest

from specdec.core.metrics import expected_speedup, expected_tokens_per_pass, speedup_theory, summarize
from specdec.core.records import RoundTrace


def test_expected_tokens_per_pass_by_hand():
    # (1 - 0.5^4) / (1 - 0.5) = 0.9375 / 0.5
    assert expected_tokens_per_pass(0.5, 3) == pytest.approx(1.875)
    assert expected_tokens_per_pass(0.0, 5) == 1.0
    assert expected_tokens_per_pass(1.0, 4) == 5.0


def test_expected_speedup_by_hand():
    # α = 0.8, γ = 5, c = 0.05: (1 - 0.262144) / 0.2 = 3.68928 tokens per pass; / (5 * 0.05 + 1)
    assert expected_speedup(0.8, 5, 0.05) == pytest.approx(3.68928 / 1.25)
    assert expected_speedup(0.0, 4, 0.0) == 1.0  # nothing accepted, free draft: no gain, no loss
    assert expected_speedup(0.0, 4, 0.25) == 0.5  # nothing accepted, costly draft: a loss
    # With this machine's verify cost v instead of the paper's 1: / (5 * 0.05 + 2)
    assert expected_speedup(0.8, 5, 0.05, verify_cost=2.0) == pytest.approx(3.68928 / 2.25)
    # Rounds of different lengths: E averaged over them, k̄ = 1 in the denominator.
    assert expected_speedup(1.0, [0, 2], 0.5) == pytest.approx(((1 + 3) / 2) / 1.5)


def trace(gamma, num_accepted, draft_seconds=0.04, verify_seconds=0.1):
    emitted = [1] * (num_accepted + 1)
    return RoundTrace(
        index=0, context_length=10, drafted_tokens=[1] * gamma, positions=[],
        draft_token_probs=[], target_token_probs=[], accept_probs=[], uniforms=None,
        num_accepted=num_accepted, next_token=1, is_bonus=num_accepted == gamma,
        emitted_tokens=emitted, draft_seconds=draft_seconds, verify_seconds=verify_seconds,
    )


def test_summary_of_hand_made_rounds():
    traces = [trace(4, 4), trace(4, 0), trace(4, 2)]
    m = summarize(traces, wall_seconds=1.0)
    assert m.rounds == 3 and m.drafted == 12 and m.accepted == 6
    assert m.tested == 4 + 1 + 3  # full accept tests all 4; a rejection at i tests i + 1
    assert m.acceptance_rate == pytest.approx(6 / 12)
    assert m.alpha == pytest.approx(6 / 8)
    assert m.tokens_emitted == 5 + 1 + 3 and m.tokens_per_pass == pytest.approx(3.0)
    assert m.accepted_length_histogram == [1, 0, 1, 0, 1]
    # position 0: tested in 3 rounds, kept in 2; position 1: tested in 2 (those that got past 0), kept in 2
    assert m.per_position_acceptance[:3] == [pytest.approx(2 / 3), 1.0, pytest.approx(0.5)]
    assert m.tokens_per_second == pytest.approx(9.0)
    assert m.mean_drafted == 4.0 and m.max_drafted == 4


def test_speedup_theory_in_plain_steps():
    """3 rounds of k = 4, 0.04 s drafting and 0.1 s verifying each; a plain step takes 0.05 s:
    c = (0.12 / 12) / 0.05 = 0.2, v = 0.1 / 0.05 = 2 (or, with 0.6 s spent, (0.6 - 0.12) / 3 / 0.05)."""
    traces = [trace(4, 4), trace(4, 0), trace(4, 2)]
    theory = speedup_theory(traces, plain_step_seconds=0.05)
    assert theory.cost_ratio == pytest.approx(0.2) and theory.verify_cost == pytest.approx(2.0)
    assert theory.alpha == pytest.approx(0.75) and theory.draft_lengths == [4, 4, 4]
    assert theory.paper == pytest.approx(expected_speedup(0.75, 4, 0.2))
    assert theory.on_this_machine == pytest.approx(expected_tokens_per_pass(0.75, 4) / (4 * 0.2 + 2.0))
    spent = speedup_theory(traces, plain_step_seconds=0.05, spent_seconds=0.6)
    assert spent.verify_cost == pytest.approx((0.6 - 0.12) / 3 / 0.05)


def test_theory_follows_the_drafted_lengths_of_each_round():
    """An n-gram drafter may propose 0 tokens in a round: that round expects exactly 1 token."""
    traces = [trace(0, 0, draft_seconds=0.0), trace(2, 2, draft_seconds=0.0)]
    m = summarize(traces)
    assert m.alpha == 1.0 and m.mean_drafted == 1.0
    theory = speedup_theory(traces, plain_step_seconds=0.1)  # free drafts, verify = one plain step
    assert theory.paper == pytest.approx((1 + 3) / 2) and theory.on_this_machine == pytest.approx(2.0)


def test_summary_of_nothing_is_zeros():
    m = summarize([])
    assert m.rounds == 0 and m.tokens_per_pass == 0.0 and m.accepted_length_histogram == [0]
