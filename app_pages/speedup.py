"""Live speed-up: the same prompt with speculation and with the target alone, racing; theory beside it."""

import streamlit as st

from app_pages import ui
from specdec import charts
from specdec import experiments as ex

CHART_CONFIG = {"displayModeBar": False}
REDRAW_EVERY = 6  # passes between chart redraws while racing (text streams on every pass)

ui.init_state()
state = st.session_state
state.setdefault("_sp_prompt", state["prompt"])
state.setdefault("_sp_results", {})  # run key -> (speculative TimedRun, target TimedRun)
state.setdefault("_sp_sweeps", {})  # run key -> γ sweep rows

st.title("Live speed-up")
st.markdown(
    "The same prompt, the same settings, decoded twice: **speculatively** (draft γ tokens, verify them in "
    "one target pass) and by the **target alone** (one pass per token). The two runs take turns pass by "
    "pass, the one that has used less compute going next, so both stream as if on two identical machines."
)
st.text_area("Prompt", key="_sp_prompt", height=80)

pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, state["_sp_prompt"])

key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
sweep_key = (*key[:3], settings.sampling, settings.max_new_tokens, settings.seed)  # any γ
st.caption(
    f"Drafter: **{pair.drafter_name}** · γ = {settings.gamma} · temperature "
    f"{settings.sampling.temperature} · up to {settings.max_new_tokens} tokens (sidebar)"
)


def _stop() -> None:
    state["_sp_stop"] = True


@st.cache_resource(show_spinner=False, max_entries=4)
def _warm(target: str, drafter: str, _pair, _prompt_ids) -> bool:
    """Once per pair and process: the first passes pay for lazy initialisation."""
    ex.warm_up(_pair, list(_prompt_ids))
    return True


def _lane_text(run) -> str:
    return pair.decode(run.token_ids) or "…"


def _cumulative(spec, plain) -> list[tuple[int, float]]:
    """Speed-up after each speculative round: its tokens/s so far over target-only tokens/s at that time."""
    points, spec_tokens, spec_time = [], 0, 0.0
    for trace, seconds in zip(spec.traces, spec.pass_seconds, strict=False):
        spec_tokens += len(trace.emitted_tokens)
        spec_time += seconds
        done = [s for s in plain.pass_seconds]
        elapsed, count = 0.0, 0
        for s in done:  # target-only tokens produced in the same compute time
            if elapsed + s > spec_time:
                break
            elapsed += s
            count += 1
        plain_rate = count / elapsed if count else plain.tokens_per_second
        if plain_rate:
            points.append((spec_tokens, (spec_tokens / spec_time) / plain_rate))
    return points


def _points(run) -> list[tuple[float, int]]:
    """(compute seconds, tokens) after each pass."""
    points, seconds, tokens = [(0.0, 0)], 0.0, 0
    per_pass = [len(t.emitted_tokens) for t in run.traces] if run.traces else [1] * len(run.pass_seconds)
    for s, n in zip(run.pass_seconds, per_pass, strict=False):
        seconds += s
        tokens += n
        points.append((seconds, tokens))
    return points


def _show_lanes(boxes, spec, plain) -> None:
    for box, run, name in ((boxes[0], spec, "Speculative"), (boxes[1], plain, "Target only")):
        with box.container():
            st.markdown(
                f"**{name}** · {len(run.token_ids)} tokens · {run.tokens_per_second:.1f} tokens/s"
                + (" · done" if run.finished else "")
            )
            st.code(_lane_text(run), language=None, wrap_lines=True)


def _show_charts(slot, spec, plain, tag: str) -> None:
    """`tag` names this drawing: a chart redrawn during one run needs a key of its own each time."""
    with slot.container():
        left, right = st.columns(2)
        left.plotly_chart(
            charts.race_chart(_points(spec), _points(plain)), config=CHART_CONFIG, key=f"_sp_race{tag}"
        )
        right.plotly_chart(
            charts.cumulative_speedup_chart(_cumulative(spec, plain)),
            config=CHART_CONFIG,
            key=f"_sp_cum{tag}",
        )
        m = spec.metrics()
        if m is not None:
            left, right = st.columns(2)
            drafted = [t.gamma for t in spec.traces]
            accepted = [t.num_accepted for t in spec.traces]
            left.plotly_chart(
                charts.acceptance_rounds_chart(accepted, drafted), config=CHART_CONFIG, key=f"_sp_rounds{tag}"
            )
            right.plotly_chart(
                charts.accepted_length_chart(m.accepted_length_histogram),
                config=CHART_CONFIG,
                key=f"_sp_hist{tag}",
            )


