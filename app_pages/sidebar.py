"""The sidebar: the shared settings, read from a shared link at a session's start, shown as
widgets on every page, and written back to the URL; the engine settings they make.

Also what a session starts from: the ready prompts and this server's limits (from its environment).
"""

from __future__ import annotations

import json
import os
from dataclasses import fields

import streamlit as st

from specdec.config import (
    LOSSY_RULES,
    RULE_NAMES,
    TREE_AUTO,
    TREE_OFF,
    SamplingConfig,
    ServerLimits,
    Settings,
    help_of,
    ui_range,
)
from specdec.core.acceptance import RULES
from specdec.core.output_law import REPLACEMENTS, RESIDUAL
from specdec.errors import SpecDecError
from specdec.models.feature_head_files import shipped_head_exists
from specdec.models.loading import shipped_draft_exists
from specdec.models.pair import LOOKUP_FIRST, NGRAM, default_drafter
from specdec.paths import ASSETS, BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET
from specdec.views.links import read_link
from specdec.views.quiz import COUNT, TICK

READY_PROMPTS_FILE = ASSETS / "ready_prompts.json"

# The numeric settings, each from the config dataclass that defines its default and range.
NUMERIC_SETTINGS = {"gamma": Settings, "temperature": SamplingConfig, "top_k": SamplingConfig,
                    "top_p": SamplingConfig, "seed": Settings, "max_new_tokens": Settings,
                    "draft_threshold": Settings}
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
    "tree": ("tree", str, lambda: _config_default(Settings, "tree")),
    "rule": ("rule", str, lambda: _config_default(Settings, "rule")),
    "chat": ("chat", bool, lambda: os.environ.get("SPECDEC_CHAT", "1") != "0"),
    # Presenter mode: large type for a projector, fewer words, the advanced settings folded away.
    "presenter": ("presenter", bool, lambda: False),
    # The round view's student mode, so that an instructor's link opens it for every student.
    "student": ("student", bool, lambda: False),
    "question": ("question", str, lambda: TICK),
    "hint": ("hint", str, lambda: "p"),
    # The rule on trial's own rule, so that a link carries a student's expression (measure.rule_expression).
    "accept": ("accept", str, lambda: ""),
    "on_reject": ("on_reject", str, lambda: RESIDUAL),
}
CHOICES = {"question": (TICK, COUNT), "hint": ("p", "q"), "rule": RULE_NAMES, "on_reject": REPLACEMENTS,
           "tree": (TREE_OFF, TREE_AUTO, "4", "8", "16", "32")}


def _menu_title(rule: str) -> str:
    return RULES[rule].menu_title


def _tree_title(tree: str) -> str:
    return {TREE_OFF: "off: one chain of drafts", TREE_AUTO: "auto: grown to fit each round"}.get(
        tree, f"{tree} drafted tokens")


LOSSY_NOTE = "Lossy rule: above temperature 0 the output is not distributed as the target's"


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


def write_url(keep: dict[str, str] | None = None) -> None:
    """Keep the URL in step with the settings and prompt, so the address bar is a shareable link;
    `keep`: parameters beside the settings (a class's code, app_pages/class_poll.py)."""
    wanted = {param: str(st.session_state[key]) for key, (param, _, _) in SETTINGS.items()}
    wanted["prompt"] = st.session_state.get("prompt", "")
    wanted.update(keep or {})
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
    """The shared controls. Rendered by app.py on every page, so they keep their values across pages.

    Everyday controls first, in the lesson's words (drafter, draft length γ, temperature, acceptance
    rule); the machinery (target, adaptive length and its pricing, the warp's cut-offs,
    seed, budget, template) under "Advanced", folded away."""
    sb = st.sidebar
    mirrored(sb.toggle, "Presenter mode", "presenter",
             help="large type for a projector, fewer words on screen (link parameter presenter=1)")
    sb.header("Decoding")
    drafters = (
        "a choice below, or type a draft model's Hugging Face id or folder, or a feature head's folder. "
        f"'ngram': copy from the text so far, no model. '{BUNDLED_DRAFT}': a 2-layer draft model "
        f"(`python -m specdec train-draft`). '{BUNDLED_HEAD}': a feature head that reads the target's "
        "hidden states (`python -m specdec train-head`). 'ngram+' before a model or head: copy first "
        "where the text repeats itself, ask the model or head elsewhere."
    )
    mirrored(sb.selectbox, "Drafter", "drafter", drafter_choices(st.session_state["target"].strip()),
             format_func=lambda name: DRAFTER_NAMES.get(name, name), accept_new_options=True, help=drafters)
    mirrored(sb.slider, "Draft length γ", "gamma", *LIMITS["gamma"], help="the most tokens drafted per round")
    mirrored(sb.slider, "Temperature (0 = greedy)", "temperature", *LIMITS["temperature"], step=0.05)
    mirrored(sb.selectbox, "Acceptance rule", "rule", list(RULE_NAMES), format_func=_menu_title,
             help="how drafts are judged; speculative sampling is the engine's own (see The rule on trial)")
    if lossy_rule_in_use():
        sb.warning(LOSSY_NOTE + ".", icon=":material/warning:")
    mirrored(sb.selectbox, "Token tree", "tree", list(CHOICES["tree"]), format_func=_tree_title,
             help=help_of(Settings, "tree"))
    advanced = sb.expander("Advanced")
    mirrored(advanced.text_input, "Target model", "target",
             help="bundled name, Hugging Face id or local folder")
    mirrored(advanced.toggle, "Adaptive draft length", "adaptive", help=help_of(Settings, "adaptive"))
    mirrored(advanced.slider, "Stop drafting below this confidence", "draft_threshold",
             *LIMITS["draft_threshold"], step=0.05, disabled=not st.session_state["adaptive"],
             help=help_of(Settings, "draft_threshold"))
    mirrored(advanced.toggle, "Price each draft by this machine's passes", "price_drafts",
             disabled=not st.session_state["adaptive"], help=help_of(Settings, "price_drafts"))
    mirrored(advanced.number_input, "Top-k (0 = off)", "top_k", *LIMITS["top_k"], step=1)
    mirrored(advanced.slider, "Top-p", "top_p", *LIMITS["top_p"], step=0.05)
    mirrored(advanced.number_input, "Seed", "seed", *LIMITS["seed"], step=1)
    mirrored(advanced.slider, "Max new tokens", "max_new_tokens", *LIMITS["max_new_tokens"])
    mirrored(advanced.toggle, "Chat template", "chat", help="wrap the prompt in the target's chat template")
    if presenter():
        st.html(PRESENTER_CSS)


