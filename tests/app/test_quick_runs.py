"""No dead air: time estimates extrapolated from measured steps, the quick and full runs of the guarantee
and the batch pages, and charts drawn as results arrive (pure chart functions on partial results; the
page's placeholder redrawn during a run). AppTest with the tiny pair; no timed assertions."""

from collections import Counter

import pytest
from app_driver import assert_clean, errors, make_app

from app_pages import ui
from specdec.config import Settings
from specdec.measure import batching, eta
from specdec.measure.guarantee import QUICK_SAMPLES, SampleTally, verdict_words
from specdec.views import charts

GUARANTEE, BATCH = "app_pages/guarantee.py", "app_pages/batch_class.py"


# -- the estimate -----------------------------------------------------------------------------------


def test_time_left_is_the_pace_so_far_times_the_weight_still_to_do():
    # 3 s for the first two steps (weights 1 + 2): 1 s a unit; 3 + 4 units left -> 7 s
    assert eta.seconds_left(3.0, [1, 2, 3, 4], 2) == pytest.approx(7.0)
    assert eta.seconds_left(3.0, [1, 2, 3, 4], 4) == 0.0
    assert eta.seconds_left(0.5, [1, 1, 1], 0) is None  # nothing measured yet: no estimate
    measured = eta.pace(12.0, 48)  # a quick run of 48 samples in 12 s
    assert measured.seconds_for(200) == pytest.approx(50.0)  # the full run's estimate
    assert eta.pace(1.0, 0) is None


def test_durations_read_as_a_person_says_them():
    assert [eta.say_seconds(s) for s in (0.2, 7.4, 23, 61, 95, 400)] == [
        "1 s", "8 s", "25 s", "1 min", "1 min 40 s", "6 min"]


def test_class_weights_one_per_step_heavier_as_rows_grow():
    settings = Settings(gamma=4, max_new_tokens=16)
    for cost in (False, True):
        weights = batching.class_weights(settings, 2, (1, 2, 4, 8), cost)
        assert len(weights) == batching.class_steps(settings, (1, 2, 4, 8), cost)
        assert all(w > 0 for w in weights)
    batch = batching.class_weights(settings, 2, (1, 2, 4, 8), False)
    assert batch[2] < batch[3]  # one batch of 8 rows costs more than one of 4
    assert batch[0] == pytest.approx(2 * 16 * 2 * batching.pass_units(2))  # 2 batches of 1 row, both ways


# -- the guarantee's verdict from its numbers ---------------------------------------------------------


def tally(spec: dict, target: dict, control: dict, draft_tv: float | None) -> SampleTally:
    made = SampleTally(1, Counter(spec), Counter(target), Counter(control))
    made.draft_tv = draft_tv
    return made


def test_verdict_inside_the_band_and_the_control_caught():
    same, control = verdict_words(tally({"a": 30, "b": 20}, {"a": 28, "b": 22}, {"a": 5, "b": 45}, 0.5), 200)
    assert same.startswith("Speculative sampling lands inside the noise band") and "50" in same
    assert "is caught" in control and "exactly 0.500" in control


def test_verdict_says_when_a_quick_run_cannot_resolve_the_control():
    close = tally({"a": 30, "b": 20}, {"a": 29, "b": 21}, {"a": 27, "b": 23}, 0.04)
    _, control = verdict_words(close, 200)
    assert "cannot resolve the negative control" in control
    assert "TV 0.040" in control and "50 samples a side" in control and "(200 a side)" in control


def test_verdict_outside_the_band_is_said_plainly():
    same, _ = verdict_words(tally({"a": 50}, {"b": 50}, {"a": 50}, 0.9), 200)
    assert "outside the noise band" in same and "1 time in 20" in same


def test_sample_chart_draws_partial_results():
    one = charts.empirical_chart(["x"], [1.0], [1.0], "First 1 token(s): 1 (of 50, so far)", [1.0])
    names = ["speculative", "target only", "draft alone (negative control)"]
    assert [trace.name for trace in one.data] == names
    assert len(charts.empirical_chart(["x", "y"], [0.5, 0.5], [1.0, 0.0], "t").data) == 2  # no control


