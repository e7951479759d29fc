"""What the pages share: the sidebar controls, the URL, the cached model pair, charts, long runs, token HTML.

Pages go widgets -> specdec API (models/, lab/) -> specdec.lab.charts; nothing here touches torch.
"""

from __future__ import annotations

import gc
import html
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import fields

import streamlit as st

from specdec.config import (
    LOSSY_RULES,
    RULE_NAMES,
    SAMPLE_COMPARE,
    SPECULATIVE,
    TOP_CHOICE,
    TYPICAL,
    SamplingConfig,
    ServerLimits,
    Settings,
    help_of,
    ui_range,
)
from specdec.errors import SpecDecError, first_line
from specdec.lab.kvcache import DRAFT, NOT_FED, READ, SIBLING, CacheRow
from specdec.lab.links import read_link
from specdec.lab.quiz import COUNT, TICK
from specdec.lab.serving import LoadFailures, allowed_models, check_allowed
from specdec.lab.stepper import ACCEPTED, BONUS, RESAMPLED, OutputToken
from specdec.models.feature_head import shipped_head_exists
from specdec.models.loading import shipped_draft_exists
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair, default_drafter
from specdec.paths import ASSETS, BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET

READY_PROMPTS_FILE = ASSETS / "ready_prompts.json"
CHART_CONFIG = {"displayModeBar": False}  # every chart: no Plotly toolbar over a teaching figure

# The numeric settings, each from the config dataclass that defines its default and range.
NUMERIC_SETTINGS = {"gamma": Settings, "temperature": SamplingConfig, "top_k": SamplingConfig,
                    "top_p": SamplingConfig, "seed": Settings, "max_new_tokens": Settings,
                    "draft_threshold": Settings}  # fmt: skip
LIMITS = {name: ui_range(config, name) for name, config in NUMERIC_SETTINGS.items()}


def _config_default(config, name: str):
    return next(f.default for f in fields(config) if f.name == name)


# Sidebar settings: session-state key -> (URL parameter, type, default). Defaults read from the
# environment are read when a session starts (so tests can point the app at other models).
SETTINGS = {
    "target": ("target", str, lambda: os.environ.get("SPECDEC_TARGET", BUNDLED_TARGET)),
    "drafter": ("drafter", str, lambda: os.environ.get("SPECDEC_DRAFTER")
                or default_drafter(os.environ.get("SPECDEC_TARGET", BUNDLED_TARGET))),
    **{name: (name, type(_config_default(config, name)), lambda c=config, n=name: _config_default(c, n))
       for name, config in NUMERIC_SETTINGS.items()},
    "adaptive": ("adaptive", bool, lambda: _config_default(Settings, "adaptive")),
    "price_drafts": ("price_drafts", bool, lambda: _config_default(Settings, "price_drafts")),
    "siblings": ("siblings", bool, lambda: _config_default(Settings, "siblings")),
    "rule": ("rule", str, lambda: _config_default(Settings, "rule")),
    "chat": ("chat", bool, lambda: os.environ.get("SPECDEC_CHAT", "1") != "0"),
    # The round view's student mode, so that an instructor's link opens it for every student.
    "student": ("student", bool, lambda: False),
    "question": ("question", str, lambda: TICK),
    "hint": ("hint", str, lambda: "p"),
}  # fmt: skip
CHOICES = {"question": (TICK, COUNT), "hint": ("p", "q"), "rule": RULE_NAMES}
RULE_TITLES = {  # what the sidebar calls each acceptance rule
    SPECULATIVE: "speculative sampling (exact)",
    TOP_CHOICE: "the top choice matches (lossy)",
    SAMPLE_COMPARE: "sample and compare (exact)",
    TYPICAL: "typical acceptance, Medusa (lossy)",
}
LOSSY_NOTE = "Lossy rule: above temperature 0 the output is not distributed as the target's"

