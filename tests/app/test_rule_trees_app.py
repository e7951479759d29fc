"""The rule on trial's section 3 in AppTest with the tiny pair: the four multi-candidate rules, each
with its exact law beside samples and its acceptance."""

import pytest
from app_driver import assert_clean, errors, make_app

PAGE = "app_pages/rule_trial.py"


@pytest.mark.slow  # a model pass and 4 × 300 samples: seconds on a 2-core machine
def test_the_tree_rules_are_judged_exactly_and_sampled(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, PAGE, gamma=2)
    assert any(h.value == "3 · Several candidates at one position" for h in at.header)
    at.number_input(key="_rt_tree_samples").set_value(300)
    at.selectbox(key="_rt_width").set_value(2).run()
    at.button(key="b_rt_trees").click().run()
    assert_clean(at)
    assert not errors(at)
    rows = at.table[-1].value.to_dict("records")
    assert [r["rule"] for r in rows] == [
        "without replacement (recursive rejection)", "with replacement (SpecInfer)",
        "without replacement, q left whole ⚠ lossy", "q's top k, judged as if drawn ⚠ lossy",
    ]
    exact = {r["rule"]: float(r["TV exact"]) for r in rows}
    assert exact["without replacement (recursive rejection)"] < 1e-6
    assert exact["with replacement (SpecInfer)"] < 1e-6
    assert all(0 <= float(r["one kept"]) <= 1 and 0 <= float(r["exactly"]) <= 1 for r in rows)
    assert len(at.get("plotly_chart")) == 2  # acceptance by rank beside one draft's; each rule's exact law
    assert "One draft here keeps" in "\n".join(m.value for m in at.markdown) + "\n".join(
        c.value for c in at.caption)
