"""The idle machine: what one target forward pass costs for 1, 2, 4, ... 32 new tokens, here."""

import streamlit as st

from app_pages import ui
from specdec.lab import charts, draft_length, timing
from specdec.models.pair import ModelPair

SIZES = (1, 2, 3, 4, 5, 8, 16, 32)  # 2 to 5: the passes of γ = 1 to 4; γ 5 to 7 are read off 8
LEAN = "lean (bench, races)"
BREAKDOWNS = {"round view (full trace)": True, LEAN: False}  # label -> build the top-token tables


def intro() -> None:
    st.title("The idle machine")
    st.markdown(
        "Speculative decoding bets that checking γ+1 tokens in one pass costs about as much as producing "
        "one. Decoding one token at a time is **memory-bound**: every pass streams all the weights from "
        "memory and the arithmetic units mostly wait, so a few more tokens ride along almost free. On a "
        "GPU that holds well. On a small CPU the matrix kernels decide: for a handful of token rows they "
        "may read the weights more than once, or on one core only, and the cost grows with the tokens."
    )


def measure(pair: ModelPair, prompt_ids: list[int], results: dict) -> tuple | None:
    """The timing controls; returns (rows, device, finished) for these settings, if measured."""
    device = timing.device_name(pair)
    st.markdown(f"This server runs the target **{pair.target.describe()}** on **{device}**.")
    st.caption(
        "Rows, columns, packed or mkl: a linear layer can be computed as x·Wᵀ (the token rows on the "
        "left), as (W·xᵀ)ᵀ (the same numbers from one matrix product with the operands swapped), or from "
        "a copy of W reordered once into a blocked layout, by oneDNN (packed) or by MKL's packed product "
        "(mkl, fp32 only). On a CPU the fastest is picked by "
        "timing the model once at load, for one token and for several: where they differ, the model "
        "gets a split such as rows/packed@4, fewer than 4 token rows in rows and more packed "
        "(SPECDEC_MATMUL fixes it). On a 2-core AMD EPYC packed took 23.7 ms for one token and "
        "24.4–25.8 ms for 2 to 8, columns 27.8 ms and 42.9–50.2 ms for 6 to 8; on a 2-core Intel Xeon "
        "rows ran one token in 34 ms and packed in 45 (scripts/round_breakdown.py, 2026-12-02), and "
        "with AVX2 kernels mkl ran 2 to 8 tokens in 51–63 ms where rows took 78–96 (2026-12-03)."
    )
    repeats = st.slider("Repeats per size (the median is plotted)", 1, 20, 5, key="_im_repeats")
    key = (pair.target.name, tuple(prompt_ids), int(repeats))
    if ui.run_stop_buttons("Time the forward pass", "b_cost", "b_im_stop", "_im_stop"):
        ui.run_with_progress(
            timing.forward_cost_by_size(pair, prompt_ids, SIZES, int(repeats)), len(SIZES),
            lambda row: f"{row['tokens']} tokens: {row['seconds'] * 1000:.1f} ms", "_im_stop",
            lambda rows, finished: results.__setitem__(key, (list(rows), device, finished)),
        )  # fmt: skip
    return results.get(key)


def show(rows: list[dict], measured_on: str, finished: bool, gamma: int) -> None:
    if not finished:
        st.warning("Stopped: the curve below is partial.")
    ui.chart(charts.forward_cost_chart(rows, measured_on))
    st.dataframe(
        [
            {
                "new tokens": r["tokens"],
                "median ms": round(r["seconds"] * 1000, 2),
                "× one token": round(r["seconds"] / rows[0]["seconds"], 2),
            }
            for r in rows
        ],
        hide_index=True,
    )
    by_size = {r["tokens"]: r["seconds"] for r in rows}
    st.caption("Median ms per pass: " + ", ".join(f"{n} → {t * 1000:.1f}" for n, t in by_size.items()))
    verify = min((n for n in by_size if n >= gamma + 1), default=max(by_size))
    v = by_size[verify] / by_size[min(by_size)]
    st.markdown(
        f"Here a pass over **{verify}** tokens (γ+1 for γ = {gamma}, rounded up to a measured size) costs "
        f"**{v:.2f}×** a one-token pass. "
        + (
            "That is nearly flat: the machine was idle waiting on memory, and verifying a whole draft "
            "costs about one plain step, as the paper assumes. Speed-up ≈ tokens per pass / (1 + γc)."
            if v < 1.5
            else "That is far from flat: this device is compute-bound at these sizes, so each "
            f"verification pass costs about {v:.1f} plain steps and eats into the gain. Speed-up ≈ "
            f"tokens per pass / (γc + {v:.1f}): speculation only pays when drafts are accepted often "
            "(and a GPU would show a much flatter curve)."
        )
    )


def draft_prices(pair: ModelPair, settings) -> None:
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
    st.dataframe(draft_length.draft_prices(pair.target.pass_costs, settings), hide_index=True)
    st.caption("Pass costs timed at load for 1 to 9 tokens, each size's fastest of four sweeps "
               "(specdec/kernels/choice.py; SPECDEC_PASS_COSTS fixes them; larger passes are priced as the "
               "largest timed). The first draft's drafting step is already paid: its q comes from the pass "
               "over the last token, which the drafter makes anyway.")


def round_breakdown(pair: ModelPair, settings, prompt_ids: list[int]) -> None:
    """Where one round's time goes, with the round view's full trace and lean (bench, races)."""
    st.header("Where a round's time goes")
    st.markdown(
        "A round is two models' forward passes and a little bookkeeping: sampling q, the acceptance test "
        "on p and q, rolling back both KV caches, and (for the round view) the top-token tables it shows. "
        "Everything but the passes should be small."
    )
    results = st.session_state["_im_breakdown"]
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
    if st.button("Measure a round", key="b_breakdown"):
        with st.spinner("timing rounds…"):
            results[key] = {label: timing.round_breakdown(pair, prompt_ids, settings, detail)
                            for label, detail in BREAKDOWNS.items()}
    if key not in results:
        st.info("Press **Measure a round**: three runs of the prompt with the sidebar's settings, each way.")
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
measured = measure(pair, prompt_ids, st.session_state["_im_results"])
if measured is None:
    st.info("Press **Time the forward pass** (after the prompt of *Round by round*, with the KV cache).")
else:
    show(*measured, gamma=settings.gamma)
draft_prices(pair, ui.current_settings())
round_breakdown(pair, ui.current_settings(), prompt_ids)