ORIGIN_STYLE = {
    ACCEPTED: "background:#c8e6c9;border-color:#2e7d32",
    RESAMPLED: "background:#ffe0b2;border-color:#ef6c00",
    BONUS: "background:#bbdefb;border-color:#1565c0",
}
TOKEN_CSS = """
<style>
.sd-line {line-height: 2.1; font-family: ui-monospace, monospace; font-size: 0.95rem;}
.sd-tok {border: 1px solid #9e9e9e; border-radius: 4px; padding: 1px 4px; margin: 0 2px 0 0;
         white-space: pre; display: inline-block; line-height: 1.4;}
.sd-tok small {color: #555; margin-left: 4px; font-size: 0.75rem;}
.sd-new {outline: 2px solid #212121; outline-offset: 1px;}
.sd-struck {text-decoration: line-through; color: #9e9e9e; background: #f5f5f5;}
.sd-draft {background: #e1bee7; border-color: #8e24aa;}
.sd-reject {background: #ffcdd2; border-color: #c62828; text-decoration: line-through;}
.sd-legend {font-size: 0.8rem; color: #555; margin-top: 0.4rem;}
.sd-legend .sd-tok {font-size: 0.75rem;}
.sd-cache {font-family: ui-monospace, monospace; font-size: 0.8rem; line-height: 1.9;}
.sd-cache b {display: inline-block; width: 15rem; font-weight: 600;}
.sd-cell {display: inline-block; min-width: 1.6rem; padding: 0 3px; margin-right: 2px; border-radius: 3px;
          border: 1px solid #90a4ae; background: #eceff1; text-align: center; white-space: pre;}
.sd-cell.sd-held {background: #cfd8dc; min-width: 5rem;}
.sd-cell.sd-read {background: #bbdefb; border-color: #1565c0;}
.sd-cell.sd-drafted {background: #e1bee7; border-color: #8e24aa;}
.sd-cell.sd-unfed {background: #fff; border-style: dashed; border-color: #8e24aa;}
.sd-cell.sd-sibling {background: #f3e5f5; border-style: dotted; border-color: #8e24aa;}
.sd-cell.sd-dropped {opacity: 0.35; text-decoration: line-through;}
</style>
"""
# The round view: each Step reruns its fragment, and Streamlit fades the fragment's elements while it
# runs (after 0.5 s, over 1 s). A Step normally shows within that delay; on a busy classroom server it
# does not, and then every waiting browser repaints the fade frame by frame: about a sixth of the
# browsers' CPU per Step with 8 sessions on 2 cores (scripts/load_test.py). A queued Step says so in
# words.
STEADY_WHILE_RUNNING_CSS = """
<style>
[data-testid="stElementContainer"][data-stale="true"] {opacity: 1; transition: none;}
</style>
"""


def ready_prompts() -> dict[str, list[str]]:
    """{category: [prompt, ...]} from assets/ready_prompts.json."""
    with open(READY_PROMPTS_FILE, encoding="utf-8") as file:
        return json.load(file)


def _read_server_limits() -> tuple[ServerLimits, str | None]:
    """This server's prompt cap and prefill chunk (SPECDEC_MAX_PROMPT_CHARS, SPECDEC_PREFILL_CHUNK),
    or the defaults and why, if the environment holds bad values."""
    try:
        return ServerLimits.from_environment(dict(os.environ)), None
    except SpecDecError as error:
        return ServerLimits(), f"{error}; using the defaults"


def server_limits() -> ServerLimits:
    return _read_server_limits()[0]


def server_limits_problem() -> str | None:
    """Shown in the sidebar by `model_status`."""
    return _read_server_limits()[1]


def waiting_message(ahead: int) -> str:
    """What a page says while its request waits for the shared models."""
    return f"Waiting for the models: {ahead} request(s) ahead of this one…"


