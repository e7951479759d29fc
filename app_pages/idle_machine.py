"""The idle machine: what one target forward pass costs for 1, 2, 4, ... 32 new tokens, here."""

import streamlit as st

from app_pages import ui
from specdec.measure import timing
from specdec.models.pair import ModelPair
from specdec.views import charts, draft_length

SIZES = (1, 2, 3, 4, 5, 8, 16, 32)  # 2 to 5: the passes of γ = 1 to 4; γ 5 to 7 are read off 8
LEAN = "lean (bench, races)"
BREAKDOWNS = {"round view (full trace)": True, LEAN: False}  # label -> build the top-token tables
BREAKDOWN_RUNS = 3  # whole runs of the prompt timed each way


def intro() -> None:
    st.title("The idle machine")
    st.markdown(
        "Speculative decoding bets that checking γ+1 tokens in one pass costs about as much as producing "
        "one. Decoding one token at a time is **memory-bound**: every pass streams all the weights from "
        "memory while the arithmetic units mostly wait. So a few more tokens ride along almost free. On a "
        "GPU that holds well. On a small CPU the matrix kernels decide. For a handful of token rows they "
        "may read the weights more than once, or use one core only: then the cost grows with the tokens."
    )


def measure(pair: ModelPair, prompt_ids: list[int], results: dict) -> tuple | None:
    """The timing controls; returns (rows, device, finished) for these settings, if measured."""
    device = timing.device_name(pair)
    st.markdown(f"This server runs the target **{pair.target.describe()}** on **{device}**.")
    st.caption("Why a pass costs what it does on a CPU (matrix layouts, packing, kernels): "
               "docs/explanation/cpu-pass-cost.md.")
    with ui.inputs_box("Repeats per size"):
        repeats = st.slider("Repeats per size (the median is plotted, the bars span the fastest to the "
                            "slowest)", 1, 20, 5, key="_im_repeats")
    key = (pair.target.name, tuple(prompt_ids), int(repeats))
    if ui.run_stop_buttons("Time the forward pass", "b_cost", "b_im_stop", "_im_stop"):
        ui.run_with_progress(
            timing.forward_cost_by_size(pair, prompt_ids, SIZES, int(repeats)), len(SIZES),
            lambda row: f"{row['tokens']} tokens: {row['seconds'] * 1000:.1f} ms", "_im_stop",
            lambda rows, finished: results.__setitem__(key, (list(rows), device, finished)),
        )
    return results.get(key)


def cost_rows(rows: list[dict]) -> list[dict]:
    """The measurement as the table shows it: the chart's data, in ms and in one-token passes."""
    one = rows[0]["seconds"]
    return [{"new tokens": r["tokens"], "median ms": f"{r['seconds'] * 1000:.1f}",
             "fastest–slowest ms": f"{r['min_seconds'] * 1000:.1f}–{r['max_seconds'] * 1000:.1f}",
             "× one token": f"{r['seconds'] / one:.2f}"} for r in rows]


def cost_words(rows: list[dict], gamma: int) -> str:
    """What the measurement says, read from its numbers: the verification pass against one token, with
    the repeats' spread, and where the medians go against the size (noise, not a law)."""
    by_size = {r["tokens"]: r for r in rows}
    one = by_size[min(by_size)]
    verify = min((n for n in by_size if n >= gamma + 1), default=max(by_size))
    row = by_size[verify]
    v = row["seconds"] / one["seconds"]
    spread = (f"its repeats took {row['min_seconds'] * 1000:.1f}–{row['max_seconds'] * 1000:.1f} ms, a "
              f"one-token pass {one['min_seconds'] * 1000:.1f}–{one['max_seconds'] * 1000:.1f} ms")
    words = (f"Here a pass over **{verify}** tokens (γ+1 for γ = {gamma}, rounded up to a measured size) "
             f"costs **{v:.2f}×** a one-token pass ({spread}). ")
    if row["min_seconds"] <= one["max_seconds"]:
        words += ("The two overlap: within this machine's noise, verifying the draft costs one plain step, "
                  "as the paper assumes. Speed-up ≈ tokens per pass / (1 + γc).")
    else:
        words += (f"So each verification pass costs about {v:.1f} plain steps, not one: the extra tokens do "
                  f"not ride free on this device, and speed-up ≈ tokens per pass / (γc + {v:.1f}). "
                  "Speculation pays only when drafts are accepted often enough to cover that.")
    sizes = sorted(by_size)
    dips = [(a, b) for a, b in zip(sizes, sizes[1:], strict=False)
            if by_size[b]["seconds"] < by_size[a]["seconds"]]
    if dips:
        a, b = dips[0]
        slower, faster = by_size[a]["seconds"] * 1000, by_size[b]["seconds"] * 1000
        words += (f" The medians do not always grow with the size ({a} tokens {slower:.1f} ms, {b} tokens "
                  f"{faster:.1f} ms): "
                  "differences inside the repeats' spread are noise, from other work on the same cores.")
    return words


