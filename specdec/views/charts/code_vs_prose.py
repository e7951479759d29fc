"""The code-against-prose page: every prompt as a dot per category, with its median."""

from __future__ import annotations

import html
from statistics import median

import plotly.graph_objects as go

from specdec.views.charts.style import HIGHLIGHT_LINE, MUTED_COLOR, P_COLOR, styled

BOX_FROM = 5  # prompts a category needs before a box (quartiles) means something; fewer: the dots


def category_chart(rows: list[dict], key: str, title: str, axis: str) -> go.Figure:
    """Every prompt as a dot, per category, with the category's median as a bar across its dots; a box
    (quartiles) behind them where a category has BOX_FROM prompts or more. The x axis says how many."""
    fig = go.Figure()
    counts = []
    for category in dict.fromkeys(r["category"] for r in rows):
        values = [r[key] for r in rows if r["category"] == category]
        counts.append(len(values))
        name = html.escape(str(category))
        if len(values) >= BOX_FROM:
            fig.add_box(y=values, x=[name] * len(values), name=name, boxpoints=False,
                        fillcolor="rgba(0,0,0,0)", line={"color": MUTED_COLOR}, hoverinfo="skip")
        fig.add_scatter(x=[name] * len(values), y=values, mode="markers", name=name,
                        marker={"size": 10, "color": P_COLOR, "opacity": 0.8},
                        hovertemplate="%{y:.2f}<extra></extra>")
        fig.add_scatter(x=[name], y=[median(values)], mode="markers", name=f"{name}: median",
                        marker={"symbol": "line-ew", "size": 34,
                                "line": {"width": 3, "color": HIGHLIGHT_LINE}},
                        hovertemplate="median %{y:.2f}<extra></extra>")
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title_text=axis, rangemode="tozero")
    if counts:  # under the axis, where a narrow column does not cut it off
        each = f"{counts[0]} prompt{'s' if counts[0] != 1 else ''}" if len(set(counts)) == 1 else \
            f"{min(counts)}–{max(counts)} prompts"
        fig.update_xaxes(title_text=f"{each} each; bar: median")
    return styled(fig, title, height=320)