def init_state() -> None:
    """On a session's first run: defaults, overridden by the URL (a shared link opens the same demo).
    Keys already in the session state (set by a test) are kept. What a link changed is kept in
    `_link_notices` and shown by `link_notices()`."""
    if st.session_state.get("_initialised"):
        return
    defaults = {key: default() for key, (_, _, default) in SETTINGS.items()}
    params = {param: st.query_params[param] for param, _, _ in SETTINGS.values() if param in st.query_params}
    if "prompt" in st.query_params:
        params["prompt"] = st.query_params["prompt"]
    values, notices = read_link(params, defaults, LIMITS, server_limits().max_prompt_chars, CHOICES)
    for key in SETTINGS:
        st.session_state.setdefault(key, values.get(key, defaults[key]))
    first = next(iter(ready_prompts().values()))[0]
    st.session_state.setdefault("prompt", values.get("prompt", first))
    st.session_state["_link_notices"] = notices
    st.session_state["_initialised"] = True


def link_notices() -> None:
    """What the shared link asked for that could not be used as is, said once at the top of the page."""
    for notice in st.session_state.pop("_link_notices", []):
        st.warning(f"From the link: {notice}.", icon=":material/link:")


def write_url() -> None:
    """Keep the URL in step with the settings and prompt, so the address bar is a shareable link."""
    wanted = {param: str(st.session_state[key]) for key, (param, _, _) in SETTINGS.items()}
    wanted["prompt"] = st.session_state.get("prompt", "")
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


def mirrored(render, label: str, key: str, *args, **kwargs) -> None:
    """A sidebar widget mirroring the plain session key `key` (widget state alone does not survive
    page switches under st.navigation; the plain key does, and the URL is written from it)."""
    st.session_state[f"w_{key}"] = st.session_state[key]

    def copy_back() -> None:
        st.session_state[key] = st.session_state[f"w_{key}"]

    render(label, *args, key=f"w_{key}", on_change=copy_back, **kwargs)


def drafter_choices(target: str) -> list[str]:
    """The drafters offered for `target` (the bundled target's trained ones, where shipped), and the
    current one (typed, or from a link)."""
    choices = [NGRAM]
    if target == BUNDLED_TARGET:
        choices += [BUNDLED_DRAFT, LOOKUP_FIRST + BUNDLED_DRAFT] if shipped_draft_exists() else []
        choices += [BUNDLED_HEAD, LOOKUP_FIRST + BUNDLED_HEAD] if shipped_head_exists() else []
    current = st.session_state["drafter"]
    return choices + ([current] if current not in choices else [])


DRAFTER_NAMES = {  # what the sidebar shows for the known drafters (others: the name itself)
    NGRAM: "n-gram lookup (no model)",
    BUNDLED_DRAFT: "draft model (2 layers)",
    LOOKUP_FIRST + BUNDLED_DRAFT: "n-gram lookup, then draft model",
    BUNDLED_HEAD: "feature head (reads the target)",
    LOOKUP_FIRST + BUNDLED_HEAD: "n-gram lookup, then feature head",
}


