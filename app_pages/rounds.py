"""Round by round: step through speculative decoding, one round in five stages."""

import json

import streamlit as st

from app_pages import class_poll, student, ui
from app_pages.round_stages import STAGES, draft_strip, mark_click
from app_pages.round_tree import STAGE_VIEWS
from specdec.config import SPECULATIVE
from specdec.core.acceptance import RULES
from specdec.errors import SpecDecError
from specdec.views import charts, class_questions, kvcache, playback
from specdec.views.charts.style import spec_for_projector
from specdec.views.playback import ALL, SPEEDS
from specdec.views.stepper import Stepper
from specdec.views.tokens import prose_and_code

ui.init_state()  # app.py did this already; repeated so the page also runs on its own (AppTest)
state = st.session_state
# Plain keys (speed, animate_stages, stage_per_click are mirrored by their widgets, ui.mirrored): a
# widget's own state is dropped on a run that stops before drawing it (an empty prompt), and the
# setting must survive that. The instructor's pace, one stage per click, is on in presenter mode.
playback.start(state, presenter=ui.presenter())
student.init()

if not ui.presenter():  # on a projector the round itself heads the page: every line counts
    st.title("Round by round")
st.markdown(ui.TOKEN_CSS + ui.STEADY_WHILE_RUNNING_CSS, unsafe_allow_html=True)


# -- prompt ------------------------------------------------------------------------------------


def _use_ready_prompt() -> None:
    choice = state.get("_ready")
    if choice and " · " in choice:
        category, number = choice.split(" · ", 1)
        state["prompt"] = ui.ready_prompts()[category][int(number.split(".")[0]) - 1]
        state["_prompt_w"] = state["prompt"]


def _prompt_edited() -> None:
    state["prompt"] = state["_prompt_w"]


ready = [
    f"{category} · {i + 1}. {text[:70]}"
    for category, prompts in ui.ready_prompts().items()
    for i, text in enumerate(prompts)
]
if "_prompt_w" in state and state["_prompt_w"] != state["prompt"]:
    state["_prompt_w"] = state["prompt"]  # set elsewhere (a ready prompt, a link): the box shows it
# On a projector the class looks at the round, not the controls: they fold into an expander.
inputs = ui.inputs_box("Prompt and playback")
left, right = inputs.columns([3, 2])
right.selectbox("Ready prompts", ready, index=None, key="_ready", on_change=_use_ready_prompt,
                placeholder="code, prose or copy-heavy…")
# The prompt is also the widget's default: its own state is dropped when the page is left, and a box
# the browser draws afresh while the models load starts from its default (an empty default was
# sent back as an empty prompt when three sessions opened a cold server at once).
left.text_area(
    "Prompt (changing it starts a fresh run)", value=state["prompt"], key="_prompt_w", height=90,
    on_change=_prompt_edited, max_chars=ui.server_limits().max_prompt_chars,
)

pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, state["prompt"])

run_key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
if state.get("_run_key") != run_key:
    state["stepper"] = Stepper(pair, prompt_ids, settings, prefill_chunk=ui.server_limits().prefill_chunk,
                               live_runs=ui.live_runs())
    state["_figures"] = {}  # (round, chart, position) -> figure: built once, redrawn from here
    state["_run_key"] = run_key
    state["stage"], state["playing"], state["animating"] = 5, False, False
    student.new_run()
stepper: Stepper = state["stepper"]
with inputs:
    student.controls()


def _read_prompt() -> None:
    """Read the prompt into both models when it is set (in chunks, sharing the models with other
    sessions), so that a Step then only runs a round."""
    if stepper.prompt_read:
        return
    progress = st.progress(0.0, text=f"Reading the prompt ({len(stepper.prompt_ids):,} tokens)…")

    def waiting(ahead: int) -> None:
        progress.progress(0.0, text=ui.waiting_message(ahead))

    try:
        for fraction in stepper.read_prompt(on_wait=waiting):
            progress.progress(fraction, text=f"Reading the prompt ({len(stepper.prompt_ids):,} tokens)…")
    except SpecDecError as error:  # out of memory, say
        st.error(str(error), icon=":material/error:")
        st.stop()
    progress.empty()


