"""The idle-machine page: what a target pass costs, and where a round's time goes."""

from __future__ import annotations

import plotly.graph_objects as go

from specdec.views.charts.style import ACCEPT_COLOR, LANE_COLORS, MUTED_COLOR, P_COLOR, styled


def forward_cost_chart(rows: list[dict], load_costs: dict[int, float] | None = None) -> go.Figure:
    """What a target forward pass over n new tokens costs, in one-token passes (plain steps), against n
    (log-2 x axis): the median of the repeats with bars from the fastest to the slowest (`rows`:
    tokens, seconds, min_seconds, max_seconds; the first row is the one-token pass), and
    `load_costs` {tokens: plain steps}, the costs timed at load that price the drafts, where given.
    The y axis fits the measurement; the "if cost ∝ tokens" line leaves it at the top."""
    fig = go.Figure()
    if not rows:
        return styled(fig, "What one target pass costs, by its size", height=340)
    x = [r["tokens"] for r in rows]
    one = rows[0]["seconds"]
    fig.add_scatter(
        x=x, y=[r["seconds"] / one for r in rows], mode="lines+markers", name="measured here (median)",
        line={"color": P_COLOR},
        error_y={"type": "data", "symmetric": False,
                 "array": [(r["max_seconds"] - r["seconds"]) / one for r in rows],
                 "arrayminus": [(r["seconds"] - r["min_seconds"]) / one for r in rows]},
        customdata=[[r["seconds"] * 1000, r["min_seconds"] * 1000, r["max_seconds"] * 1000] for r in rows],
        hovertemplate="%{x} tokens: %{y:.2f}× one token (median %{customdata[0]:.1f} ms, "
                      "%{customdata[1]:.1f}–%{customdata[2]:.1f})<extra></extra>",
    )
    if load_costs:
        sizes = sorted(load_costs)
        fig.add_scatter(x=sizes, y=[load_costs[n] for n in sizes], mode="markers",
                        name="timed at load (prices the drafts)",
                        marker={"symbol": "diamond-open", "size": 10, "color": ACCEPT_COLOR},
                        hovertemplate="%{x} tokens: %{y:.2f}× (timed at load)<extra></extra>")
    fig.add_scatter(x=x, y=[n / x[0] for n in x], mode="lines", name="if cost ∝ tokens",
                    line={"dash": "dot", "color": MUTED_COLOR}, hoverinfo="skip")
    fig.add_scatter(x=x, y=[1.0] * len(x), mode="lines", name="if flat (memory-bound)",
                    line={"dash": "dash", "color": MUTED_COLOR}, hoverinfo="skip")
    highest = max([r["max_seconds"] / one for r in rows] + list((load_costs or {}).values()))
    fig.update_xaxes(title_text="new tokens in one forward pass", type="log", tickvals=x,
                     ticktext=[str(n) for n in x])
    fig.update_yaxes(title_text="cost in one-token passes", range=[0, max(2.0, highest * 1.2)])
    return styled(fig, "What one target pass costs, by its size", height=360)


def round_breakdown_chart(breakdowns: dict[str, dict[str, float]]) -> go.Figure:
    """Milliseconds per round in each stage of the loop, one stacked bar per way of running it."""
    fig = go.Figure()
    stages = list(dict.fromkeys(stage for parts in breakdowns.values() for stage in parts))
    for number, stage in enumerate(stages):
        fig.add_bar(
            y=list(breakdowns), x=[parts.get(stage, 0.0) for parts in breakdowns.values()], name=stage,
            orientation="h", marker_color=LANE_COLORS[number % len(LANE_COLORS)],
            hovertemplate="%{x:.2f} ms<extra>" + stage + "</extra>",
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="ms per round", gridcolor="#eeeeee")
    return styled(fig, "Where a round's time goes", height=220)
