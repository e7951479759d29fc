"""The rule on trial in AppTest with the tiny pair, and the round view under each acceptance rule."""

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, assert_clean, errors, make_app

from specdec.config import RULE_NAMES, SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL

PAGE, ROUNDS = "app_pages/rule_trial.py", "app_pages/rounds.py"
# Stage 3's own test, as each rule's lines read it (above temperature 0).
TEST_WORDS = {SPECULATIVE: "min(1, p/q)=", TOP_CHOICE: "the target's argmax",
              SAMPLE_COMPARE: "the target drew y", TYPICAL: "threshold"}  # fmt: skip


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning) + "\n".join(w.value for w in at.sidebar.warning)


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
    ]  # fmt: skip
    assert all(0 <= float(r["acceptance α"]) <= 1 and 0 <= float(r["TV from target"]) <= 1 for r in rows)
    assert len(at.get("plotly_chart")) == 1
    assert "Noise band (the target's two halves, re-split 200 times): TV 0 to" in markdown(at)
    # The band column agrees with the numbers beside it
    band = float(markdown(at).split("TV 0 to **")[1].split("**")[0])
    assert all((r["in noise band"] == "yes") == (float(r["TV from target"]) <= band + 5e-4) for r in rows)


def test_sweep_covers_every_temperature_and_set(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    at.number_input(key="_rt_per_set").set_value(1)
    at.number_input(key="_rt_sweep_tokens").set_value(8).run()
    at.button(key="b_rt_sweep").click().run()
    assert_clean(at)
    rows = at.dataframe[0].value.to_dict("records")
    assert {(r["T"], r["set"]) for r in rows} == {(t, s) for t in (0.0, 0.3, 0.6, 1.0, 1.5)
                                                   for s in ("code", "prose")}  # fmt: skip
    assert "lowest speed-up here is" in markdown(at)


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
