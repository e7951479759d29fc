"""The idle-machine page: what a target pass costs, and where a round's time goes."""

from __future__ import annotations

import plotly.graph_objects as go

from specdec.lab.charts.style import ACCEPT_COLOR, LANE_COLORS, MUTED_COLOR, P_COLOR, styled


def forward_cost_chart(rows: list[dict], device: str) -> go.Figure:
    """Seconds per target forward pass against the number of new tokens in it (log-2 x axis)."""
    x = [r["tokens"] for r in rows]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=[r["seconds"] * 1000 for r in rows],
        mode="lines+markers",
        name="median",
        line={"color": P_COLOR},
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [(r["max_seconds"] - r["seconds"]) * 1000 for r in rows],
            "arrayminus": [(r["seconds"] - r["min_seconds"]) * 1000 for r in rows],
        },
        hovertemplate="%{x} tokens: %{y:.1f} ms<extra></extra>",
    )
    if rows:
        one = rows[0]["seconds"] * 1000
        fig.add_scatter(
            x=x,
            y=[one * n / rows[0]["tokens"] for n in x],
            mode="lines",
            name="if cost ∝ tokens",
            line={"dash": "dot", "color": MUTED_COLOR},
        )
        fig.add_scatter(
            x=x,
            y=[one] * len(x),
            mode="lines",
            name="if flat (memory-bound)",
            line={"dash": "dash", "color": ACCEPT_COLOR},
        )
    fig.update_xaxes(
        title_text="new tokens in one forward pass", type="log", tickvals=x, ticktext=[str(n) for n in x]
    )
    fig.update_yaxes(title_text="ms per pass", rangemode="tozero")
    return styled(fig, f"Target forward pass cost on {device}", height=340)


def round_breakdown_chart(breakdowns: dict[str, dict[str, float]]) -> go.Figure:
    """Milliseconds per round in each stage of the loop, one stacked bar per way of running it."""
    fig = go.Figure()
    stages = list(dict.fromkeys(stage for parts in breakdowns.values() for stage in parts))
    for number, stage in enumerate(stages):
        fig.add_bar(
            y=list(breakdowns), x=[parts.get(stage, 0.0) for parts in breakdowns.values()], name=stage,
            orientation="h", marker_color=LANE_COLORS[number % len(LANE_COLORS)],
            hovertemplate="%{x:.2f} ms<extra>" + stage + "</extra>",
        )  # fmt: skip
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="ms per round", gridcolor="#eeeeee")
    return styled(fig, "Where a round's time goes", height=220)
