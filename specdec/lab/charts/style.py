"""The charts' shared look: colours, the house layout, and token labels made safe to show.

Token labels are untrusted text, and Plotly reads a few HTML tags in labels, so every label is
escaped here (`token_names`) or with html.escape where a chart names its own categories.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

P_COLOR, Q_COLOR, RESIDUAL_COLOR = "#1e88e5", "#8e24aa", "#ef6c00"
ACCEPT_COLOR, REJECT_COLOR, BONUS_COLOR, MUTED_COLOR = "#2e7d32", "#c62828", "#1565c0", "#bdbdbd"
HIGHLIGHT_LINE = "#212121"
MAX_BARS = 8
SPEC_COLOR, PLAIN_COLOR, THEORY_COLOR = "#2e7d32", "#757575", "#1e88e5"
LANE_COLORS = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def token_names(token_ids: list[int], labels: dict[int, str]) -> list[str]:
    """Escaped, unique category names (two tokens can look alike, e.g. two unknown bytes)."""
    names, seen = [], set()
    for token_id in token_ids:
        name = html.escape(labels.get(token_id, f"<id {token_id}>"))
        if name in seen:
            name = f"{name} #{token_id}"
        seen.add(name)
        names.append(name)
    return names


def narrow(fig: go.Figure, categories: int) -> go.Figure:
    """Keep bars a readable width when only a few tokens are shown (one bar would fill the plot)."""
    fig.update_xaxes(range=[-0.5, max(categories, 6) - 0.5])
    return fig


def styled(fig: go.Figure, title: str, height: int = 260) -> go.Figure:
    fig.update_layout(
        title={"text": html.escape(title), "font": {"size": 14}},
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        bargap=0.25,
        plot_bgcolor="white",
    )
    fig.update_yaxes(gridcolor="#eeeeee", rangemode="tozero")
    fig.update_xaxes(tickfont={"size": 13})  # token labels such as "," must stay readable
    return fig


def outline(token_ids: list[int], highlight: int | None) -> dict:
    """A thick dark outline around the highlighted token's bars."""
    return {
        "color": HIGHLIGHT_LINE,
        "width": [3 if token_id == highlight else 0 for token_id in token_ids],
    }