def _show_theory(spec, plain) -> None:
    report = ex.speedup_report(spec, plain)
    if report is None:
        st.info("Not enough tokens on one side to compare: raise *Max new tokens* in the sidebar.")
        return
    cols = st.columns(5)
    cols[0].metric("Measured speed-up", f"{report.measured:.2f}x")
    cols[1].metric("Theory (paper)", f"{report.theoretical:.2f}x", help="E[tokens per pass] / (γc + 1)")
    cols[2].metric(
        "Theory (this machine)",
        f"{report.theoretical_on_hardware:.2f}x",
        help="E[tokens per pass] / (γc + v): v is what one verification pass costs "
        "in plain decoding steps here",
    )
    cols[3].metric("α (acceptance)", f"{report.alpha:.2f}", help="accepted drafts / drafts tested")
    cols[4].metric("Tokens per target pass", f"{report.tokens_per_pass:.2f}")
    st.plotly_chart(
        charts.speedup_curve_chart(
            report.gamma, report.cost_ratio, report.verify_overhead, report.alpha, report.measured
        ),
        config=CHART_CONFIG,
    )
    st.caption(
        f"Measured here: α = {report.alpha:.2f}, γ = {report.gamma:.2f} drafts per round on average, "
        f"cost ratio c = {report.cost_ratio:.3f} (one drafted token / one plain step), "
        f"v = {report.verify_overhead:.2f} (a round's cost besides drafting: the verification pass of "
        "up to γ+1 tokens plus the round's bookkeeping, in plain steps). The paper assumes v = 1: a pass "
        "over γ+1 tokens costs no more than over one, nearly true on a GPU that waits on memory; on a "
        "small CPU it is not, and the 'this machine' curve puts the measured v in."
    )


cols = st.columns([2, 2, 1, 5])
run_clicked = cols[0].button("Run the race", type="primary", key="b_race", width="stretch")
sweep_clicked = cols[1].button("γ sweep (1…8)", key="b_sweep", width="stretch")
cols[2].button("Stop", key="b_stop", on_click=_stop, width="stretch")
lanes = [column.empty() for column in st.columns(2)]  # replaced on every pass, not appended
chart_slot = st.empty()

if run_clicked:
    state["_sp_stop"] = False
    _warm(pair.target.name, pair.drafter_name, pair, tuple(prompt_ids))
    spec = plain = None
    for passes, (spec, plain) in enumerate(ex.race(pair, prompt_ids, settings), start=1):
        _show_lanes(lanes, spec, plain)
        if passes % REDRAW_EVERY == 0:
            _show_charts(chart_slot, spec, plain, str(passes))
        if state.get("_sp_stop"):
            break
    if spec is not None and spec.finished and plain.finished:
        state["_sp_results"][key] = (spec, plain)
    elif spec is not None:
        st.warning("Stopped: the numbers below cover the tokens produced so far.")
        state["_sp_results"].pop(key, None)
        _show_charts(chart_slot, spec, plain, "stopped")
        _show_theory(spec, plain)

if key in state["_sp_results"]:
    spec, plain = state["_sp_results"][key]
    _show_lanes(lanes, spec, plain)
    _show_charts(chart_slot, spec, plain, "final")
    _show_theory(spec, plain)
elif not run_clicked:
    st.info("Press **Run the race** to decode the prompt both ways, live.")

# -- γ sweep ---------------------------------------------------------------------------------------

st.subheader("Where is the best γ on this hardware?")
st.markdown(
    "More drafts per round means more tokens per target pass when they are accepted, but every draft "
    "costs time and the chance that all of them survive shrinks like α^γ. The sweep runs the prompt "
    "at γ = 1…8 (target-only once as the baseline)."
)
if sweep_clicked:
    state["_sp_stop"] = False
    _warm(pair.target.name, pair.drafter_name, pair, tuple(prompt_ids))
    progress = st.progress(0.0, text="target-only baseline…")
    rows = []
    for row in ex.gamma_sweep(pair, prompt_ids, settings):
        rows.append(row)
        progress.progress(len(rows) / 8, text=f"γ = {row['gamma']}: {row['speedup']:.2f}x")
        if state.get("_sp_stop"):
            st.warning("Stopped: the sweep below is partial.")
            break
    progress.empty()
    state["_sp_sweeps"][sweep_key] = rows
sweep = state["_sp_sweeps"].get(sweep_key)
if sweep:
    st.plotly_chart(charts.gamma_sweep_chart(sweep), config=CHART_CONFIG)
    best = max(sweep, key=lambda r: r["speedup"])
    st.caption(
        f"Best measured: γ = {best['gamma']} at {best['speedup']:.2f}x (α there {best['alpha']:.2f}, "
        f"{best['tokens_per_pass']:.2f} tokens per target pass). One run per γ: differences of a few "
        "percent are noise."
    )
