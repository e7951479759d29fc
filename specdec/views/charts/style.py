"""The charts' shared look: colours, the house layout, and token labels made safe to show.

Token labels are untrusted text, and Plotly reads a few HTML tags in labels, so every label is
escaped here (`token_names`) or with html.escape where a chart names its own categories.
"""

from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from specdec.views.tokens import MAX_TOKEN_CHARS, capped

P_COLOR, Q_COLOR, RESIDUAL_COLOR = "#1e88e5", "#8e24aa", "#ef6c00"
ACCEPT_COLOR, REJECT_COLOR, BONUS_COLOR, MUTED_COLOR = "#2e7d32", "#c62828", "#1565c0", "#bdbdbd"
HIGHLIGHT_LINE = "#212121"
MAX_BARS = 8
SPEC_COLOR, PLAIN_COLOR, THEORY_COLOR = "#2e7d32", "#757575", "#1e88e5"
LANE_COLORS = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def token_names(token_ids: list[int], labels: dict[int, str], width: int = MAX_TOKEN_CHARS) -> list[str]:
    """Escaped, unique category names (two tokens can look alike, e.g. two unknown bytes), at most
    `width` characters before escaping (specdec.views.tokens: one way to show a token everywhere)."""
    names, seen = [], set()
    for token_id in token_ids:
        name = html.escape(capped(labels.get(token_id, f"<id {token_id}>"), width))
        if name in seen:
            name = f"{name} #{token_id}"
        seen.add(name)
        names.append(name)
    return names


def narrow(fig: go.Figure, categories: int) -> go.Figure:
    """Keep bars a readable width when only a few tokens are shown (one bar would fill the plot)."""
    fig.update_xaxes(range=[-0.5, max(categories, 6) - 0.5])
    return fig


# One look for every chart, readable at the back of a lecture hall: dark text, 14 px ticks (Streamlit's
# theme alone gives ~11 px grey), the title on the left, the legend under the plot where long entries fit.
INK = "#212121"
TEXT_SIZE, TITLE_SIZE = 14, 16
PRESENTER_SCALE = 1.35  # presenter mode: every text this much larger, and the chart a little taller
PROJECTOR_MIN_SIZE = 20  # ... and never smaller than this (px): what carries to the back of a hall


TITLE_CHARS = 40  # a longer title is cut in a third of the page: it goes on two lines
_TITLE_BREAK = re.compile(r" \(|: |; | — |, ")


def two_lines(title: str, limit: int = TITLE_CHARS) -> str:
    """An escaped chart title; a long one broken once, at the separator nearest its middle (before a
    bracket, after a colon, semicolon, dash or comma)."""
    breaks = list(_TITLE_BREAK.finditer(title)) if len(title) > limit else []
    if not breaks:
        return html.escape(title)
    at = min(breaks, key=lambda m: abs(m.start() - len(title) / 2))
    first, second = title[: at.end() - 1].rstrip(), title[at.end() - 1 :].lstrip()
    if at.group() == " (":
        first, second = title[: at.start()], title[at.start() + 1 :]
    return f"{html.escape(first)}<br>{html.escape(second)}"


def styled(fig: go.Figure, title: str, height: int = 260) -> go.Figure:
    # Text drawn just above the plot (subplot titles, a marked line's note) needs room under the title.
    above = any(note.yref == "paper" and (note.y or 0) >= 1 for note in fig.layout.annotations)
    fig.update_layout(
        # Above the plot, the margin grown to fit it (one line or two; over any text drawn just above).
        title={"text": two_lines(title), "font": {"size": TITLE_SIZE, "color": INK}, "x": 0.01,
               "xanchor": "left", "automargin": True, "yref": "paper", "y": 1, "yanchor": "bottom",
               "pad": {"b": 30 if above else 6}},
        font={"size": TEXT_SIZE, "color": INK},
        height=height,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0.005,
                "yanchor": "bottom", "font": {"size": TEXT_SIZE, "color": INK}},
        bargap=0.25,
        plot_bgcolor="white",
    )
    ink = {"size": TEXT_SIZE, "color": INK}
    axis_text = {"tickfont": ink, "title_font": ink, "automargin": True}
    fig.update_yaxes(gridcolor="#eeeeee", rangemode="tozero", **axis_text)
    fig.update_xaxes(**axis_text)  # token labels such as "," must stay readable
    return fig


def for_projector(fig: go.Figure, scale: float = PRESENTER_SCALE) -> go.Figure:
    """A copy of `fig` with every text `scale` times larger and the plot taller, for presenter mode."""
    big = go.Figure(fig)

    def grow(font) -> dict:
        return {"size": max(PROJECTOR_MIN_SIZE, round((font.size or TEXT_SIZE) * scale))}

    big.update_layout(font=grow(big.layout.font), title_font=grow(big.layout.title.font),
                      legend_font=grow(big.layout.legend.font),
                      height=round((big.layout.height or 300) * (1 + (scale - 1) / 2)))
    def grow_axis(axis) -> None:
        axis.update(tickfont=grow(axis.tickfont), title_font=grow(axis.title.font))

    big.for_each_xaxis(grow_axis)
    big.for_each_yaxis(grow_axis)
    big.for_each_annotation(lambda note: note.update(font=grow(note.font)))
    bar_text = max(PROJECTOR_MIN_SIZE, round(TEXT_SIZE * scale))
    big.update_traces(textfont_size=bar_text, selector={"type": "bar"})
    return big


def spec_for_projector(spec: dict, scale: float = PRESENTER_SCALE) -> dict:
    """A Vega-Lite spec (the round timeline) with its axis and legend text `scale` times larger."""
    size = max(PROJECTOR_MIN_SIZE, round(TEXT_SIZE * scale))
    text = {"labelFontSize": size, "titleFontSize": size, "labelColor": INK, "titleColor": INK}
    return {**spec, "config": {**spec.get("config", {}), "axis": text, "legend": text}}


def outline(token_ids: list[int], highlight: int | None) -> dict:
    """A thick dark outline around the highlighted token's bars."""
    return {
        "color": HIGHLIGHT_LINE,
        "width": [3 if token_id == highlight else 0 for token_id in token_ids],
    }
