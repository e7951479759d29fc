"""The model pair: loaded once per server process and shared by every session, the loads that
failed, what the sidebar says of the loaded pair, and a page's stop when there is no pair or
the prompt cannot be used.
"""

from __future__ import annotations

import html
import os
import threading
import time

import streamlit as st

from app_pages.sidebar import current_settings, server_limits, server_limits_problem
from specdec.config import Settings
from specdec.errors import SpecDecError, first_line, is_out_of_memory, out_of_memory_message
from specdec.model_names import check_pair_names
from specdec.models.pair import NGRAM, ModelPair
from specdec.models.startup import (
    StartupSplit,
    expected_load_seconds,
    first_token_seconds,
    forget_machine_timings,
    note_load_seconds,
    timed_load,
)
from specdec.serving.allowed_models import LoadFailures, PairShelf, allowed_models, check_allowed
from specdec.views.stepper import LiveRuns


def waiting_message(ahead: int) -> str:
    """What a page says while its request waits for the shared models."""
    return f"Waiting for the models: {ahead} request(s) ahead of this one…"


@st.cache_resource(show_spinner=False)
def pair_shelf() -> PairShelf:
    """The server's models: one target, shared by every drafter and every session (read-only)."""
    return PairShelf(lambda target: ModelPair.load(target, NGRAM))


def pair_for(target: str, drafter: str) -> ModelPair:
    """Weights and tokenizers only, loaded once per process: a new drafter loads only the drafter."""
    return pair_shelf().get(target, drafter)


@st.cache_resource(show_spinner=False)
def live_runs() -> LiveRuns:
    """The server's cap on Round-by-round runs holding KV caches (SPECDEC_MAX_LIVE_RUNS)."""
    return LiveRuns(server_limits().max_live_runs)


@st.cache_resource(show_spinner=False)
def load_failures() -> LoadFailures:
    """Loads that failed in this server process: a bad link costs its load time once."""
    return LoadFailures()


@st.cache_resource(show_spinner=False)
def startup_splits() -> dict[tuple[str, str] | str, StartupSplit | float]:
    """Where this server's start went, per pair loaded ("imports": app.py's imports, in seconds)."""
    return {}


def note_imports(seconds: float) -> None:
    """app.py's import time: the first run of a server pays it, later runs find the modules loaded."""
    startup_splits().setdefault("imports", seconds)


def _sidebar_key() -> tuple[str, str]:
    return st.session_state["target"].strip(), st.session_state["drafter"].strip() or NGRAM


@st.cache_resource(show_spinner=False)
def _background_load(target: str, drafter: str) -> threading.Thread:
    """Load a pair in a background thread, started once per server process and pair: a cold server
    draws its page menu at once, and a page that needs the models says they are loading."""

    failures = load_failures()  # read here, in the script's thread; a failure is remembered for the pages
    thread = threading.Thread(target=_load_or_explain, args=(target, drafter, failures),
                              name="specdec-load-models", daemon=True)
    thread.start()
    return thread


def start_loading() -> None:
    """Start loading the sidebar's pair in the background (app.py, before it draws the page menu)."""
    target, drafter = _sidebar_key()
    if target and load_failures().get((target, drafter)) is None:
        _background_load(target, drafter)


def loading_now() -> threading.Thread | None:
    """The background load of the sidebar's pair, while it runs; None once done (or never started)."""
    target, drafter = _sidebar_key()
    if not target or load_failures().get((target, drafter)) is not None:
        return None
    thread = _background_load(target, drafter)
    return thread if thread.is_alive() else None


LOADING_MESSAGE = ("Loading the models… (once per server). The menu works meanwhile; this page goes on "
                   "by itself.")


def loading_estimate() -> str:
    """How long the load should take: the last load of this pair on this machine, measured (the first
    load on a machine also times it, about half a minute); the page counts the seconds as well."""
    target, drafter = _sidebar_key()
    seconds = expected_load_seconds(f"{target} {drafter}")
    if seconds is None:
        return "about half a minute the first time on a machine"
    return f"about {max(seconds, 1):.0f} s last time on this machine"


def wait_for_models(thread: threading.Thread) -> None:
    """Say the models are loading, with the measured estimate and the seconds so far, until the
    background load ends; then rerun, so the sidebar's status shows the loaded pair. (Each update lets a
    click elsewhere in.)"""
    started, estimate = time.monotonic(), loading_estimate()
    note = st.empty()
    while thread.is_alive():
        note.info(f"{LOADING_MESSAGE} {estimate}; {time.monotonic() - started:.0f} s so far",
                  icon=":material/hourglass_top:")
        thread.join(timeout=1.0)
    note.empty()
    st.rerun()


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
    with st.spinner(f"Loading {target} and drafter {drafter} (once per server)…"):
        return _load_or_explain(target, drafter, failures)


