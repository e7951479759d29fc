"""Round by round as a lecture runs it (AppTest, the tiny pair): nothing shows a round's outcome before
its test, the instructor steps one stage per click, presenter mode puts the round first, and the
playback settings survive an error."""

import pyarrow as pa
from app_driver import ROUNDS, assert_clean, make_app, metrics


def stage(at) -> int:
    return at.session_state["stage"]


def timeline_rounds(at) -> set[int]:
    """The rounds the timeline draws a column for (its chart's data)."""
    [chart] = at.get("vega_lite_chart")
    return set(pa.ipc.open_stream(chart.proto.data.data).read_all().column("round").to_pylist())


def walk(nodes):
    """Every element under `nodes`, in page order."""
    for node in nodes:
        yield node
        children = getattr(node, "children", None)
        if children:
            yield from walk(children.values() if isinstance(children, dict) else children)


def test_no_counter_or_timeline_column_gives_a_round_away_before_its_test(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, gamma=3, seed=1)
    for _ in range(2):  # two rounds, each shown to its end
        at.button(key="b_step").click().run()
        at.segmented_control(key="stage").set_value(5).run()
    before = metrics(at)
    assert timeline_rounds(at) == {1, 2}
    at.button(key="b_step").click().run()  # round 3 at stage 1 (a browser then animates the stages)
    assert_clean(at)
    assert stage(at) == 1
    for shown in (1, 2):
        at.segmented_control(key="stage").set_value(shown).run()
        assert metrics(at) == before, shown  # drafted and scored, not yet tested: nothing counted
        assert timeline_rounds(at) == {1, 2}  # and no column for round 3 yet
    at.segmented_control(key="stage").set_value(3).run()
    after = metrics(at)
    assert after["Rounds"] == "3" and after != before
    assert timeline_rounds(at) == {1, 2, 3}


def test_one_stage_per_click_steps_through_the_round_then_to_the_next(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, gamma=3, seed=1, stage_per_click=True)
    at.button(key="b_step").click().run()
    assert_clean(at)
    assert stage(at) == 1 and len(at.session_state["stepper"].traces) == 1
    for expected in (2, 3, 4, 5):
        at.button(key="b_step").click().run()
        assert stage(at) == expected
        assert len(at.session_state["stepper"].traces) == 1  # the same round, a stage further
    at.button(key="b_back").click().run()
    assert stage(at) == 4 and at.session_state["stepper"].shown == 0
    at.button(key="b_step").click().run()
    at.button(key="b_step").click().run()  # past stage 5: the next round, at stage 1
    assert stage(at) == 1 and len(at.session_state["stepper"].traces) == 2
    at.button(key="b_back").click().run()  # at stage 1, Back goes to the round before, at its end
    assert stage(at) == 5 and at.session_state["stepper"].shown == 0


def test_presenter_mode_puts_the_round_first_and_folds_the_inputs_away(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, presenter=True)
    assert at.session_state["stage_per_click"]  # the instructor's pace is presenter mode's default
    assert at.expander[0].label == "Prompt and playback"
    assert any(area.label.startswith("Prompt") for area in at.expander[0].text_area)
    at.button(key="b_step").click().run()
    assert_clean(at)
    order = [(type(node).__name__, str(getattr(node, "value", ""))) for node in walk(at.main)]
    heading = next(i for i, (kind, value) in enumerate(order)
                   if kind == "Subheader" and value.startswith("Round 1"))
    first_metric = next(i for i, (kind, _) in enumerate(order) if kind == "Metric")
    assert heading < first_metric, order  # "Round 1 of 1" above the counters
    at.session_state["presenter"] = False
    at.run()
    assert not at.expander or at.expander[0].label != "Prompt and playback"  # a laptop shows the inputs


def test_playback_settings_survive_an_empty_prompt(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS)
    at.select_slider(key="w_speed").set_value("relaxed").run()
    at.toggle(key="w_animate_stages").set_value(False).run()
    at.text_area(key="_prompt_w").set_value("").run()  # the page stops with its message here
    assert any("empty" in e.value for e in at.error)
    at.text_area(key="_prompt_w").set_value("def add(a, b):").run()
    assert_clean(at)
    assert at.session_state["speed"] == "relaxed" and at.select_slider(key="w_speed").value == "relaxed"
    assert at.session_state["animate_stages"] is False and at.toggle(key="w_animate_stages").value is False


def test_a_students_question_sits_under_the_drafts_above_everything_else(tiny_pair_dirs):
    at = make_app(tiny_pair_dirs, ROUNDS, gamma=3, seed=1, student=True)
    assert not any("Play" in info.value for info in at.info)  # Play waits in student mode: not offered
    for _ in range(3):
        at.button(key="b_step").click().run()
        if at.session_state["_awaiting"] is not None:
            break
    assert at.session_state["_awaiting"] is not None, "no round with drafts to ask about"
    order = [(type(node).__name__, str(getattr(node, "value", ""))) for node in walk(at.main)]
    asked = next(i for i, (_, value) in enumerate(order) if value.startswith("**Your turn.**"))
    strip = next(i for i, (kind, value) in enumerate(order)
                 if kind == "Markdown" and 'class="sd-line"' in value)
    first_metric = next(i for i, (kind, _) in enumerate(order) if kind == "Metric")
    assert strip < asked < first_metric, order


def test_presenter_mode_folds_the_prompt_of_live_speed_up_and_variants(tiny_pair_dirs):
    """The prompt box folds into an expander that names the prompt (its Markdown escaped); a laptop
    shows the box as it is."""
    for page, key in (("app_pages/speedup.py", "_sp_prompt"), ("app_pages/variants.py", "_va_prompt")):
        at = make_app(tiny_pair_dirs, page, presenter=True, prompt="**bold** [link](x) def add(a, b):")
        at.session_state[key] = "**bold** [link](x) def add(a, b):"
        at.run()
        assert_clean(at)
        folded = [e for e in at.expander if e.label.startswith("Prompt: ")]
        assert len(folded) == 1, [e.label for e in at.expander]
        assert "\\*\\*bold\\*\\*" in folded[0].label and any(a.key == key for a in folded[0].text_area)
        at.session_state["presenter"] = False
        at.run()
        assert not [e for e in at.expander if e.label.startswith("Prompt: ")]
        assert any(a.key == key for a in at.text_area)
