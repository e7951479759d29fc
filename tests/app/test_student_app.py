"""Student mode in AppTest with the tiny pair: ask, reveal with marks, score, the shared link, escaping."""

import pytest
from app_driver import APP, ROUNDS, XSS, assert_clean, make_app, metrics
from streamlit.testing.v1 import AppTest


def answer_key(at: AppTest) -> str:
    """The answer widget's key: one per run and round, so every question starts blank."""
    return f"_ans_{id(at.session_state['stepper'])}_{at.session_state['_awaiting']}"


def step_until_a_question(at: AppTest, limit: int = 10) -> None:
    """Step until a round with drafts asks its question (a round with no drafts has nothing to ask)."""
    for _ in range(limit):
        at.button(key="b_step").click().run()
        if at.session_state["_awaiting"] is not None:
            return
    raise AssertionError("no round asked a question")


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_a_round_waits_for_the_answer_then_reveals_and_marks_it(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, student=True, question="tick", hint="p", seed=3)
    assert_clean(at)
    step_until_a_question(at)
    assert_clean(at)
    trace = at.session_state["stepper"].current
    assert at.session_state["stage"] == 2 and at.button(key="b_step").disabled
    assert not [c for c in at.segmented_control if c.key == "stage"]  # stages 3-5 are hidden
    assert any("Your turn." in m.value for m in at.markdown)
    assert metrics(at)["Rounds"] == str(trace.index)  # the totals would give the answer away
    at.pills(key=answer_key(at)).set_value([0]).run()
    at.button(key=f"b_reveal_{trace.index}").click().run()
    assert_clean(at)
    assert at.session_state["stage"] >= 3 and not at.button(key="b_step").disabled
    said = [m for m in [*at.success, *at.warning] if "drafts judged right" in m.value]
    assert len(said) == 1
    answer = at.session_state["_answers"][trace.index]
    assert [m.predicted_kept for m in answer.marks] == [i == 0 for i in range(trace.num_drafted)]
    assert f"**{answer.drafts_right} of {trace.num_drafted}** drafts judged right" in said[0].value
    assert metrics(at)["Rounds answered"] == "1" and metrics(at)["Rounds"] == str(trace.index + 1)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_reset_asks_again_and_back_returns_to_the_open_question(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, student=True, seed=3)
    step_until_a_question(at)
    at.button(key=f"b_reveal_{at.session_state['_awaiting']}").click().run()
    step_until_a_question(at)  # a second question: there is a round before it
    waiting = at.session_state["_awaiting"]
    at.button(key="b_back").click().run()
    assert not at.button(key="b_step").disabled  # the round before was answered: free to look at
    at.button(key="b_step").click().run()
    assert at.session_state["_awaiting"] == waiting and at.button(key="b_step").disabled
    at.button(key=f"b_reveal_{waiting}").click().run()
    assert set(at.session_state["_answers"]) >= {waiting}
    at.button(key="b_reset").click().run()
    assert at.session_state["_answers"] == {} and at.session_state["_awaiting"] is None
    assert at.session_state["_score"].rounds_answered == 2  # the session's score stays
    assert_clean(at)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_count_question_and_the_score_over_rounds(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, student=True, question="count", hint="q", seed=1)
    for _ in range(3):
        step_until_a_question(at)
        assert at.session_state["stage"] == 1  # only the drafts and q in view
        trace = at.session_state["stepper"].current
        at.segmented_control(key=answer_key(at)).set_value(trace.num_drafted).run()
        at.button(key=f"b_reveal_{trace.index}").click().run()
        assert_clean(at)
    score = at.session_state["_score"]
    assert score.rounds_answered == 3 and metrics(at)["Rounds answered"] == "3"
    assert any("You said **" in m.value for m in [*at.success, *at.warning])


def test_greedy_questions_say_the_argmax_rule(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, student=True, temperature=0.0)
    step_until_a_question(at)
    rule = "a draft is kept exactly when it is the target's most likely token"
    assert any(rule in c.value for c in at.caption)


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_an_instructors_link_opens_student_mode_with_the_same_rounds(tiny_pair_dirs):
    runs = []
    for _ in range(2):
        at = AppTest.from_file(APP, default_timeout=60)
        at.session_state["target"] = tiny_pair_dirs["target"]
        at.session_state["drafter"] = tiny_pair_dirs["draft"]
        at.query_params.update({"student": "1", "question": "count", "hint": "q", "seed": "9", "chat": "0",
                                "prompt": "def add(a, b):"})
        at.run()
        at.switch_page(ROUNDS).run()
        assert at.session_state["student"] and at.session_state["question"] == "count"
        step_until_a_question(at)
        runs.append([t.emitted_tokens for t in at.session_state["stepper"].traces])
    assert runs[0] == runs[1]


def test_a_link_with_an_unknown_question_falls_back_with_a_notice(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]  # not the bundled draft, loaded in the background
    at.query_params.update({"student": "1", "question": "essay"})
    at.run()
    assert at.session_state["question"] == "tick"
    assert any("question='essay' is not one of tick, count" in w.value for w in at.warning)


def test_untrusted_tokens_stay_escaped_in_student_mode(tiny_pair_dirs, monkeypatch):
    from specdec.views.stepper import Stepper

    monkeypatch.setattr(Stepper, "label", lambda self, token_id: XSS)
    at = make_app(tiny_pair_dirs, ROUNDS, prompt=XSS, student=True)
    step_until_a_question(at)
    pills = at.pills(key=answer_key(at))
    assert pills.options and all("<script>" not in option for option in pills.options)
    at.button(key=f"b_reveal_{at.session_state['stepper'].current.index}").click().run()
    assert_clean(at)
    html_seen = "\n".join(m.value for m in at.markdown if m.proto.allow_html).lower()
    assert "<script" not in html_seen and "<img" not in html_seen and "&lt;script&gt;" in html_seen
