"""Home: what the app teaches and where to start."""

import streamlit as st

st.title("specdec: speculative decoding, step by step")
st.markdown(
    """
A small **draft** proposes γ tokens; the big **target** checks all of them in **one** forward pass.
Each drafted token *x* is kept with probability min(1, p(x)/q(x)) — p is the target's distribution,
q the draft's. At the first rejection a replacement is drawn from the residual norm(max(0, p − q));
if every draft survives, the target's pass gives one **bonus** token for free. The output follows
exactly the target's distribution, yet each target pass can emit several tokens.

**Start here:** open **Round by round**, pick a ready prompt and press **Step** to watch one round
go through its five stages (drafting, verification, acceptance test, correction, output), or
**Play** to let it run. The sidebar settings (models, γ, temperature, seed, …) apply to every
page; the address bar carries them, so a copied link opens the same demo.
"""
)
st.page_link("app_pages/rounds.py", label="Open the round-by-round view", icon=":material/manage_search:")
