"""The guarantee's exact law beside its samples, its sampling error, and the greedy comparison that
shows its texts as they grow: on the tiny pair, and on hand-built shares."""

import pytest

from specdec.config import SamplingConfig, Settings
from specdec.measure import guarantee
from specdec.measure.stats import wilson_interval
from specdec.views import charts


@pytest.mark.parametrize("num_tokens", [1, 2])
def test_the_exact_law_is_the_targets_and_covers_what_it_samples(pair, prompt_ids, num_tokens):
    settings = Settings(gamma=2, sampling=SamplingConfig(1.0, top_k=3), max_new_tokens=num_tokens + 1)
    law = guarantee.exact_outcomes(pair, prompt_ids, settings, num_tokens)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-6)
    assert len({outcome[0] for outcome in law}) <= 3  # top-k 3: three first tokens at most
    *_, tally = guarantee.sample_outcomes(pair, prompt_ids, settings, num_samples=30, num_tokens=num_tokens)
    assert set(tally.target) <= set(law) and set(tally.speculative) <= set(law)


def test_the_greedy_comparison_grows_token_by_token_and_ends_with_the_verdict(pair, prompt_ids):
    settings = Settings(gamma=3, max_new_tokens=12)
    checks = list(guarantee.greedy_steps(pair, prompt_ids, settings))
    made = [len(c.speculative) + len(c.target) for c in checks]
    assert made == sorted(made) and made[-1] <= 2 * settings.max_new_tokens
    assert len(checks) >= made[-1]  # one step per token made: the page's time left counts tokens
    assert not checks[0].finished and checks[-1].finished
    assert any(0 < len(c.speculative) < 12 and 0 < len(c.target) < 12 for c in checks)  # side by side
    final = guarantee.greedy_check(pair, prompt_ids, settings)
    assert final.speculative == checks[-1].speculative == final.target and final.first_difference is None


def test_the_wilson_interval_is_sampling_error_at_95_percent():
    low, high = wilson_interval(15, 20)  # the quick run: 0.75 of 20 samples
    assert low < 0.60 < high  # ... whose exact p of 0.60 lies inside its sampling error
    low, high = wilson_interval(3, 20)  # 0.15 against an exact 0.30
    assert low < 0.30 < high
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(0, 20)[1] > 0.1  # a zero count is not certain
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_the_sample_chart_draws_the_exact_law_and_error_bars():
    fig = charts.empirical_chart(["red", "blue"], [0.75, 0.25], [0.60, 0.40], "first token",
                                 control=[0.5, 0.5], exact=[0.60, 0.40], sizes=(20, 20, 20))
    names = [trace.name for trace in fig.data]
    assert names[0] == "exact: the target's p" and list(fig.data[0].y) == [0.60, 0.40]
    speculative = fig.data[1]
    assert speculative.name == "speculative ± 95 %" and speculative.error_y.array is not None
    top = speculative.y[0] + speculative.error_y.array[0]
    bottom = speculative.y[0] - speculative.error_y.arrayminus[0]
    assert bottom < 0.60 < top  # the whisker reaches the exact law
    assert all(trace.error_y.array is not None for trace in fig.data[1:])
    plain = charts.empirical_chart(["red"], [1.0], [1.0], "no extras")  # as before: no law, no whiskers
    assert [t.name for t in plain.data] == ["speculative", "target only"]
    assert plain.data[0].error_y.array is None


def test_the_speedup_curves_title_is_words_in_few_digits():
    from specdec.core.metrics import SpeedupTheory

    theory = SpeedupTheory(alpha=0.6, mean_drafted=3.2, cost_ratio=0.11234, verify_cost=1.4, paper=1.8,
                           on_this_machine=1.3, draft_lengths=[3, 3, 4])
    title = charts.speedup_curve_chart(theory, 1.2).layout.title.text
    assert "c =" not in title and "0.112" not in title
    assert "0.11 of a" in title and "3.2 drafts a round" in title
