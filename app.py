"""specdec: the app frame. Shared sidebar controls, the model pair (loaded once per process), pages.

The page scripts live in app_pages/, not pages/: a folder named pages/ beside app.py switches
Streamlit to its old directory-based navigation, which never runs this frame.

Run: streamlit run app.py   (SPECDEC_TARGET / SPECDEC_DRAFTER / SPECDEC_CHAT override the defaults;
SPECDEC_ALLOWED_MODELS, SPECDEC_MAX_PROMPT_CHARS and SPECDEC_PREFILL_CHUNK set how a server is shared)
"""

import os
import sys
import time
from pathlib import Path

_IMPORTS_STARTED = time.perf_counter()  # the status box's start-up split: what the imports below take

# One CPU thread per model call, unless OMP_NUM_THREADS says otherwise. Decoding works on 1 to γ+1
# tokens, too little to split, and on a small shared machine a second thread made Steps slower and
# spikier (docs/LOG.md, "Figures that lived in code comments"). Must be set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import streamlit as st  # noqa: E402

# A projector shows the lesson, not the settings: presenter mode (a link's presenter=1) starts with the
# sidebar folded away.
_presenting = st.query_params.get("presenter", "").lower() in ("1", "true", "on", "yes") or bool(
    st.session_state.get("presenter"))
st.set_page_config(page_title="specdec", page_icon="🎯", layout="wide",
                   initial_sidebar_state="collapsed" if _presenting else "auto")

# A cold server draws its menu at once: the menu first, before the heavy imports below (seconds on a
# small machine); then the models load in a background thread (once per process), and a page that
# needs them says so while it waits (ui.require_pair).
page = st.navigation(
    [
        st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
        st.Page(
            "app_pages/rounds.py", title="Round by round", icon=":material/manage_search:", url_path="rounds"
        ),
        st.Page("app_pages/speedup.py", title="Live speed-up", icon=":material/speed:", url_path="speedup"),
        st.Page(
            "app_pages/code_vs_prose.py",
            title="Code vs prose",
            icon=":material/code:",
            url_path="code-vs-prose",
        ),
        st.Page(
            "app_pages/guarantee.py", title="The guarantee", icon=":material/verified:", url_path="guarantee"
        ),
        st.Page(
            "app_pages/rule_trial.py",
            title="The rule on trial",
            icon=":material/gavel:",
            url_path="rule-trial",
        ),
        st.Page(
            "app_pages/idle_machine.py",
            title="The idle machine",
            icon=":material/memory:",
            url_path="idle-machine",
        ),
        st.Page(
            "app_pages/batch_class.py",
            title="A class is a batch",
            icon=":material/groups:",
            url_path="class-is-a-batch",
        ),
        st.Page("app_pages/variants.py", title="Variants", icon=":material/alt_route:", url_path="variants"),
        st.Page(
            "app_pages/stack.py", title="In your stack", icon=":material/deployed_code:", url_path="stack"
        ),
    ]
)
# The heavy libraries, imported before any page code runs. Sessions run in threads; when eight first
# sessions imported pandas lazily (inside Plotly) at the same moment, one saw a half-initialised module.
import altair  # noqa: E402, F401
import pandas  # noqa: E402, F401
import plotly.graph_objects  # noqa: E402, F401
import torch  # noqa: E402, F401
import transformers  # noqa: E402, F401

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so pages can `import app_pages.ui`

from app_pages import class_poll, ui  # noqa: E402
from specdec.errors import is_out_of_memory, out_of_memory_message  # noqa: E402
from specdec.models.loading import free_device_memory  # noqa: E402

ui.note_imports(time.perf_counter() - _IMPORTS_STARTED)
ui.init_state()
ui.sidebar_controls()
ui.start_loading()
pair, load_error = (None, None) if ui.loading_now() else ui.load_pair()
ui.model_status(pair, load_error)
ui.link_notices()
st.session_state["_pair_error"] = load_error  # pages read the pair through ui.load_pair (cached)
class_poll.frame()  # a class's link read (its key kept off the address bar), a student's question
ui.write_url(keep=class_poll.link_params())
try:
    page.run()
except (MemoryError, RuntimeError) as error:  # torch.OutOfMemoryError is a RuntimeError
    if not is_out_of_memory(error):
        raise
    free_device_memory()
    st.error(out_of_memory_message(error), icon=":material/memory:")
