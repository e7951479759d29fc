"""Live speed-up: the same prompt with speculation and with the target alone, racing; theory beside it."""

import streamlit as st

from app_pages import tree_race, ui
from app_pages.student import md_escape
from app_pages.words import drafter_words
from specdec.config import Settings
from specdec.measure import timing
from specdec.models.pair import ModelPair
from specdec.views import charts

REDRAW_EVERY = 6  # passes between chart redraws while racing (text streams on every pass)
SWEEP_GAMMAS = range(1, 9)


@st.cache_resource(show_spinner=False, max_entries=4)
def warm(target: str, drafter: str, _pair: ModelPair, _prompt_ids: tuple) -> bool:
    """Once per pair and process: the first passes pay for lazy initialisation."""
    timing.warm_up(_pair, list(_prompt_ids))
    return True


def intro() -> None:
    st.title("Live speed-up")
    st.markdown(
        "The same prompt, the same settings, decoded twice: **speculatively** (draft γ tokens, verify "
        "them in one target pass) and by the **target alone** (one pass per token). The two runs take "
        "turns pass by pass, the one that has used less compute going next, so both stream as if on two "
        "identical machines."
    )
    shown = st.session_state["_sp_prompt"].strip().splitlines()[:1] or [""]
    with ui.inputs_box(f"Prompt: {md_escape(shown[0][:70])}"):  # untrusted text in a label
        st.text_area("Prompt", value=st.session_state["_sp_prompt"], key="_sp_prompt", height=80,
                     max_chars=ui.server_limits().max_prompt_chars)


def show_lanes(boxes, pair: ModelPair, spec, plain) -> None:
    for box, run, name in ((boxes[0], spec, "Speculative"), (boxes[1], plain, "Target only")):
        with box.container():
            st.markdown(f"**{name}** · {len(run.token_ids)} tokens · {run.tokens_per_second:.1f} tokens/s"
                        + (" · done" if run.finished else ""))
            st.code(pair.decode(run.token_ids) or "…", language=None, wrap_lines=True)


def texts_note(temperature: float) -> str | None:
    """Why the two texts differ above temperature 0 (None at 0, where they are the same tokens)."""
    if temperature == 0:
        return None
    return (f"**Why two different texts?** At T = {temperature:g} each run draws its own random numbers: "
            "the law of the next token is the target's in both, the sample is not. At T = 0 they match "
            "token for token; *The guarantee* tests the law.")


def show_charts(slot, spec, plain, tag: str) -> None:
    """`tag` names this drawing: a chart redrawn during one run needs a key of its own each time."""
    with slot.container():
        left, right = st.columns(2)
        ui.chart(charts.race_chart({run.label: timing.race_points(run) for run in (spec, plain)}),
                 key=f"_sp_race{tag}", container=left)
        ui.chart(charts.cumulative_speedup_chart(timing.cumulative_speedup(spec, plain)),
                 key=f"_sp_cum{tag}", container=right)
        metrics = spec.metrics()
        if metrics is not None:
            left, right = st.columns(2)
            drafted = [t.num_drafted for t in spec.traces]
            accepted = [t.num_accepted for t in spec.traces]
            per_round = charts.acceptance_rounds_chart(accepted, drafted)
            ui.chart(per_round, key=f"_sp_rounds{tag}", container=left)
            lengths = charts.accepted_length_chart(metrics.accepted_length_histogram)
            ui.chart(lengths, key=f"_sp_hist{tag}", container=right)


def verdict(report: timing.SpeedupReport) -> str:
    """The race's headline in its own numbers: measured against both theories."""
    theory, measured = report.theory, report.measured
    outcome = f"{measured:.2f}× the target alone" if measured >= 1 else \
        f"{measured:.2f}×: slower than the target alone this run"
    words = f"**Measured: {outcome}.** This machine's theory expected {theory.on_this_machine:.2f}×"
    if theory.on_this_machine:
        gap = measured / theory.on_this_machine - 1
        words += f" ({abs(gap):.0%} {'above' if gap >= 0 else 'below'} it)"
    return words + (f"; the paper's {theory.paper:.2f}× takes a round's pass to cost one plain step, "
                    f"where here it cost v = {theory.verify_cost:.2f}.")


def show_theory(spec, plain) -> None:
    report = timing.speedup_report(spec, plain)
    if report is None:
        st.info("Not enough tokens on one side to compare: raise *Max new tokens* in the sidebar.")
        return
    theory = report.theory
    cols = st.columns(5)
    cols[0].metric("Measured speed-up", f"{report.measured:.2f}x")
    cols[1].metric("Theory (paper)", f"{theory.paper:.2f}x", help="E[tokens per pass] / (k̄c + 1)")
    cols[2].metric("Theory (this machine)", f"{theory.on_this_machine:.2f}x",
                   help="E[tokens per pass] / (k̄c + v): v is what one round costs besides drafting, "
                   "in plain decoding steps here")
    cols[3].metric("α (acceptance)", f"{theory.alpha:.2f}", help="accepted drafts / drafts tested")
    cols[4].metric("Tokens per target pass", f"{report.tokens_per_pass:.2f}")
    st.markdown(verdict(report))
    ui.chart(charts.speedup_curve_chart(theory, report.measured))
    st.caption(
        f"Measured here: α = {theory.alpha:.2f}, k̄ = {theory.mean_drafted:.2f} drafts per round on "
        f"average (γ caps it), cost ratio c = {theory.cost_ratio:.3f} (one drafted token / one plain "
        f"step), v = {theory.verify_cost:.2f} (a round's cost besides drafting: the verification pass of "
        "up to γ+1 tokens plus the round's bookkeeping, in plain steps). The paper assumes v = 1: a pass "
        "over γ+1 tokens costs no more than over one, nearly true on a GPU that waits on memory; on a "
        "small CPU it is not, and the 'this machine' curve puts the measured v in."
    )


