"""The model pair: loaded once per server process and shared by every session, the loads that
failed, what the sidebar says of the loaded pair, and a page's stop when there is no pair or
the prompt cannot be used.
"""

from __future__ import annotations

import gc
import html
import os

import streamlit as st

from app_pages.sidebar import current_settings, server_limits, server_limits_problem
from specdec.config import Settings
from specdec.errors import SpecDecError, first_line
from specdec.lab.serving import LoadFailures, allowed_models, check_allowed
from specdec.models.pair import NGRAM, ModelPair


def waiting_message(ahead: int) -> str:
    """What a page says while its request waits for the shared models."""
    return f"Waiting for the models: {ahead} request(s) ahead of this one…"


@st.cache_resource(show_spinner=False, max_entries=2)
def _load_pair(target: str, drafter: str) -> ModelPair:
    """Weights and tokenizers only, once per process, shared by every session (read-only)."""
    pair = ModelPair.load(target, drafter)
    # Streamlit collects garbage after every script run, and a full collection walks every object
    # of the loaded models: ~300 ms with the GIL held, during which no reply reaches any browser.
    # Frozen objects are left out of collections; the models live as long as the server anyway.
    gc.freeze()
    return pair


@st.cache_resource(show_spinner=False)
def load_failures() -> LoadFailures:
    """Loads that failed in this server process: a bad link costs its load time once."""
    return LoadFailures()


def load_pair() -> tuple[ModelPair | None, str | None]:
    """The pair the sidebar names, or (None, one-line message) if it cannot or may not be loaded."""
    target = st.session_state["target"].strip()
    drafter = st.session_state["drafter"].strip() or NGRAM
    if not target:
        return None, "the target model name is empty: type a bundled name, Hugging Face id or folder"
    key = (target, drafter)
    failures = load_failures()
    if (message := failures.get(key)) is not None:
        return None, message
    try:
        check_allowed(target, drafter, allowed_models(os.environ))
        with st.spinner(f"Loading {target} and drafter {drafter} (once per server)…"):
            return _load_pair(target, drafter), None
    except SpecDecError as error:
        message = str(error)
    except Exception as error:  # noqa: BLE001 - a user's model can fail in many ways; never a traceback
        message = f"could not load the models: {type(error).__name__}: {first_line(error)}"
    failures.remember(key, message)
    return None, message


def _retry_load() -> None:
    target = st.session_state["target"].strip()
    load_failures().forget((target, st.session_state["drafter"].strip() or NGRAM))


def model_status(pair: ModelPair | None, message: str | None) -> None:
    sb = st.sidebar
    sb.header("Status")
    if problem := server_limits_problem():
        sb.warning(problem, icon=":material/warning:")
    if pair is None:
        sb.error(message, icon=":material/error:")
        sb.button("Retry loading", on_click=_retry_load, key="b_retry_load",
                  help="failed loads are remembered by the server; this tries again")  # fmt: skip
        return
    sb.caption(f"**Target:** {html.escape(pair.target.describe())}")
    lookup = "n-gram prompt lookup first, then " if pair.lookup_first else ""
    if pair.head is not None:
        sb.caption(f"**Drafter:** {lookup}{html.escape(pair.head.describe())}")
    elif pair.draft is not None:
        sb.caption(f"**Draft:** {lookup}{html.escape(pair.draft.describe())}")
    else:
        sb.caption("**Drafter:** n-gram prompt lookup (no model, q = 1 on the copied token)")


def require_pair() -> ModelPair:
    """The loaded pair, or the page stops here with the reason shown."""
    pair, message = load_pair()
    if pair is None:
        st.error(message, icon=":material/error:")
        st.button("Retry loading", on_click=_retry_load, key="b_retry_load_page",
                  help="failed loads are remembered by the server; this tries again")  # fmt: skip
        st.stop()
    return pair


def require_prompt(
    pair: ModelPair, prompt: str, chat: bool | None = None, new_tokens: int | None = None
) -> tuple[Settings, list[int]]:
    """The sidebar's settings and the prompt's token ids, or the page stops with the reason shown.

    `chat` and `new_tokens` (room left after the prompt) default to the sidebar's.
    """
    try:
        limit = server_limits().max_prompt_chars
        if len(prompt) > limit:
            raise SpecDecError(f"the prompt has {len(prompt):,} characters; this server accepts at most "
                               f"{limit:,} (its SPECDEC_MAX_PROMPT_CHARS): shorten it")  # fmt: skip
        settings = current_settings()
        chat = bool(st.session_state["chat"]) if chat is None else chat
        room = settings.max_new_tokens if new_tokens is None else new_tokens
        return settings, pair.encode_prompt(prompt, chat, room)
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        st.stop()