def sidebar_controls() -> None:
    """The shared controls. Rendered by app.py on every page, so they keep their values across pages."""
    sb = st.sidebar
    sb.header("Models")
    mirrored(sb.text_input, "Target model", "target", help="bundled name, Hugging Face id or local folder")
    drafters = (
        "a choice below, or type a draft model's Hugging Face id or folder, or a feature head's folder. "
        f"'ngram': copy from the text so far, no model. '{BUNDLED_DRAFT}': a 2-layer draft model "
        f"(`python -m specdec train-draft`). '{BUNDLED_HEAD}': a feature head that reads the target's "
        "hidden states (`python -m specdec train-head`). 'ngram+' before a model or head: copy first "
        "where the text repeats itself, ask the model or head elsewhere."
    )
    mirrored(sb.selectbox, "Drafter", "drafter", drafter_choices(st.session_state["target"].strip()),
             format_func=lambda name: DRAFTER_NAMES.get(name, name), accept_new_options=True, help=drafters)
    sb.header("Decoding")
    mirrored(sb.slider, "γ: the most tokens drafted per round", "gamma", *LIMITS["gamma"])
    mirrored(sb.toggle, "Adaptive draft length", "adaptive", help=help_of(Settings, "adaptive"))
    mirrored(sb.slider, "Stop drafting below this confidence", "draft_threshold",
             *LIMITS["draft_threshold"], step=0.05, disabled=not st.session_state["adaptive"],
             help=help_of(Settings, "draft_threshold"))
    mirrored(sb.toggle, "Price each draft by this machine's passes", "price_drafts",
             disabled=not st.session_state["adaptive"], help=help_of(Settings, "price_drafts"))
    mirrored(sb.toggle, "Second choices beside the drafts (temperature 0)", "siblings",
             disabled=float(st.session_state["temperature"]) > 0, help=help_of(Settings, "siblings"))
    mirrored(sb.selectbox, "Acceptance rule", "rule", list(RULE_NAMES), format_func=RULE_TITLES.get,
             help="how drafts are judged; speculative sampling is the engine's own (see The rule on trial)")
    if lossy_rule_in_use():
        sb.warning(LOSSY_NOTE + ".", icon=":material/warning:")
    mirrored(sb.slider, "Temperature (0 = greedy)", "temperature", *LIMITS["temperature"], step=0.05)
    mirrored(sb.number_input, "Top-k (0 = off)", "top_k", *LIMITS["top_k"], step=1)
    mirrored(sb.slider, "Top-p", "top_p", *LIMITS["top_p"], step=0.05)
    mirrored(sb.number_input, "Seed", "seed", *LIMITS["seed"], step=1)
    mirrored(sb.slider, "Max new tokens", "max_new_tokens", *LIMITS["max_new_tokens"])
    mirrored(sb.toggle, "Chat template", "chat", help="wrap the prompt in the target's chat template")


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


def run_stop_buttons(label: str, run_key: str, stop_key: str, stop_flag: str) -> bool:
    """A primary run button and a Stop button for long work.

    Stop sets `st.session_state[stop_flag]`, which the running loop checks between steps; a new run
    clears it. Returns whether the run button was clicked.
    """

    def stop() -> None:
        st.session_state[stop_flag] = True

    buttons = st.columns([2, 1, 6])
    clicked = buttons[0].button(label, type="primary", key=run_key, width="stretch")
    buttons[1].button("Stop", key=stop_key, on_click=stop, width="stretch")
    if clicked:
        st.session_state[stop_flag] = False
    return clicked


def chart(figure, key: str | None = None, container=st) -> None:
    """A Plotly figure with the app's one chart configuration."""
    container.plotly_chart(figure, config=CHART_CONFIG, key=key)


def run_with_progress(
    steps: Iterator, total: int, describe: Callable[[object], str], stop_flag: str,
    save: Callable[[list, bool], None],
) -> list:  # fmt: skip
    """Drive a long measurement with a progress bar, saving what it has after every step.

    `save(items, finished)` is called after each step, so a Stop (which reruns the page) keeps the
    work done so far; the stop flag is also checked between steps. Returns the items produced.
    """
    progress = st.progress(0.0, text="starting…")
    items: list = []
    for item in steps:
        items.append(item)
        save(items, False)
        progress.progress(min(len(items) / max(total, 1), 1.0), text=describe(item))
        if st.session_state.get(stop_flag):
            break
    else:
        save(items, True)
    progress.empty()
    return items


def lossy_rule_in_use() -> bool:
    """The sidebar's rule is lossy (and the temperature above 0, where that matters)."""
    return st.session_state["rule"] in LOSSY_RULES and float(st.session_state["temperature"]) > 0