_read_prompt()
greedy = settings.sampling.greedy
rule = RULES[settings.rule]  # at temperature 0 every rule is the greedy rule
if ui.lossy_rule_in_use():
    st.warning(f"Rule: **{rule.title}**. {ui.LOSSY_NOTE} (see *The rule on trial*).",
               icon=":material/warning:")
elif settings.rule != SPECULATIVE and not greedy:
    st.info(f"Rule: **{rule.title}** (exact, but it accepts less than speculative sampling).",
            icon=":material/rule:")


# -- controls ----------------------------------------------------------------------------------


def _step() -> None:
    """The Step button: the next stage (one stage per click), or the next round, computed in the
    fragment, where waiting can be shown."""
    state["_clicked"] = True
    if playback.step(state, round_shown=stepper.current is not None):
        state["_steps_pending"] = state.get("_steps_pending", 0) + 1  # clicks before the fragment ran count


def _run_pending_step() -> None:
    """Compute the next round, telling the student how many requests are ahead while the models are busy."""
    note, shown = st.empty(), False

    def waiting(ahead: int) -> None:
        nonlocal shown
        note.info(ui.waiting_message(ahead), icon="⏳")
        shown = True

    try:
        trace = stepper.step(on_wait=waiting)
    except SpecDecError as error:  # out of memory, or a freed run that replayed otherwise
        note.error(str(error), icon=":material/error:")
        state["playing"] = False
        return
    if trace is not None:
        playback.new_round(state, student.ask_stage() if student.on_new_round(trace) else None)
    elif stepper.at_end:
        state["playing"] = False
    if shown:
        note.empty()


def _back() -> None:
    """Back a round, or with one stage per click, back a stage (then to the round before, at its end)."""
    state["_clicked"] = True
    if playback.back(state, round_shown=stepper.current is not None):
        stepper.back()


def _reset() -> None:
    state["_clicked"] = True
    stepper.reset()
    student.new_run()  # the rounds replay; their questions are asked afresh
    playback.reset(state)


def _play() -> None:
    state["_clicked"] = True
    playback.toggle_play(state)


def _tick() -> None:
    """One timer beat: the next draft of stage 1, the next stage, or the next round."""
    current = stepper.current
    drafts = current.num_drafted if current is not None else None
    if playback.tick(state, drafts, waits_for_answer=student.active()) != playback.NEXT_ROUND:
        return
    try:
        trace = stepper.step()
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        trace = None
    if trace is None:
        state["playing"] = False
        return
    playback.played_round(state)


timer_interval = playback.timer_interval(state)  # what the fragment below is set up with on this run

# -- the round view (a fragment: buttons and timer beats redraw only this part) ----------------


def _counters(hide_current: bool) -> None:
    """`hide_current`: totals before the shown round (its acceptance would answer the question)."""
    c = stepper.counters(stepper.shown - 1 if hide_current else None)
    cols = st.columns(5)
    cols[0].metric("Rounds", c.rounds)
    cols[1].metric("Target passes", c.target_passes)
    cols[2].metric("Tokens emitted", c.tokens_emitted)
    cols[3].metric("Acceptance so far", f"{c.acceptance_rate:.0%}" if c.drafted else "–",
                   help=f"{c.accepted} of {c.drafted} drafted tokens kept")
    cols[4].metric("Tokens per pass", f"{c.tokens_per_pass:.2f}" if c.rounds else "–")


def _stage_chosen() -> None:
    mark_click()
    state["revealed"] = ALL



