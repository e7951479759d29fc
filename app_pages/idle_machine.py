"""The idle machine: what one target forward pass costs for 1, 2, 4, ... 32 new tokens, here."""

import streamlit as st

from app_pages import ui
from specdec import charts
from specdec import experiments as ex
from specdec.errors import SpecDecError

SIZES = (1, 2, 4, 8, 16, 32)
CHART_CONFIG = {"displayModeBar": False}

ui.init_state()
state = st.session_state
state.setdefault("_im_results", {})

st.title("The idle machine")
st.markdown(
    "Speculative decoding bets that checking γ+1 tokens in one pass costs about as much as producing "
    "one. On a GPU, decoding one token at a time is **memory-bound**: every pass streams all the "
    "weights from memory and the arithmetic units mostly wait, so a few more tokens ride along almost "
    "free. On a small CPU the arithmetic itself is the bottleneck and the cost grows with the tokens."
)

pair = ui.require_pair()
device = ex.device_name(pair)
st.markdown(f"This server runs the target **{pair.target.name}** on **{device}**.")
repeats = st.slider("Repeats per size (the median is plotted)", 1, 20, 5, key="_im_repeats")
try:
    prompt_ids = pair.encode_prompt(state["prompt"], bool(state["chat"]), max(SIZES))
except SpecDecError as error:
    st.error(str(error), icon=":material/error:")
    st.stop()
key = (pair.target.name, tuple(prompt_ids), int(repeats))

clicked = ui.run_stop_buttons("Time the forward pass", "b_cost", "b_im_stop", "_im_stop")
if clicked:
    progress = st.progress(0.0, text="warming up…")
    rows = []
    for row in ex.forward_costs(pair, prompt_ids, SIZES, int(repeats)):
        rows.append(row)
        progress.progress(
            len(rows) / len(SIZES), text=f"{row['tokens']} tokens: {row['seconds'] * 1000:.1f} ms"
        )
        if state.get("_im_stop"):
            st.warning("Stopped: the curve below is partial.")
            break
    progress.empty()
    state["_im_results"][key] = (rows, device)

if key not in state["_im_results"]:
    st.info("Press **Time the forward pass** (after the prompt of *Round by round*, with the KV cache).")
    st.stop()
rows, measured_on = state["_im_results"][key]
st.plotly_chart(charts.forward_cost_chart(rows, measured_on), config=CHART_CONFIG)
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
gamma = int(state["gamma"])
verify = min((n for n in by_size if n >= gamma + 1), default=max(by_size))
v = by_size[verify] / by_size[min(by_size)]
flat = v < 1.5
st.markdown(
    f"Here a pass over **{verify}** tokens (γ+1 for γ = {gamma}, rounded up to a measured size) costs "
    f"**{v:.2f}×** a one-token pass. "
    + (
        "That is nearly flat: the machine was idle waiting on memory, and verifying a whole draft costs "
        "about one plain step, as the paper assumes. Speed-up ≈ tokens per pass / (1 + γc)."
        if flat
        else "That is far from flat: this device is compute-bound at these sizes, so each verification "
        f"pass costs about {v:.1f} plain steps and eats into the gain. Speed-up ≈ tokens per pass / "
        f"(γc + {v:.1f}): speculation only pays when drafts are accepted often (and a GPU would show "
        "a much flatter curve)."
    )
)
