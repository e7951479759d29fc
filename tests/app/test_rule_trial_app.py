"""The rule on trial in AppTest with the tiny pair, and the round view under each acceptance rule."""

import pytest
from app_driver import APP, assert_clean, errors, make_app, metrics
from streamlit.testing.v1 import AppTest

from specdec.config import RULE_NAMES, SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL

PAGE, ROUNDS = "app_pages/rule_trial.py", "app_pages/rounds.py"
# Stage 3's own test, as each rule's lines read it (above temperature 0).
TEST_WORDS = {SPECULATIVE: "min(1, p/q)=", TOP_CHOICE: "the target's argmax",
              SAMPLE_COMPARE: "the target drew y", TYPICAL: "threshold"}


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning) + "\n".join(w.value for w in at.sidebar.warning)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_trial_runs_each_rule_and_marks_the_lossy_ones(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    assert_clean(at)
    assert not errors(at)
    at.number_input(key="_rt_samples").set_value(10).run()
    at.button(key="b_rt_run").click().run()
    assert_clean(at)
    assert not errors(at)
    rows = at.table[1].value.to_dict("records")  # the first table lists the rules
    assert [r["rule"] for r in rows] == [
        "speculative sampling", "the top choice matches ⚠ lossy",
        "sample and compare", "typical acceptance (Medusa) ⚠ lossy",
    ]
    assert all(0 <= float(r["acceptance α"]) <= 1 and 0 <= float(r["TV from target"]) <= 1 for r in rows)
    assert len(at.get("plotly_chart")) == 2  # acceptance against distance; p against each exact law
    assert "Noise band (the target's two halves, re-split 200 times): TV 0 to" in markdown(at)
    # The band column agrees with the numbers beside it
    band = float(markdown(at).split("TV 0 to **")[1].split("**")[0])
    assert all((r["in noise band"] == "yes") == (float(r["TV from target"]) <= band + 5e-4) for r in rows)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_sweep_covers_every_temperature_and_set(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.number_input(key="_rt_per_set").set_value(1)
    at.number_input(key="_rt_sweep_tokens").set_value(8).run()
    at.button(key="b_rt_sweep").click().run()
    assert_clean(at)
    rows = at.dataframe[0].value.to_dict("records")
    assert {(r["T"], r["set"]) for r in rows} == {(t, s) for t in (0.0, 0.3, 0.6, 1.0, 1.5)
                                                   for s in ("code", "prose")}
    assert "lowest speed-up here is" in markdown(at)


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
@pytest.mark.parametrize("rule", RULE_NAMES)
def test_round_view_shows_each_rules_own_test(tiny_pair_dirs, rule):
    at = make_app(tiny_pair_dirs, ROUNDS, rule=rule, temperature=1.0, gamma=3, max_new_tokens=24)
    for _ in range(4):  # a few rounds, so at least one tests a draft
        at.button(key="b_step").click().run()
    assert_clean(at)
    at.session_state["stage"] = 3
    at.run()
    assert_clean(at)
    assert TEST_WORDS[rule] in markdown(at)
    lossy = "Lossy rule" in warnings(at)
    assert lossy == (rule in (TOP_CHOICE, TYPICAL))


def test_a_link_with_an_unknown_rule_falls_back_with_a_notice(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["rule"] = "argmax"
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    at.run()
    assert_clean(at)
    assert at.session_state["rule"] == SPECULATIVE
    assert any("rule='argmax' is not one of" in w.value for w in at.warning)


def test_a_link_sets_the_rule(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["rule"] = TYPICAL
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    at.run()
    assert_clean(at)
    assert at.session_state["rule"] == TYPICAL
    assert "Lossy rule" in warnings(at)


# -- exact answers, the offered position, a student's own rule (measure.exact) ----------------------------


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_trial_shows_each_rules_exact_law_and_says_what_samples_cannot_see(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.number_input(key="_rt_samples").set_value(10).run()  # few samples: a high noise floor
    at.button(key="b_rt_run").click().run()
    assert_clean(at)
    rows = at.table[1].value.to_dict("records")
    exact = {r["rule"]: float(r["TV exact"]) for r in rows}
    assert exact["speculative sampling"] < 1e-3 and exact["sample and compare"] < 1e-3
    assert len(at.get("plotly_chart")) == 2  # acceptance against distance; p against each exact law
    # With 10 samples the top choice's loss is below the floor here; the page says why, in numbers,
    # and where along a target sample it would show (a button), or that on this prompt it cannot.
    hidden = [w.value for w in at.warning if "cannot be seen at this position" in w.value]
    assert any("the top choice matches" in w and "noise floor" in w for w in hidden), hidden
    offered = [b for b in at.button if b.key == "b_rt_offer"]
    infos = [i.value for i in at.info if "cannot be seen with 10 samples" in i.value]
    assert len(offered) + len(infos) == 1
    if offered:  # one click: the trial moves there and runs
        offered[0].click().run()
        assert_clean(at)
        assert any("The trial runs at token" in i.value for i in at.info)
        assert len(at.table) >= 2 and at.button(key="b_rt_back")


@pytest.mark.parametrize("preset, verdict", [(4, "lossy"), (0, "lossless"), (2, "lossless"), (1, "lossy")])
def test_a_preset_is_judged_in_one_click(tiny_pair_dirs, preset, verdict):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.button(key=f"b_rt_preset_{preset}").click().run()
    assert_clean(at)
    shown = metrics(at)
    assert shown["verdict"] == verdict
    if verdict == "lossless":
        assert float(shown["exact TV from p"]) < 1e-6
    assert len(at.get("plotly_chart")) == 1  # your rule's exact law against p


def test_p_greater_than_q_typed_in_is_lossy_and_sampled(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.number_input(key="_rt_samples").set_value(10)
    at.text_input(key="w_accept").input("p > q").run()
    assert_clean(at)
    assert metrics(at)["verdict"] == "lossy" and at.session_state["accept"] == "p > q"
    at.button(key="b_rt_own").click().run()
    assert_clean(at)
    assert "Sampled: 10 first tokens of your rule" in markdown(at)


@pytest.mark.parametrize("text, words", [("__import__('os')", "cannot be called"), ("9**9**9", "exponent"),
                                         ("p" * 10_000, "at most 200"),
                                         ("1/0", "divides by zero")])
def test_a_bad_expression_is_one_line(tiny_pair_dirs, text, words):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.text_input(key="w_accept").input(text).run()
    assert_clean(at)
    said = [e for e in errors(at) if "rule expression" in e]
    assert len(said) == 1 and words in said[0] and "\n" not in said[0]


def test_a_link_carries_a_students_rule(tiny_pair_dirs):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"accept": "p/(p+q)", "on_reject": "draft", "chat": "0"})
    at.session_state["target"] = tiny_pair_dirs["target"]
    at.session_state["drafter"] = tiny_pair_dirs["draft"]
    at.run()
    at.switch_page(PAGE).run()
    assert_clean(at)
    assert at.text_input(key="w_accept").value == "p/(p+q)"
    assert at.selectbox(key="w_on_reject").value == "draft"
    assert metrics(at)["verdict"] == "lossy"