@st.fragment(run_every=timer_interval)
def round_view() -> None:
    beat = not state.pop("_clicked", False) and not state.pop("_full_run", False)
    for _ in range(state.pop("_steps_pending", 0)):
        _run_pending_step()
    if beat and timer_interval:
        _tick()
    if playback.timer_interval(state) != timer_interval:
        st.rerun(scope="app")  # the timer starts or stops: set the fragment up again

    waiting_for_answer = student.awaiting(stepper.current)
    trace = stepper.current
    stage = _shown_stage(trace, waiting_for_answer)
    _buttons(waiting_for_answer)
    # Nothing may show the round's outcome before the stage that decides it (stage 3, the test): until
    # then the counters and the timeline stand where they stood before the Step.
    before_the_test = waiting_for_answer or (trace is not None and stage < 3)
    # The round first, in view after each Step, the totals under it: on a projector, and for a student
    # asked about the round (the question sits under the drafts, not under a table and a chart).
    round_first = ui.presenter() or student.active()
    if round_first:
        _round(trace, stage, waiting_for_answer)
    _counters(hide_current=before_the_test)
    _timeline(hide_current=before_the_test)
    _output(trace)  # under the timeline: the text so far, as chips and as text
    if not round_first:
        _round(trace, stage, waiting_for_answer)
    if trace is not None:
        _cache_strip(trace, stage)
    if student.active():
        student.score_panel()


def _shown_stage(trace, waiting_for_answer: bool) -> int:
    """The stage on screen: the question's while a student has not answered (stages 3-5 would give
    the answer away), else the one chosen."""
    if trace is not None and waiting_for_answer:
        state["stage"] = student.ask_stage()
    return playback.stage(state)


def _buttons(waiting_for_answer: bool) -> None:
    """Step, Play, Back, Reset; → and ← step and go back (a presentation clicker sends them too)."""
    by_stage = bool(state["stage_per_click"])
    cols = st.columns(4)
    stages_left = playback.next_stage_only(state, round_shown=stepper.current is not None)
    cols[0].button("Step ▶|", on_click=_step, key="b_step",
                   disabled=stepper.at_end and not stages_left or waiting_for_answer,
                   width="stretch", shortcut="Right",
                   help="answer the question first" if waiting_for_answer else
                   "one stage per click (→)" if by_stage else "the next round (→)")
    play_help = "in student mode each round waits for your answer" if student.active() else None
    cols[1].button("Pause ⏸" if state["playing"] else "Play ▶", on_click=_play, width="stretch",
                   disabled=(stepper.at_end and not state["playing"]) or student.active(), key="b_play",
                   help=play_help)
    cols[2].button("Back |◀", on_click=_back, disabled=stepper.shown < 0, width="stretch", key="b_back",
                   shortcut="Left", help="a stage back (←)" if by_stage else "the round before (←)")
    cols[3].button("Reset ⟲", on_click=_reset, disabled=not stepper.traces, width="stretch", key="b_reset")


def _round(trace, stage: int, waiting_for_answer: bool) -> None:
    """The shown round at its stage: heading, stage picker, the drafts, the stage's view, the question."""
    if trace is None:
        play = "" if student.active() else ", or **Play** to watch rounds go by"  # Play waits in student mode
        st.info(f"Press **Step** to run the first round{play}. (→ steps too, ← goes back.)")
        return
    done = " · generation finished" if stepper.at_end else ""
    heading, stages = st.columns([2, 3], vertical_alignment="center") if ui.presenter() else (st, st)
    heading.subheader(f"Round {trace.index + 1} of {len(stepper.traces)} computed{done}")
    if not waiting_for_answer:
        stages.segmented_control("Stage", options=list(STAGES), format_func=STAGES.get, key="stage",
                                 label_visibility="collapsed", on_change=_stage_chosen)
    labels = stepper.labels_for(trace)
    st.markdown(draft_strip(stepper, trace, stage), unsafe_allow_html=True)
    class_poll.ask(class_questions.drafts_survive(trace.num_drafted, trace.index + 1),
                   reveal=lambda: (trace.num_accepted,))  # the room's guess, then this round's test
    if waiting_for_answer:  # the question right under the drafts it asks about
        student.question(trace, labels, greedy, on_reveal=_play_reveal)
    STAGE_VIEWS[stage](stepper, trace, labels)
    if not waiting_for_answer and stage >= 3:
        student.answer_box(trace, labels)