def _load_or_explain(
    target: str, drafter: str, failures: LoadFailures
) -> tuple[ModelPair | None, str | None]:
    """The pair, or (None, one-line message) with the failure remembered. No Streamlit call: this
    also runs in the background thread."""
    try:
        check_allowed(target, drafter, allowed_models(os.environ))
        splits = startup_splits()
        if (target, drafter) in splits:  # loaded (and its names checked) already: every rerun comes here
            return pair_for(target, drafter), None
        check_pair_names(target, drafter)  # a mistyped name fails before the target loads
        pair, split = timed_load(lambda: pair_for(target, drafter), splits.get("imports"))
        note_load_seconds(f"{target} {drafter}", split.loading + split.timing)  # the next start's estimate
        # The first token paid here, in the load's thread, not by the first Step.
        splits[target, drafter] = split.with_first_token(first_token_seconds(pair))
        return pair, None
    except SpecDecError as error:
        message = str(error)
    except Exception as error:  # noqa: BLE001 - a user's model can fail in many ways; never a traceback
        message = (out_of_memory_message(error, "loading the models") if is_out_of_memory(error)
                   else f"could not load the models: {type(error).__name__}: {first_line(error)}")
    failures.remember((target, drafter), message)
    return None, message


def _time_machine_again() -> None:
    """The status box's switch: drop the kept timings and the loaded models; the next run reloads and
    times afresh."""
    forget_machine_timings()
    pair_shelf().clear()
    startup_splits().clear()
    _background_load.clear()


def _retry_load() -> None:
    target = st.session_state["target"].strip()
    load_failures().forget((target, st.session_state["drafter"].strip() or NGRAM))


def model_status(pair: ModelPair | None, message: str | None) -> None:
    sb = st.sidebar
    sb.header("Status")
    if problem := server_limits_problem():
        sb.warning(problem, icon=":material/warning:")
    if pair is None and message is None:
        with sb:
            _loading_note()
        return
    if pair is None:
        sb.error(message, icon=":material/error:")
        sb.button("Retry loading", on_click=_retry_load, key="b_retry_load",
                  help="failed loads are remembered by the server; this tries again")
        return
    # Names and sizes only: how a pass is computed (layouts, kernels) is for the docs,
    # docs/explanation/cpu-pass-cost.md, not for the sidebar.
    sb.caption(f"**Target:** {html.escape(_short(pair.target))}")
    lookup = "n-gram prompt lookup first, then " if pair.lookup_first else ""
    if pair.head is not None:
        sb.caption(f"**Drafter:** {lookup}feature head {html.escape(_short(pair.head))}")
    elif pair.exit is not None:
        sb.caption(f"**Drafter:** {lookup}the target's own first {pair.exit.layers} layers "
                   f"({html.escape(pair.exit.name)})")
    elif pair.draft is not None:
        sb.caption(f"**Draft:** {lookup}{html.escape(_short(pair.draft))}")
    else:
        sb.caption("**Drafter:** n-gram prompt lookup (no model, q = 1 on the copied token)")
    split = startup_splits().get(_sidebar_key())
    if isinstance(split, StartupSplit):
        sb.caption(html.escape(split.line().replace("start-up:", "**Start-up:**", 1)))
    sb.button("Time this machine again", on_click=_time_machine_again, key="b_retime",
              help="the matrix layouts and pass costs are timed once per machine and kept; this times "
                   "them afresh and reloads the models (about half a minute; every session waits)")


@st.fragment(run_every=1.0)
def _loading_note() -> None:
    """The sidebar's note while the models load; once they are in, the whole page runs again."""
    if loading_now() is None:
        st.rerun()
    st.info(f"Loading the models in the background ({loading_estimate()})…", icon=":material/hourglass_top:")


def _short(model) -> str:
    """A model as the status box names it: its name and size."""
    return f"{model.name} ({model.num_parameters / 1e6:.1f} M parameters)"


def require_pair() -> ModelPair:
    """The loaded pair, or the page stops here with the reason shown (while the models load in the
    background, the page says so and waits)."""
    if (thread := loading_now()) is not None:
        wait_for_models(thread)
    pair, message = load_pair()
    if pair is None:
        if "_pair_error" in st.session_state and st.session_state["_pair_error"] is None:
            st.rerun()  # the load failed after the sidebar was drawn as loading: draw both with the reason
        st.error(message, icon=":material/error:")
        st.button("Retry loading", on_click=_retry_load, key="b_retry_load_page",
                  help="failed loads are remembered by the server; this tries again")
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
                               f"{limit:,} (its SPECDEC_MAX_PROMPT_CHARS): shorten it")
        settings = current_settings()
        chat = bool(st.session_state["chat"]) if chat is None else chat
        room = settings.max_new_tokens if new_tokens is None else new_tokens
        return settings, pair.encode_prompt(prompt, chat, room)
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        st.stop()
