"""specdec: the app frame. Shared sidebar controls, the model pair (loaded once per process), pages.

The page scripts live in app_pages/, not pages/: a folder named pages/ beside app.py switches
Streamlit to its old directory-based navigation, which never runs this frame.

Run: streamlit run app.py   (SPECDEC_TARGET / SPECDEC_DRAFTER / SPECDEC_CHAT override the defaults)
"""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so pages can `import app_pages.ui`

from app_pages import ui  # noqa: E402

st.set_page_config(page_title="specdec", page_icon="🎯", layout="wide")

ui.init_state()
ui.sidebar_controls()
pair, load_error = ui.load_pair()
ui.model_status(pair, load_error)
st.session_state["_pair_error"] = load_error  # pages read the pair through ui.load_pair (cached)
ui.write_url()

page = st.navigation(
    [
        st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
        st.Page(
            "app_pages/rounds.py", title="Round by round", icon=":material/manage_search:", url_path="rounds"
        ),
    ]
)
page.run()
