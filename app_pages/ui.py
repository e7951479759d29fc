"""What the pages share: charts, long runs, token HTML; and, re-exported from their own modules,
the sidebar (app_pages/sidebar.py) and the model pair's loading (app_pages/loading.py), so a page
reads every shared thing as `ui.<name>`.

Pages go widgets -> specdec API (models/, measure/, views/) -> specdec.views.charts; nothing here
touches torch.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterator, Sequence

import streamlit as st

from app_pages.loading import (  # noqa: F401 - re-exported for the pages
    live_runs,
    load_pair,
    loading_now,
    model_status,
    note_imports,
    pair_for,
    pair_shelf,
    require_pair,
    require_prompt,
    start_loading,
    waiting_message,
)
from app_pages.sidebar import (  # noqa: F401 - re-exported for the pages
    LOSSY_NOTE,
    current_settings,
    init_state,
    link_notices,
    lossy_rule_in_use,
    mirrored,
    presenter,
    ready_prompts,
    server_limits,
    sidebar_controls,
    write_url,
)
from specdec.measure import eta
from specdec.views.charts.style import for_projector
from specdec.views.kvcache import DRAFT, NOT_FED, OTHER_BRANCH, READ, CacheRow
from specdec.views.stepper import ACCEPTED, BONUS, RESAMPLED, OutputToken

CHART_CONFIG = {"displayModeBar": False}  # every chart: no Plotly toolbar over a teaching figure

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
.sd-cell.sd-branch {background: #f3e5f5; border-style: dotted; border-color: #8e24aa;}
.sd-cell.sd-dropped {opacity: 0.35; text-decoration: line-through;}
</style>
"""
# The round view: each Step reruns its fragment, and Streamlit fades the fragment's elements while it
# runs (after 0.5 s, over 1 s). A Step normally shows within that delay; on a busy classroom server it
# does not, and then every waiting browser repaints the fade frame by frame, a large share of the
# browsers' CPU (scripts/load_test.py; docs/LOG.md, "Figures that lived in code comments"). A queued
# Step says so in words.
STEADY_WHILE_RUNNING_CSS = """
<style>
[data-testid="stElementContainer"][data-stale="true"] {opacity: 1; transition: none;}
</style>
"""


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


def quick_full_buttons(quick: tuple[str, str], full: tuple[str, str], stop_key: str,
                       stop_flag: str) -> str | None:
    """A long experiment's three buttons: the quick run (primary: the page's default answer), the full
    run one click more, and Stop (as run_stop_buttons). `quick`, `full`: (label, key). Returns "quick",
    "full" or None."""

    def stop() -> None:
        st.session_state[stop_flag] = True

    buttons = st.columns([2, 2, 1, 3])
    chosen = None
    if buttons[0].button(quick[0], type="primary", key=quick[1], width="stretch"):
        chosen = "quick"
    if buttons[1].button(full[0], key=full[1], width="stretch"):
        chosen = "full"
    buttons[2].button("Stop", key=stop_key, on_click=stop, width="stretch")
    if chosen:
        st.session_state[stop_flag] = False
    return chosen


def inputs_box(label: str):
    """Where a page's inputs go: in presenter mode folded into an expander named `label` (the class looks
    at the result, not the controls), elsewhere in the page as they are."""
    return st.expander(label, expanded=False) if presenter() else st.container()


def note(text: str, container=st) -> None:
    """A line the class needs even on a projector (an estimate, the prompt used, the settings): a
    caption, and in presenter mode, which hides captions, a line of body text."""
    (container.markdown if presenter() else container.caption)(text)


def chart(figure, key: str | None = None, container=st) -> None:
    """A Plotly figure with the app's one chart configuration; in presenter mode, its text larger."""
    container.plotly_chart(for_projector(figure) if presenter() else figure, config=CHART_CONFIG, key=key)


DRAW_EVERY = 1.0  # seconds between two live drawings of a run's chart (the first result draws at once)


@st.cache_resource(show_spinner=False)
def measured_paces() -> dict[str, eta.Pace]:
    """Server-wide: the pace of the last finished run of each kind, for the estimate before a run."""
    return {}


