"""Class mode in AppTest with the tiny pair: the instructor's link opens and reveals, a student's link
answers, and a student's link cannot do what the key does, whatever the address bar says."""

import pytest
from app_driver import APP, PROMPT, assert_clean
from streamlit.testing.v1 import AppTest

from specdec.classroom.store import ClassStore
from specdec.views import class_questions

HOME = "app_pages/home.py"


@pytest.fixture
def room(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    monkeypatch.setenv("SPECDEC_CLASS_DB", url)
    from app_pages import class_poll

    class_poll._store.clear()  # the process's store, opened afresh on this test's database
    store = ClassStore(url)
    yield store, store.open_class()
    class_poll._store.clear()


def open_app(tiny_pair_dirs, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in {"target": tiny_pair_dirs["target"], "drafter": tiny_pair_dirs["draft"], "chat": False,
                       "prompt": PROMPT}.items():
        at.session_state[key] = value
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def buttons(at: AppTest) -> dict:
    return {b.key: b for b in at.button if b.key and b.key.startswith("b_class_")}


@pytest.mark.slow
def test_the_instructor_opens_a_student_answers_the_instructor_reveals(tiny_pair_dirs, room):
    store, invite = room
    teacher = open_app(tiny_pair_dirs, **{"class": invite.code, "key": invite.key})
    assert_clean(teacher)
    assert "key" not in teacher.query_params and teacher.query_params["class"] == invite.code
    buttons(teacher)["b_class_check_open"].click().run()
    assert store.asked(invite.code, "check").state == "open"

    student = open_app(tiny_pair_dirs, **{"class": invite.code})
    assert_clean(student)
    assert not buttons(student)  # no instructor control on a student's screen
    assert any(class_questions.CHECK.text in m.value for m in student.markdown)
    student.radio(key="class_check_choice").set_value(1)
    student.text_input(key="class_nickname").set_value("  <b>Ada</b>  ")
    student.button[[b.label for b in student.button].index("Send my answer")].click().run()
    assert_clean(student)
    result = store.tally(invite.code, "check")
    assert result.count == 1 and result.per_option == (0, 1, 0, 0)
    assert store.export(invite.code)[0]["nickname"] == "<b>Ada</b>"

    teacher.run()
    assert [m.value for m in teacher.metric if m.label == "Answers in"] == ["1"]
    buttons(teacher)["b_class_check_reveal"].click().run()
    assert_clean(teacher)
    assert store.asked(invite.code, "check").truth == class_questions.CHECK.correct
    assert any("1 of 1 chose it" in m.value for m in teacher.markdown)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["", "wrong", "A" * 22, "<script>alert(1)</script>"])
def test_a_student_link_with_any_key_gets_no_control(tiny_pair_dirs, room, key):
    store, invite = room
    at = open_app(tiny_pair_dirs, **{"class": invite.code, "key": key})
    assert_clean(at)
    assert not buttons(at)
    assert any("you are here as a student" in w.value for w in at.warning)
    assert "key" not in at.query_params


@pytest.mark.slow
@pytest.mark.parametrize("code", ["ACDEFG", "<img src=x onerror=alert(1)>", "x" * 500])
def test_an_unknown_or_hostile_code_is_one_line(tiny_pair_dirs, room, code):
    at = open_app(tiny_pair_dirs, **{"class": code})
    assert_clean(at)
    notices = [w.value for w in at.warning if w.value.startswith("Class link:")]
    assert len(notices) == 1 and "\n" not in notices[0]
    assert "class" not in at.query_params


@pytest.mark.slow
def test_presenter_mode_opens_a_class_from_the_sidebar(tiny_pair_dirs, room):
    store, _ = room
    at = open_app(tiny_pair_dirs, presenter="1")
    at.sidebar.button(key="b_class_open").click().run()
    assert_clean(at)
    code, key = at.session_state["_class_code"], at.session_state["_class_key"]
    assert store.is_instructor(code, key)
    assert at.query_params["class"] == code and "key" not in at.query_params
    assert any(f"?class={code}" in m.value for m in at.sidebar.markdown)  # the student link, for the room
    assert not any(key in m.value for m in [*at.markdown, *at.sidebar.markdown])  # never the key
    assert "b_class_check_open" in buttons(at)  # the home page's question, ready to ask


@pytest.mark.slow
def test_round_by_round_asks_each_round_and_reveals_its_test(tiny_pair_dirs, room):
    store, invite = room
    at = open_app(tiny_pair_dirs, **{"class": invite.code, "key": invite.key})
    at.switch_page("app_pages/rounds.py").run()
    for _ in range(5):  # a round with drafts (a round with none has nothing to ask)
        at.button(key="b_step").click().run()
        trace = at.session_state["stepper"].current
        if trace is not None and trace.num_drafted:
            break
    question_id = f"round-{trace.index + 1}"
    buttons(at)[f"b_class_{question_id}_open"].click().run()
    asked = store.asked(invite.code, question_id)
    assert asked.state == "open" and len(asked.question.options) == trace.num_drafted + 1
    store.answer(invite.code, question_id, "browser-0001", (float(trace.num_drafted),))
    buttons(at)[f"b_class_{question_id}_reveal"].click().run()
    assert_clean(at)
    assert store.asked(invite.code, question_id).truth == (float(trace.num_accepted),)


@pytest.mark.slow
def test_code_vs_prose_reveals_only_what_was_measured(tiny_pair_dirs, room):
    store, invite = room
    at = open_app(tiny_pair_dirs, **{"class": invite.code, "key": invite.key})
    at.switch_page("app_pages/code_vs_prose.py").run()
    buttons(at)["b_class_code-vs-prose_open"].click().run()
    store.answer(invite.code, "code-vs-prose", "browser-0001", (80.0, 30.0))
    buttons(at)["b_class_code-vs-prose_reveal"].click().run()
    assert_clean(at)
    assert any("Run the prompt sets first" in w.value for w in at.warning)
    assert store.asked(invite.code, "code-vs-prose").state == "open"  # nothing revealed without a run
    at.session_state["_cp_results"] = {"run": ([{"category": "code", "acceptance_rate": 0.75},
                                                {"category": "prose", "acceptance_rate": 0.35}], True)}
    buttons(at)["b_class_code-vs-prose_reveal"].click().run()
    assert store.asked(invite.code, "code-vs-prose").truth == (75.0, 35.0)
    assert any("median guess 80%: 5 points too high" in m.value for m in at.markdown)
