"""specdec: the app. (The round-by-round pages are coming; see the README for the CLI meanwhile.)"""

import streamlit as st

st.set_page_config(page_title="specdec", page_icon="🎯")
st.title("specdec: speculative decoding, step by step")
st.info("The interactive pages are coming. Meanwhile: `python -m specdec generate --help`.")
