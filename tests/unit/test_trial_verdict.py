"""The rule on trial's verdict: "caught" only where the samples catch a rule, "cannot be seen here"
only where they do not, and never both for one rule. Hand-built rows and positions, no model."""

import pytest

from specdec.config import SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL, Settings
from specdec.core.acceptance import RULES
from specdec.measure import exact
from specdec.measure.rules import RuleTally, Trial
from specdec.views.numbers import figure, p_value

# The top choice's exact TV here is small: q puts 0.3 on p's top token, which p is nearly sure of.
POSITION = exact._toy([0.9, 0.05, 0.03, 0.02], [0.3, 0.3, 0.2, 0.2])
NAMES = (SPECULATIVE, TOP_CHOICE, SAMPLE_COMPARE, TYPICAL)


def row(name: str, chi2_p: float, tv: float, band: float = 0.1, floor: float = 0.5, samples: int = 150):
    rule = RULES[name]
    return {"rule": name, "title": rule.title, "lossless": rule.lossless, "chi2_p": chi2_p, "tv": tv,
            "tv_noise_band": band, "tv_noise_floor": floor, "samples": samples}


def trial() -> Trial:
    return Trial(1, Settings(), rules={name: RuleTally(name) for name in NAMES}, first=POSITION)


def view_and_verdict(rows: list[dict]):
    return exact.trial_view(trial(), str, rows)["unseen"], exact.trial_verdict(rows, greedy=False)


def test_a_rule_the_samples_catch_is_never_also_unseen():
    # The defaults: χ² p < 0.001 for the top choice, while its exact TV sits under twice the
    # noise floor (its 'about 152 samples' after a run of 150).
    assert not exact.resolved(exact.exact_laws(POSITION)[TOP_CHOICE].tv, 0.5)
    rows = [row(SPECULATIVE, 0.6, 0.05), row(TOP_CHOICE, 1e-5, 0.3), row(SAMPLE_COMPARE, 0.4, 0.06),
            row(TYPICAL, 0.3, 0.07)]
    unseen, (kind, words) = view_and_verdict(rows)
    assert kind == "caught" and RULES[TOP_CHOICE].title in words
    assert TOP_CHOICE not in unseen  # the contradiction, gone
    assert TYPICAL in unseen  # not caught, and its exact TV too small: explained


def test_caught_needs_both_the_test_and_the_band():
    inside = [row(TOP_CHOICE, 1e-5, 0.08)]  # χ² small, but the TV inside the band the table shows
    unseen, (kind, _) = view_and_verdict(inside)
    assert kind == "none" and TOP_CHOICE in unseen
    outside = [row(TOP_CHOICE, 0.2, 0.3)]  # outside the band, χ² p not small: 1 in 20 by chance
    assert exact.trial_verdict(outside, greedy=False)[0] == "none"


def test_a_lossless_rule_outside_by_chance_is_not_caught():
    kind, words = exact.trial_verdict([row(SPECULATIVE, 1e-4, 0.3), row(TOP_CHOICE, 0.5, 0.05)], False)
    assert kind == "chance" and "1 time in 1,000" in words and "Caught" not in words


@pytest.mark.parametrize("chi2_p, tv", [(1e-6, 0.4), (1e-6, 0.05), (0.3, 0.4), (0.3, 0.05)])
def test_verdict_and_explanations_never_contradict(chi2_p, tv):
    rows = [row(name, chi2_p, tv) for name in NAMES]
    unseen, (kind, words) = view_and_verdict(rows)
    for name in unseen:
        assert not (kind == "caught" and RULES[name].title in words)
    assert kind == exact.trial_verdict(rows, greedy=False)[0]
    assert exact.trial_verdict(rows, greedy=True)[0] == "greedy"


def test_numbers_read_as_figures():
    assert figure(13.4000) == "13.4" and figure(0.0) == "0" and figure(2.1e-5) == "2.1 × 10⁻⁵"
    assert figure(0.11234, 2) == "0.11" and p_value(3e-7) == "< 0.001" and p_value(0.0312) == "0.031"