def estimate_text(pace_key: str, weight: float) -> str:
    """Before a run: its time at the pace the last run of its kind took on this server, or that the
    time left is shown once the first results are in (nothing measured yet)."""
    measured = measured_paces().get(pace_key)
    if measured is None:
        return "the time left shows once the first results are in"
    return f"about {eta.say_seconds(measured.seconds_for(weight))} at the pace measured on this server"


def run_with_progress(
    steps: Iterator, total: int, describe: Callable[[object], str], stop_flag: str,
    save: Callable[[list, bool], None], weights: Sequence[float] | None = None,
    draw: Callable[[list], None] | None = None, pace_key: str | None = None,
) -> list:
    """Drive a long measurement with a progress bar and the time left, saving what it has after every
    step.

    `save(items, finished)` is called after each step, so a Stop (which reruns the page) keeps the
    work done so far; the stop flag is also checked between steps. `weights`: each step's relative
    size (default: equal), from which the time left is extrapolated at the pace measured so far.
    `draw(items)`, if given, draws the results so far into a placeholder under the progress bar after
    the first step and then at most every DRAW_EVERY seconds; it is cleared at the end, for the page's
    own drawing. A finished run's pace is kept under `pace_key` (estimate_text). Returns the items.
    """
    weights = list(weights) if weights is not None else [1.0] * total
    progress = st.progress(0.0, text="starting…")
    live = st.empty() if draw is not None else None
    items: list = []
    start, drawn = time.monotonic(), float("-inf")
    for item in steps:
        items.append(item)
        save(items, False)
        elapsed = time.monotonic() - start
        left = eta.seconds_left(elapsed, weights, len(items)) if len(items) < len(weights) else None
        text = describe(item) + (f" · about {eta.say_seconds(left)} left" if left else "")
        progress.progress(min(len(items) / max(total, 1), 1.0), text=text)
        if live is not None and time.monotonic() - drawn >= DRAW_EVERY:
            with live.container():
                draw(items)
            drawn = time.monotonic()
        if st.session_state.get(stop_flag):
            break
    else:
        save(items, True)
        if pace_key is not None and (measured := eta.pace(time.monotonic() - start, sum(weights))):
            measured_paces()[pace_key] = measured
    progress.empty()
    if live is not None:
        live.empty()
    return items


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
        )
        for t in tokens
    ]
    return f'<div class="sd-line">{"".join(chips)}</div>'


def cache_strip(rows: list[CacheRow], label) -> str:
    """The KV caches as rows of cells (see specdec.views.kvcache); `label(token_id)` names drafted tokens."""
    kinds = {READ: "sd-read", DRAFT: "sd-drafted", NOT_FED: "sd-unfed", OTHER_BRANCH: "sd-branch"}
    meaning = {READ: "read this round", DRAFT: "a drafted token", NOT_FED: "proposed, never fed",
               OTHER_BRANCH: "a candidate of the tree off the accepted path, beside the one at this position"}
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
                         f"{html.escape(text)}</span>")
        lines.append(f"<div><b>{row.model} cache: {steps}</b>{''.join(cells)}</div>")
    key = (
        '<div class="sd-legend">'
        + "".join(f'<span class="sd-cell {c}">{n}</span> ' for c, n in (
            ("sd-read", "read this round"), ("sd-drafted", "drafted"), ("sd-unfed", "proposed, never fed"),
            ("sd-branch", "other branch"), ("sd-drafted sd-dropped", "dropped by the roll-back")))
        + "</div>"
    )
    return f'<div class="sd-cache">{"".join(lines)}{key}</div>'


def legend() -> str:
    return (
        '<div class="sd-legend">Colours: '
        + token_chip("accepted draft", style=ORIGIN_STYLE[ACCEPTED])
        + token_chip("resampled after a rejection", style=ORIGIN_STYLE[RESAMPLED])
        + token_chip("bonus (all drafts accepted)", style=ORIGIN_STYLE[BONUS])
        + "</div>"
    )