def show(rows: list[dict], measured_on: str, finished: bool, gamma: int,
         load_costs: dict[int, float]) -> None:
    if not finished:
        st.warning("Stopped: the curve below is partial.")
    ui.chart(charts.forward_cost_chart(rows, load_costs))  # the device is named above it
    st.table(cost_rows(rows))  # the chart's data, every column in view
    st.markdown(cost_words(rows, gamma))


def load_costs(prices: list[dict]) -> dict[int, float]:
    """{tokens in the pass: plain steps} as the draft-price table gives them (one token: 1 by definition)."""
    return {1: 1.0, **{r["tokens in the pass"]: r["pass cost (plain steps)"] for r in prices}}


def draft_prices(pair: ModelPair, settings, prices: list[dict]) -> None:
    """What each draft must be worth on this machine, from the passes timed at load."""
    st.header("What a draft must be worth here")
    st.markdown(
        "A draft pays one token if it and every draft before it survive; the draft's estimate of that "
        "chance is the product of its top probabilities. It costs a drafting step (the draft threshold, "
        f"**{settings.draft_threshold:.2f}** of a plain step) and what one more token adds to the "
        "verification pass. With adaptive length a draft is made only while its chance beats that sum, "
        "or while the drafts after it, as sure as this one, would pay it back. Where the pass grows dear, "
        "rounds draft less, down to none: a plain step."
    )
    if not settings.adaptive:
        st.info("Adaptive draft length is off: every round drafts up to γ, whatever it costs.")
        return
    if not pair.target.pass_costs:
        st.info("This target's passes were not timed (a GPU, or another dtype): passes over a few "
                "tokens count as free, so each draft after the first must beat the threshold alone.")
    elif not settings.price_drafts:
        st.info("Pricing by the passes is off (sidebar): passes over a few tokens count as free.")
    st.table([{column: f"{value:.2f}" if isinstance(value, float) else value for column, value in row.items()}
              for row in prices])  # its pass costs are the chart's "timed at load" points
    st.caption("Pass costs timed at load for 1 to 9 tokens, each size's fastest of several sweeps: the "
               "diamonds on the chart above, once the pass is timed there. Larger passes are priced as the "
               "largest timed. The first draft's drafting step is already paid: its q comes from the pass "
               "over the last token, which the drafter makes anyway.")


def round_breakdown(pair: ModelPair, settings, prompt_ids: list[int]) -> None:
    """Where one round's time goes, with the round view's full trace and lean (bench, races)."""
    st.header("Where a round's time goes")
    st.markdown(
        "A round is two models' forward passes and a little bookkeeping. The bookkeeping: sampling q, the "
        "acceptance test on p and q, rolling back both KV caches, and the round view's top-token tables. "
        "Everything but the passes should be small."
    )
    results = st.session_state["_im_breakdown"]
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
    if st.button("Measure a round", key="b_breakdown"):
        total = len(BREAKDOWNS) * BREAKDOWN_RUNS
        runs = ((label, run) for label, detail in BREAKDOWNS.items()
                for run in timing.breakdown_runs(pair, prompt_ids, settings, detail,
                                                 BREAKDOWN_RUNS))
        done = ui.run_with_progress(
            runs, total, lambda item: f"{item[0]}: a run of {item[1][0]} rounds timed",
            stop_flag="_im_breakdown_stop", save=lambda items, finished: None, pace_key="round breakdown")
        if len(done) == total:
            results[key] = {label: timing.per_round([run for kind, run in done if kind == label])
                            for label in BREAKDOWNS}
    if key not in results:
        st.info("Press **Measure a round**: three runs of the prompt with the sidebar's settings, each way "
                f"({ui.estimate_text('round breakdown', len(BREAKDOWNS) * BREAKDOWN_RUNS)}).")
        return
    ui.chart(charts.round_breakdown_chart(results[key]))
    lean = results[key][LEAN]
    passes = lean.get("draft", 0) + lean.get("verify", 0)
    st.caption(f"Lean: {sum(lean.values()):.1f} ms per round, of which the draft's and the target's passes "
               f"(with sampling q) take {passes / max(sum(lean.values()), 1e-9):.0%}.")


ui.init_state()
st.session_state.setdefault("_im_results", {})
st.session_state.setdefault("_im_breakdown", {})
intro()
pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, st.session_state["prompt"], new_tokens=max(SIZES))
prices = draft_length.draft_prices(pair.target.pass_costs, settings)
measured = measure(pair, prompt_ids, st.session_state["_im_results"])
if measured is None:
    st.info("Press **Time the forward pass** (after the prompt of *Round by round*, with the KV cache).")
else:
    priced = settings.adaptive and settings.price_drafts and pair.target.pass_costs
    show(*measured, gamma=settings.gamma, load_costs=load_costs(prices) if priced else {})
draft_prices(pair, settings, prices)
round_breakdown(pair, ui.current_settings(), prompt_ids)