# Presenter mode's look: every text larger, captions (the small print) left to the docs and the
# speaker. Charts grow through ui.chart (specdec.views.charts.style.for_projector).
PRESENTER_CSS = """
<style>
[data-testid="stMainBlockContainer"] {padding-top: 3.75rem;}  /* just under the header bar */
[data-testid="stMainBlockContainer"] :is([data-testid="stMarkdown"], [data-testid="stPageLink"]) :is(p, li) {
  font-size: 1.3rem;}
[data-testid="stMainBlockContainer"] h1 {font-size: 2.8rem;}
[data-testid="stMainBlockContainer"] [data-testid="stCaptionContainer"] {display: none;}
[data-testid="stMainBlockContainer"] :is([data-testid="stWidgetLabel"], button) p {font-size: 1.25rem;}
[data-testid="stMetricValue"] {font-size: 3.2rem;}
[data-testid="stMetricValue"] p {font-size: inherit;}
[data-testid="stMetricLabel"] p {font-size: 1.25rem;}
[data-testid="stTable"] td, [data-testid="stTable"] th {font-size: 1.25rem;}
.sd-line {font-size: 1.5rem !important;}
.sd-tok small {font-size: 1.25rem !important;}
/* Nothing under 20 px on a projector: inputs, code, alerts, options, progress text, expanders. */
[data-testid="stMainBlockContainer"] :is(textarea, input, [data-baseweb="select"] *) {
  font-size: 1.25rem !important;}
[data-testid="stMainBlockContainer"] :is([data-testid="stCode"], [data-testid="stCodeBlock"])
  :is(pre, code, span) {font-size: 1.25rem !important;}
[data-testid="stMainBlockContainer"] [data-testid="stAlertContainer"] :is(p, li, div) {font-size: 1.25rem;}
[data-testid="stMainBlockContainer"] :is([data-testid="stRadio"], [data-testid="stCheckbox"],
  [data-testid="stMultiSelect"], [data-testid="stSelectSlider"], [data-testid="stSlider"]) :is(p, div, span) {
  font-size: 1.25rem;}
[data-testid="stMainBlockContainer"] [data-testid="stProgress"] :is(p, div) {font-size: 1.25rem;}
[data-testid="stMainBlockContainer"] [data-testid="stExpander"] summary :is(p, span) {font-size: 1.25rem;}
[data-testid="stMainBlockContainer"] :is([data-testid="stText"], [data-testid="stMarkdownContainer"] code,
  [data-testid="stMarkdownContainer"] small, [data-testid="stMarkdownContainer"] td,
  [data-testid="stMarkdownContainer"] th) {font-size: 1.25rem;}
[data-testid="stMainBlockContainer"] :is(kbd,
  [data-testid="stFileUploaderDropzoneInstructions"] :is(span, small)) {font-size: 1.25rem !important;}
.sd-legend, .sd-legend .sd-tok, .sd-cache, .sd-cache * {font-size: 1.25rem !important;}
/* A data grid draws its 14 px text on a canvas, which no font rule reaches: the grid is zoomed instead. */
[data-testid="stMainBlockContainer"] [data-testid="stDataFrame"] {zoom: 1.45;}
.sd-cache b {width: 22rem !important;}
</style>
"""


def presenter() -> bool:
    """Presenter mode is on (the sidebar's switch, or presenter=1 in the link)."""
    return bool(st.session_state.get("presenter"))


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
                    price_drafts=bool(s["price_drafts"]), tree=str(s["tree"]))
