"""TV distance, the chi-square test and the paper's speed-up formula, against hand-computed values."""

import math
import random
from collections import Counter

import pytest

from specdec.core.metrics import expected_speedup, expected_tokens_per_pass
from specdec.errors import SpecDecError
from specdec.measure.guarantee import toy_rule
from specdec.measure.stats import (
    chi_square_sf,
    chi_square_two_sample,
    tv_distance,
    tv_noise_band,
    tv_noise_floor,
)


def test_tv_distance_by_hand():
    assert tv_distance({"a": 3, "b": 1}, {"a": 1, "b": 3}) == pytest.approx(0.5)
    assert tv_distance({"a": 5}, {"b": 2}) == pytest.approx(1.0)  # disjoint supports
    assert tv_distance(Counter(a=2, b=2), Counter(a=10, b=10)) == pytest.approx(0.0)  # scale-free
    # ½(|.5−.2| + |.3−.3| + |.2−.5|) = 0.3
    assert tv_distance({1: 5, 2: 3, 3: 2}, {1: 2, 2: 3, 3: 5}) == pytest.approx(0.3)


def test_empty_sample_is_a_message():
    with pytest.raises(SpecDecError, match="empty"):
        tv_distance({}, {"a": 1})


def test_chi_square_tail_by_hand():
    # χ²(1): P(X ≥ x) = erfc(sqrt(x/2)); χ²(2): P(X ≥ x) = exp(−x/2).
    assert chi_square_sf(2.0, 1) == pytest.approx(math.erfc(1.0), rel=1e-9)
    assert chi_square_sf(3.841, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_sf(4.0, 2) == pytest.approx(math.exp(-2.0), rel=1e-9)
    assert chi_square_sf(0.0, 3) == pytest.approx(1.0)


def test_chi_square_two_sample_by_hand():
    # Table [[3, 1], [1, 3]]: every expected count is 2, statistic 4 · (1²/2) = 2, one dof.
    result = chi_square_two_sample({"a": 3, "b": 1}, {"a": 1, "b": 3}, min_expected=0)
    assert result.statistic == pytest.approx(2.0) and result.dof == 1
    assert result.p_value == pytest.approx(math.erfc(1.0), rel=1e-9)
    same = chi_square_two_sample({"a": 50, "b": 30, "c": 20}, {"a": 100, "b": 60, "c": 40})
    assert same.statistic == pytest.approx(0.0) and same.p_value == pytest.approx(1.0)


def test_chi_square_pools_rare_outcomes():
    a = {"x": 40, "y": 40, "r1": 1, "r2": 1}
    b = {"x": 40, "y": 40, "r3": 1, "r4": 1}
    result = chi_square_two_sample(a, b)
    assert result.categories == 3 and result.dof == 2  # x, y, and one "other" cell
    assert result.p_value > 0.9


def test_theoretical_speedup_by_hand():
    # α = 0.8, γ = 4: (1 − 0.8⁵) / 0.2 = 3.3616 tokens per pass; with c = 0.05: / 1.2 = 2.80133.
    assert expected_tokens_per_pass(0.8, 4) == pytest.approx(3.3616)
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert expected_tokens_per_pass(1.0, 4) == 5.0
    assert expected_speedup(0.0, 3, 0.1) == pytest.approx(1 / 1.3)  # nothing kept: pure overhead
    # The hardware version divides by γc + v: v = 1 is the paper's formula.
    assert expected_speedup(0.8, 4, 0.05, verify_cost=2.0) == pytest.approx(3.3616 / 2.2)


def test_toy_rule_output_is_p():
    rule = toy_rule([5, 3, 2, 0, 0], [1, 1, 1, 1, 1])
    assert rule.accept_probability == pytest.approx(0.2 + 0.2 + 0.2)  # Σ min(p, q)
    assert rule.residual == pytest.approx([0.3 / 0.4, 0.1 / 0.4, 0, 0, 0])
    assert rule.output == pytest.approx(rule.target_probs)
    same = toy_rule([1, 2, 3], [1, 2, 3])  # draft = target: zero residual, everything accepted
    assert same.accept_probability == pytest.approx(1.0) and same.output == pytest.approx(same.target_probs)
    with pytest.raises(SpecDecError, match="above zero"):
        toy_rule([0, 0], [1, 1])


def test_speedup_report_by_hand():
    """Plain: 10 steps of 0.1 s. Speculative: 2 rounds of γ = 4, all accepted (5 tokens each), 0.04 s
    drafting and 0.2 s in all per round. Measured (10/0.4)/(10/1) = 2.5x; c = (0.08/8)/0.1 = 0.1;
    v = (0.4 − 0.08)/2/0.1 = 1.6; E[tokens/pass] = 5 (α = 1): paper 5/(0.4 + 1), here 5/(0.4 + 1.6)."""
    from types import SimpleNamespace

    from specdec.measure.timing import TimedRun, speedup_report

    trace = SimpleNamespace(num_drafted=4, num_accepted=4, num_tested=4, emitted_tokens=[1, 2, 3, 4, 5],
                            draft_seconds=0.04, verify_seconds=0.15, tree=None)
    spec = TimedRun("speculative", [1] * 10, 0.4, [trace, trace], [0.2, 0.2], True)
    plain = TimedRun("target only", [1] * 10, 1.0, [], [0.1] * 10, True)
    report = speedup_report(spec, plain)
    theory = report.theory
    assert report.measured == pytest.approx(2.5) and theory.alpha == pytest.approx(1.0)
    assert theory.cost_ratio == pytest.approx(0.1) and theory.verify_cost == pytest.approx(1.6)
    assert theory.paper == pytest.approx(5 / 1.4)
    assert theory.on_this_machine == pytest.approx(2.5)  # all accepted: theory = measurement


@pytest.mark.slow  # 120 trials of 100 re-splits each, ~5 s
def test_a_sample_of_the_same_distribution_falls_inside_the_noise_band_about_19_times_in_20():
    # Two target halves and a third sample (a lossless rule's), all of 150 draws from one distribution:
    # the third's TV from the first half lands inside the band [0, 95th percentile of the re-splits]
    # about 95 % of the time, over the 95th percentile about 5 % of it.
    probs = {"a": 0.5, "b": 0.25, "c": 0.15, "d": 0.1}
    rng = random.Random(1)

    def sample():
        return Counter(rng.choices(list(probs), weights=list(probs.values()), k=150))

    runs = 120
    inside = 0
    for _ in range(runs):
        first, second, third = sample(), sample(), sample()
        band = tv_noise_band(first, second, splits=100)
        assert band >= tv_noise_floor(first, second)  # the band's edge is above the mean re-split TV
        inside += tv_distance(third, first) <= band
    assert 0.88 <= inside / runs <= 0.995, inside
    with pytest.raises(SpecDecError, match="quantile"):
        tv_noise_band(Counter(a=2), Counter(a=2), quantile=1.5)
