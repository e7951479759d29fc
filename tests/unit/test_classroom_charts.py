"""The room's answers as the projector draws them, and the lesson's questions' measured answers."""

import pytest

from specdec.classroom.questions import Question, tally, verdict
from specdec.config import LOSSY_RULES, RULE_NAMES
from specdec.views.charts import class_answers_chart
from specdec.views.charts.style import ACCEPT_COLOR
from specdec.views.class_questions import (
    CHECK,
    CODE_VS_PROSE,
    RULE_TRIAL,
    acceptance_truth,
    caught_truth,
    drafts_survive,
)


def test_options_are_bars_of_the_counts_and_the_truth_is_green():
    result = tally(CHECK, [(1.0,), (1.0,), (0.0,), (3.0,)])
    before = class_answers_chart(result)
    assert list(before.data[0].x) == [1, 2, 0, 1]
    assert ACCEPT_COLOR not in before.data[0].marker.color  # nothing marked right before the reveal
    after = class_answers_chart(result, CHECK.correct)
    colors = list(after.data[0].marker.color)
    assert colors[1] == ACCEPT_COLOR and colors.count(ACCEPT_COLOR) == 1
    assert "(4)" in after.layout.title.text


def test_option_labels_are_escaped():
    hostile = Question("x", "?", options=("<img src=x onerror=alert(1)>", "b"))
    labels = class_answers_chart(tally(hostile, [(0.0,)])).data[0].y
    assert "<img" not in labels[0] and "&lt;img" in labels[0]


def test_sliders_are_histograms_with_the_median_and_the_measured_value():
    answers = [(80.0, 40.0), (60.0, 50.0), (70.0, 30.0), (100.0, 0.0)]
    fig = class_answers_chart(tally(CODE_VS_PROSE, answers), (75.0, 38.0))
    assert len(fig.data) == 2 and [sum(bar.y) for bar in fig.data] == [4, 4]
    assert fig.data[0].y[-1] == 1 and fig.data[1].y[0] == 1  # 100 in the last bin, 0 in the first
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["code: median 75%, measured 75%", "prose: median 35%, measured 38%"]
    assert len(fig.layout.shapes) == 4  # a median and a measured line on each


def test_each_round_is_its_own_question_with_one_option_per_count():
    question = drafts_survive(4, 3)
    assert question.id == "round-3" and question.options == ("0", "1", "2", "3", "4")
    assert drafts_survive(4, 4).id != question.id


def test_code_vs_prose_is_revealed_against_the_measured_medians():
    rows = [{"category": "code", "acceptance_rate": a} for a in (0.8, 0.6, 0.7)] + [
        {"category": "prose", "acceptance_rate": a} for a in (0.3, 0.5)]
    assert acceptance_truth(rows) == pytest.approx((70.0, 40.0))
    assert acceptance_truth(rows[:3]) is None  # no prose measured yet


def test_the_rule_trial_is_revealed_against_the_rules_caught():
    rows = [{"rule": name, "tv": 0.2 if name in LOSSY_RULES else 0.01, "tv_noise_band": 0.05}
            for name in RULE_NAMES]
    caught = caught_truth(rows)
    assert [RULE_TRIAL.options[i] for i in caught] and {RULE_NAMES[i] for i in caught} == set(LOSSY_RULES)
    assert caught_truth([]) is None
    none_caught = verdict(tally(RULE_TRIAL, [(0.0,)]), ())
    assert none_caught == ["Right: none of them. 0 of 1 chose it."]
