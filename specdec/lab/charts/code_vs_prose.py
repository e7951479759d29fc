"""The code-against-prose page: one box per category."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.lab.charts.style import styled


def category_chart(rows: list[dict], key: str, title: str, axis: str) -> go.Figure:
    """One box per category with every prompt as a point: the spread, not just the average."""
    fig = go.Figure()
    for category in dict.fromkeys(r["category"] for r in rows):
        values = [r[key] for r in rows if r["category"] == category]
        fig.add_box(
            y=values,
            name=html.escape(str(category)),
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            hovertemplate="%{y:.2f}<extra></extra>",
        )
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title_text=axis, rangemode="tozero")
    return styled(fig, title, height=300)
