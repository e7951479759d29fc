"""Round by round with a token tree (Settings.tree) in AppTest with the tiny pair: each stage draws the
tree's own view, uncoloured before the Accept stage, and the sibling test steps through its beats."""

import json

import pytest
from app_driver import ROUNDS, assert_clean, errors, make_app

from specdec.views import quiz, tree_view


def _charts(at) -> list[str]:
    """The plotly charts on screen, each as its title and its traces' names."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return [" | ".join([spec["layout"]["title"]["text"], *(t.get("name") or "" for t in spec["data"])])
            for spec in specs]


@pytest.mark.slow  # a few tree rounds of the tiny pair and five stages: seconds on a 2-core machine
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_each_stage_of_a_tree_round_draws_the_tree(tiny_pair_dirs, temperature):
    at = make_app(tiny_pair_dirs, ROUNDS, tree="8", temperature=temperature, gamma=3, max_new_tokens=24)
    at.button(key="b_step").click().run()
    assert_clean(at)
    assert not errors(at)
    trace = at.session_state["stepper"].current
    assert trace.tree is not None and len(trace.tree.tokens) > 2
    seen = {}
    for shown in (1, 2, 3, 4, 5):
        at.segmented_control(key="stage").set_value(shown).run()
        assert_clean(at)
        seen[shown] = _charts(at)
    # Before the Accept stage the tree is drawn, but no node says kept or rejected.
    assert any("tree: " in spec and "drafted tokens" in spec for spec in seen[1])
    assert not any(word in spec for spec in seen[1] + seen[2] for word in ("| kept", "| rejected"))
    assert any("Attention mask" in spec for spec in seen[2])
    assert any("kept / rejected / never tested" in spec for spec in seen[3])
    # At stage 3 the sibling test steps beat by beat: the last beat is the outcome.
    at.segmented_control(key="stage").set_value(3).run()
    steps = tree_view.sibling_steps(trace.tree.siblings[0])
    at.select_slider(key=f"_tbeat_{trace.index}_0").set_value(len(steps) - 1).run()
    assert_clean(at)
    text = "\n".join(m.value for m in at.markdown)
    assert "survives" in text or "Every candidate here was rejected" in text


@pytest.mark.slow  # a tree round of the tiny pair and a reveal: seconds on a 2-core machine
def test_student_mode_asks_which_branch_survives(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, tree="8", temperature=1.0, student=True, seed=3)
    at.button(key="b_step").click().run()
    assert_clean(at)
    trace = at.session_state["stepper"].current
    assert at.session_state["_awaiting"] == trace.index
    assert any("Which branch survives?" in m.value for m in at.markdown)
    # Before the reveal nothing says which node was kept.
    assert not any("kept / rejected" in spec for spec in _charts(at))
    key = f"_ans_{id(at.session_state['stepper'])}_{trace.index}"
    first = quiz.branch_options(trace)[0]
    at.segmented_control(key=key).set_value(first).run()
    at.button(key=f"b_reveal_{trace.index}").click().run()
    assert_clean(at)
    boxes = [box.value for box in (*at.success, *at.warning) if "survived" in box.value]
    assert len(boxes) == 1 and "candidate 1" in boxes[0]
    right = bool(trace.tree.path) and trace.tree.path[0] == first
    assert (boxes[0] in [box.value for box in at.success]) == right


@pytest.mark.slow  # three lanes of the tiny pair: seconds on a 2-core machine
def test_live_speed_up_races_tree_against_chain(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, "app_pages/speedup.py", temperature=1.0, max_new_tokens=12, tree="8")
    assert_clean(at)
    at.button(key="b_tree_race").click().run()
    assert_clean(at)
    assert not errors(at)
    rows = at.table[-1].value.to_dict("records")
    assert [row["lane"] for row in rows] == ["tree (8)", "chain", "target only"]
    assert any("tokens per target pass against the chain's" in m.value for m in at.markdown)