def test_live_charts_take_the_first_result_alone():
    """What a page draws after its first result: one prompt, one batch size, one sweep row."""
    one_prompt = [{"category": "code", "prompt": 1, "acceptance_rate": 0.5, "tokens_per_pass": 2.0,
                   "speedup": 1.4}]
    speedup = charts.category_chart(one_prompt, "speedup", "Speed-up", "x")
    assert "1 prompt each" in speedup.layout.xaxis.title.text
    one_size = [{"batch_size": 1, "target_only_tokens_per_second": 10.0,
                 "speculative_tokens_per_second": 15.0}]
    throughput = charts.batch_throughput_chart(one_size, None)
    assert [list(t.x) for t in throughput.data] == [[1], [1]]
    one_row = [{"temperature": 0.0, "category": "code", "alpha": 0.8, "expected_alpha": 0.8, "speedup": 1.5}]
    assert len(charts.temperature_sweep_chart(one_row).data) >= 2


# -- the pages: quick by default, full one click more, drawn as results arrive ------------------------


@pytest.fixture
def count_calls(monkeypatch):
    """Draw live after every step, and record each call of the named chart functions."""
    monkeypatch.setattr(ui, "DRAW_EVERY", 0.0)
    calls: list[tuple[str, tuple]] = []

    def counting(name):
        original = getattr(charts, name)

        def wrapper(*args, **kwargs):
            calls.append((name, args))
            return original(*args, **kwargs)

        monkeypatch.setattr(charts, name, wrapper)

    return counting, calls


def title(at) -> str:
    """The sampled outcomes' chart title (the toy chart comes first), its line break undone."""
    import json
    import re

    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    return next(re.sub(r"\s*<br>\s*", " ", t) for t in titles if t.startswith("First"))


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_guarantee_quick_by_default_full_one_click_more(tiny_pair_dirs, count_calls):
    counting, calls = count_calls
    counting("empirical_chart")
    at = make_app(tiny_pair_dirs, GUARANTEE)
    full = QUICK_SAMPLES + 10
    at.number_input(key="_gu_samples").set_value(full).run()
    assert f"quick run: {QUICK_SAMPLES} samples" in " ".join(c.value for c in at.caption)
    at.button(key="b_sample").click().run()
    assert_clean(at)
    assert not errors(at)
    assert title(at).startswith(f"First 1 token(s): {QUICK_SAMPLES} speculative")
    live = [args[3] for name, args in calls if "so far" in args[3]]
    assert len(live) == QUICK_SAMPLES  # redrawn with every sample
    assert f"1 (of {QUICK_SAMPLES}, so far)" in live[0]
    words = " ".join(m.value for m in at.markdown)
    assert "noise band" in words and ("negative control" in words or "no draft-alone control" in words)
    assert "at the pace measured on this server" in " ".join(c.value for c in at.caption)
    at.button(key="b_gu_full").click().run()
    assert_clean(at)
    assert title(at).startswith(f"First 1 token(s): {full} speculative")


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_batch_quick_by_default_drawn_per_batch_size(tiny_pair_dirs, count_calls):
    counting, calls = count_calls
    counting("batch_throughput_chart")
    at = make_app(tiny_pair_dirs, BATCH, gamma=2)
    at.button(key="b_bc_run").click().run()
    assert_clean(at)
    assert not errors(at)
    rows = at.table[0].value.to_dict("records")
    assert [r["B"] for r in rows] == list(batching.QUICK_RUN["sizes"])
    assert len(at.get("plotly_chart")) == 1  # the quick run: throughput only, no cost curve
    assert any(c.value.startswith("Quick run: 2 prompt(s), 16 new tokens a row") for c in at.caption)
    drawn = [len(args[0]) for name, args in calls]
    steps = len(batching.QUICK_RUN["sizes"])
    assert drawn == [*range(1, steps + 1), steps]  # live, one more batch size each time; then the page's
    assert "at the pace measured on this server" in " ".join(c.value for c in at.caption)
