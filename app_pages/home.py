"""Home: what the app teaches, the lesson's figure (one round in five steps), and where to start."""

import streamlit as st

from app_pages import class_poll, ui
from specdec.views import class_questions

# The lesson's figure: one round, left to right. Each step links below to the page that shows it live.
ROUND_PICTURE = """digraph {
  rankdir=LR; nodesep=0.3; node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=11];
  draft [label="1 · Draft\\nthe small model proposes\\nγ tokens, each with q", fillcolor="#e1bee7"];
  verify [label="2 · Verify\\nthe target scores all γ\\nin one pass: p at γ+1", fillcolor="#bbdefb"];
  accept [label="3 · Accept?\\nkeep x with probability\\nmin(1, p(x)/q(x))", fillcolor="#c8e6c9"];
  correct [label="4 · Correct\\nfirst rejection: draw from\\nnorm(max(0, p − q));\\nall kept: a bonus from p",
           fillcolor="#ffe0b2"];
  output [label="5 · Output\\nseveral tokens per pass,\\ndistributed exactly as p", fillcolor="#f5f5f5"];
  draft -> verify -> accept -> correct -> output;
  output -> draft [label=" next round", style=dashed, constraint=false];
}"""
STEP_LINKS = [  # (step, page, label): where each step of the figure is shown live
    ("1 · Draft", "app_pages/rounds.py", "Round by round: the drafts and q"),
    ("2 · Verify", "app_pages/idle_machine.py", "The idle machine: why one pass checks many"),
    ("3 · Accept?", "app_pages/rule_trial.py", "The rule on trial: the real rule and the wrong ones"),
    ("4 · Correct", "app_pages/guarantee.py", "The guarantee: the residual keeps p exact"),
    ("5 · Output", "app_pages/speedup.py", "Live speed-up: tokens per pass, measured"),
]

st.title("specdec: speculative decoding, step by step")
st.markdown(
    """
A small **draft** proposes γ tokens; the big **target** checks all of them in **one** forward pass.
Each drafted token *x* is kept with probability min(1, p(x)/q(x)) — p is the target's distribution,
q the draft's. At the first rejection a replacement is drawn from the residual norm(max(0, p − q));
if every draft survives, the target's pass gives one **bonus** token for free. The output follows
exactly the target's distribution, yet each target pass can emit several tokens.
"""
)
st.graphviz_chart(ROUND_PICTURE, width="stretch" if ui.presenter() else "content")  # a projector: all of it
# One link per line: five side by side were cut off ("Round by round: the drafts ar…") below 1920 px.
for step, page, label in STEP_LINKS:
    st.page_link(page, label=f"{step} — {label}")
START_HERE = """
**Start here:** open **Round by round**, pick a ready prompt and press **Step** to watch one round
go through its five stages (drafting, verification, acceptance test, correction, output), or
**Play** to let it run. The sidebar settings (drafter, γ, temperature, acceptance rule; more under
*Advanced*) apply to every page; the address bar carries them, so a copied link opens the same demo.
**Presenter mode** (in the sidebar, or `presenter=1` in a link) enlarges everything for a projector.
**In your stack** takes the same pair into transformers, vLLM and llama.cpp.
"""
if not ui.presenter():  # in presenter mode the speaker says this
    st.markdown(START_HERE)
st.page_link("app_pages/rounds.py", label="Open the round-by-round view", icon=":material/manage_search:")
class_poll.ask(class_questions.CHECK)  # the lesson's check question, to the whole room