def current_settings() -> Settings:
    """The sidebar's values as engine settings (SpecDecError on bad values)."""
    s = st.session_state
    sampling = SamplingConfig(float(s["temperature"]), int(s["top_k"]), float(s["top_p"]))
    return Settings(gamma=int(s["gamma"]), sampling=sampling, max_new_tokens=int(s["max_new_tokens"]),
                    seed=int(s["seed"]), adaptive=bool(s["adaptive"]),
                    draft_threshold=float(s["draft_threshold"]), rule=str(s["rule"]),
                    price_drafts=bool(s["price_drafts"]), siblings=bool(s["siblings"]))


def token_chip(label: str, style_class: str = "", style: str = "", title: str = "", note: str = "") -> str:
    """One token as escaped HTML. Labels, titles and notes are untrusted: all escaped."""
    title_attr = f' title="{html.escape(title, quote=True)}"' if title else ""
    note_html = f"<small>{html.escape(note)}</small>" if note else ""
    style_attr = f' style="{style}"' if style else ""
    return (
        f'<span class="sd-tok {style_class}"{style_attr}{title_attr}>{html.escape(label)}{note_html}</span>'
    )


def output_line(tokens: list[OutputToken], new_round: int | None = None) -> str:
    """The text so far, one chip per token, coloured by origin; the newest round's tokens outlined."""
    if not tokens:
        return '<div class="sd-line"><i>(no tokens yet: press Step)</i></div>'
    chips = [
        token_chip(
            t.label,
            "sd-new" if t.round_index == new_round else "",
            ORIGIN_STYLE[t.origin],
            title=f"{t.label} · {t.detail}",
        )  # fmt: skip
        for t in tokens
    ]
    return f'<div class="sd-line">{"".join(chips)}</div>'


def cache_strip(rows: list[CacheRow], label) -> str:
    """The KV caches as rows of cells (see specdec.lab.kvcache); `label(token_id)` names drafted tokens."""
    kinds = {READ: "sd-read", DRAFT: "sd-drafted", NOT_FED: "sd-unfed", SIBLING: "sd-sibling"}
    meaning = {READ: "read this round", DRAFT: "a drafted token", NOT_FED: "proposed, never fed",
               SIBLING: "the draft's second choice, beside the draft at this position"}
    lines = []
    for row in rows:
        steps = " → ".join(str(length) for length in row.lengths)
        held = f'<span class="sd-cell sd-held" title="cached before this round">{row.held_before} held</span>'
        cells = [held]
        for cell in row.cells:
            text = label(cell.token) if cell.token is not None else f"#{cell.position}"
            dropped = " sd-dropped" if cell.dropped else ""
            title = f"position {cell.position}: {meaning[cell.kind]}"
            title += " (dropped by the roll-back)" if cell.dropped else ""
            title_attr = html.escape(title, quote=True)
            cells.append(f'<span class="sd-cell {kinds[cell.kind]}{dropped}" title="{title_attr}">'
                         f"{html.escape(text)}</span>")  # fmt: skip
        lines.append(f"<div><b>{row.model} cache: {steps}</b>{''.join(cells)}</div>")
    key = (
        '<div class="sd-legend">'
        + "".join(f'<span class="sd-cell {c}">{n}</span> ' for c, n in (
            ("sd-read", "read this round"), ("sd-drafted", "drafted"), ("sd-unfed", "proposed, never fed"),
            ("sd-sibling", "second choice"), ("sd-drafted sd-dropped", "dropped by the roll-back")))
        + "</div>"
    )  # fmt: skip
    return f'<div class="sd-cache">{"".join(lines)}{key}</div>'


def legend() -> str:
    return (
        '<div class="sd-legend">Colours: '
        + token_chip("accepted draft", style=ORIGIN_STYLE[ACCEPTED])
        + token_chip("resampled after a rejection", style=ORIGIN_STYLE[RESAMPLED])
        + token_chip("bonus (all drafts accepted)", style=ORIGIN_STYLE[BONUS])
        + "</div>"
    )
