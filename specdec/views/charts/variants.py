"""The variants page: drafters side by side (the race itself is speedup.race_chart)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.views.charts.style import MUTED_COLOR, P_COLOR, SPEC_COLOR, styled


def drafter_chart(rows: list[dict]) -> go.Figure:
    """Speed-up and tokens per target pass for each drafter (target-only = 1)."""
    names = [html.escape(r["drafter"]) for r in rows]
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=[r["speedup"] for r in rows],
        name="speed-up (x)",
        marker_color=SPEC_COLOR,
        hovertemplate="%{x}: %{y:.2f}x<extra></extra>",
    )
    fig.add_bar(
        x=names,
        y=[r["tokens_per_pass"] for r in rows],
        name="tokens per target pass",
        marker_color=P_COLOR,
        hovertemplate="%{x}: %{y:.2f} tokens/pass<extra></extra>",
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": MUTED_COLOR})
    fig.update_layout(barmode="group")
    return styled(fig, "Drafters on the same prompt and settings", height=300)