def race(pair: ModelPair, prompt_ids: list[int], settings: Settings, clicked: bool, lanes, note,
         slot) -> None:
    """Run the race when clicked (saving it after every pass, so Stop keeps it), then show the saved one.
    `note`: under the two texts, why they differ (above temperature 0)."""
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
    results = st.session_state["_sp_results"]
    words = texts_note(settings.sampling.temperature)
    if words and (clicked or key in results):
        note.markdown(words)
    if clicked:
        warm(pair.target.name, pair.drafter_name, pair, tuple(prompt_ids))
        for passes, (spec, plain) in enumerate(timing.race(pair, prompt_ids, settings), start=1):
            results[key] = (spec, plain)
            show_lanes(lanes, pair, spec, plain)
            if passes % REDRAW_EVERY == 0:
                show_charts(slot, spec, plain, str(passes))
            if st.session_state.get("_sp_stop"):
                break
    if key not in results:
        st.info("Press **Run the race** to decode the prompt both ways, live.")
        return
    spec, plain = results[key]
    if not (spec.finished and plain.finished):
        st.warning("Stopped: the numbers below cover the tokens produced so far.")
    show_lanes(lanes, pair, spec, plain)
    show_charts(slot, spec, plain, "final")
    show_theory(spec, plain)


def gamma_sweep(pair: ModelPair, prompt_ids: list[int], settings: Settings, clicked: bool) -> None:
    st.subheader("Where is the best γ on this hardware?")
    st.markdown(
        "More drafts per round means more tokens per target pass when they are accepted. But every draft "
        "costs time, and the chance that all of them survive shrinks like α^γ. The sweep runs the prompt "
        "at γ = 1…8 (target-only once as the baseline)."
    )
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings.sampling,
           settings.max_new_tokens, settings.seed)  # any γ
    sweeps = st.session_state["_sp_sweeps"]
    if clicked:
        warm(pair.target.name, pair.drafter_name, pair, tuple(prompt_ids))
        ui.run_with_progress(
            timing.gamma_sweep(pair, prompt_ids, settings, SWEEP_GAMMAS), len(SWEEP_GAMMAS),
            lambda row: f"γ = {row['gamma']}: {row['speedup']:.2f}x", "_sp_stop",
            lambda rows, finished: sweeps.__setitem__(key, (list(rows), finished)),
        )
    if key not in sweeps or not sweeps[key][0]:
        return
    rows, finished = sweeps[key]
    if not finished:
        st.warning("Stopped: the sweep below is partial.")
    ui.chart(charts.gamma_sweep_chart(rows))
    best = max(rows, key=lambda r: r["speedup"])
    st.caption(
        f"Best measured: γ = {best['gamma']} at {best['speedup']:.2f}x (α there {best['alpha']:.2f}, "
        f"{best['tokens_per_pass']:.2f} tokens per target pass). One run per γ: differences of a few "
        "percent are noise."
    )


def controls() -> tuple[bool, bool]:
    """Race, sweep and Stop buttons -> (race clicked, sweep clicked); a click clears the stop flag."""

    def stop() -> None:
        st.session_state["_sp_stop"] = True

    cols = st.columns([2, 2, 1, 5])
    race_clicked = cols[0].button("Run the race", type="primary", key="b_race", width="stretch")
    sweep_clicked = cols[1].button("γ sweep (1…8)", key="b_sweep", width="stretch")
    cols[2].button("Stop", key="b_stop", on_click=stop, width="stretch")
    if race_clicked or sweep_clicked:
        st.session_state["_sp_stop"] = False
    return race_clicked, sweep_clicked


ui.init_state()
st.session_state.setdefault("_sp_prompt", st.session_state["prompt"])
st.session_state.setdefault("_sp_results", {})  # run key -> (speculative TimedRun, target TimedRun)
st.session_state.setdefault("_sp_sweeps", {})  # run key -> (γ sweep rows, finished)
intro()
pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, st.session_state["_sp_prompt"])
ui.note(f"Drafter: **{drafter_words(pair.drafter_name)}** · γ = {settings.gamma} · temperature "
           f"{settings.sampling.temperature:g} · up to {settings.max_new_tokens} tokens "
           "(sidebar)")
race_clicked, sweep_clicked = controls()
lanes = [column.empty() for column in st.columns(2)]  # replaced on every pass, not appended
texts_slot = st.empty()  # under the texts: why they differ, above temperature 0
chart_slot = st.empty()
race(pair, prompt_ids, settings, race_clicked, lanes, texts_slot, chart_slot)
gamma_sweep(pair, prompt_ids, settings, sweep_clicked)
tree_race.tree_section(pair, prompt_ids, settings)