def _play_reveal(answer) -> None:
    """After an answer: play stages 3-5 (or show stage 3 when stages are not animated)."""
    mark_click()
    playback.show(state, 3, animating=state["animate_stages"])


def _cache_strip(trace, stage: int) -> None:
    rows = kvcache.cache_rows(trace, stage)
    if not rows:
        return
    st.markdown("**KV caches:** what each model has read; from stage 4 the rolled-back positions are grey.")
    with st.expander("How the caches move"):
        st.markdown(
            "Drafting and verifying add positions to the caches. From stage 4 the roll-back drops the "
            "positions after the first rejection (greyed). The target keeps the accepted drafts for free.\n\n"
            "The draft usually never fed its last proposal. After a bonus round it reads that token, with "
            "the bonus, next round. (An adaptive stop has fed it: it computed q for one more token, then "
            "stopped.)"
        )
    st.markdown(ui.cache_strip(rows, stepper.label), unsafe_allow_html=True)


def _output(trace) -> None:
    """The text so far as token chips, and beside it as readable text (code shown as code)."""
    shows_current = trace is not None and playback.stage(state) == playback.LAST_STAGE
    upto = stepper.shown if shows_current else stepper.shown - 1
    new_round = trace.index if shows_current else None
    chips, text = st.columns([3, 2])
    chips.markdown("**Output so far**")
    line = ui.output_line(stepper.output_tokens(upto), new_round) + ui.legend()
    chips.markdown(line, unsafe_allow_html=True)
    text.markdown("**As text**")
    for kind, part, language in prose_and_code(stepper.text(upto)):
        if kind == "code":
            text.code(part, language=language)
        else:
            text.text(part)


def _timeline_clicked() -> None:
    """A click on the timeline: show that round, at its last stage (as Back does)."""
    mark_click()
    picked = st.session_state["_timeline"].selection.get(charts.TIMELINE_PICK) or []
    if picked:
        stepper.show_round(int(picked[0]["round"]) - 1)
        playback.show(state, playback.LAST_STAGE)


def _timeline(hide_current: bool) -> None:
    """Every round so far, one column each; clicking a column jumps to that round. `hide_current`:
    the rounds before the shown one (a student has not answered for it yet)."""
    traces = stepper.traces[: stepper.shown] if hide_current else stepper.traces
    if len(traces) < 2:
        return
    figure = charts.timeline_chart(traces, stepper.labels_for_all(), stepper.shown)
    spec = spec_for_projector(figure.spec) if ui.presenter() else figure.spec
    st.vega_lite_chart(figure.data, spec, key="_timeline", on_select=_timeline_clicked,
                       selection_mode=charts.TIMELINE_PICK, width="stretch")


def _json() -> str:
    return json.dumps(stepper.to_dict(), indent=1)


def _playback_controls() -> None:
    """Speed and stage animation. Outside the round view: a change sets its timer up again (a full
    rerun), and a Step need not redraw them (every element a Step sends costs each browser time)."""
    speed, animate, by_stage, _ = inputs.columns([2, 2, 2, 2])
    with speed:
        ui.mirrored(st.select_slider, "Speed", "speed", options=list(SPEEDS), label_visibility="collapsed",
                    format_func=lambda name: f"speed: {name}")
    with animate:
        ui.mirrored(st.toggle, "Animate stages", "animate_stages")
    with by_stage:
        ui.mirrored(st.toggle, "One stage per click", "stage_per_click",
                    help="Step (or → on a clicker) shows the next stage of the round; ← goes back a stage")


def _downloads() -> None:
    """The run as files, built when clicked (callables). Outside the round view, for the same reason."""
    cols = st.columns(2)
    cols[0].download_button(
        "Download trace (JSON)", data=_json, file_name="specdec-trace.json",
        mime="application/json", key="b_json", on_click="ignore",
    )
    cols[1].download_button(
        "Download rounds (CSV)", data=stepper.to_csv, file_name="specdec-rounds.csv",
        mime="text/csv", key="b_csv", on_click="ignore",
    )


_playback_controls()
state["_full_run"] = True
round_view()
_downloads()
