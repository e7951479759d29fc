"""The speed-up page: the race, the speed-up so far, acceptance per round, and theory against
measurement.
"""

from __future__ import annotations

import plotly.graph_objects as go

from specdec.core.metrics import SpeedupTheory, expected_speedup
from specdec.views.charts.style import (
    ACCEPT_COLOR,
    LANE_COLORS,
    MUTED_COLOR,
    P_COLOR,
    PLAIN_COLOR,
    REJECT_COLOR,
    SPEC_COLOR,
    THEORY_COLOR,
    styled,
)


def race_chart(lanes: dict[str, list[tuple[float, int]]]) -> go.Figure:
    """Tokens produced against compute seconds, one line per lane: the steeper line is faster."""
    fig = go.Figure()
    colors = {"speculative": SPEC_COLOR, "target only": PLAIN_COLOR}
    for number, (name, points) in enumerate(lanes.items()):
        color = colors.get(name, LANE_COLORS[number % len(LANE_COLORS)])
        fig.add_scatter(
            x=[s for s, _ in points],
            y=[n for _, n in points],
            mode="lines+markers",
            name=name,
            line={"color": color, "shape": "hv"},
            marker={"size": 4},
            hovertemplate="%{y} tokens after %{x:.2f} s<extra>" + name + "</extra>",
        )
    fig.update_xaxes(title_text="compute seconds", gridcolor="#eeeeee", rangemode="tozero")
    fig.update_yaxes(title_text="tokens")
    return styled(fig, "Tokens over time (slope = tokens/s)")


def cumulative_speedup_chart(points: list[tuple[int, float]]) -> go.Figure:
    """Speed-up so far (speculative tokens/s over target-only tokens/s) against tokens produced."""
    fig = go.Figure(
        go.Scatter(
            x=[n for n, _ in points],
            y=[s for _, s in points],
            mode="lines",
            line={"color": SPEC_COLOR},
            name="speed-up so far",
            hovertemplate="%{y:.2f}x after %{x} tokens<extra></extra>",
        )
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": MUTED_COLOR})
    fig.update_xaxes(title_text="speculative tokens so far", gridcolor="#eeeeee")
    fig.update_yaxes(title_text="speed-up (x)")
    return styled(fig, "Cumulative speed-up")


def acceptance_rounds_chart(accepted: list[int], drafted: list[int]) -> go.Figure:
    """Drafts kept and drafts thrown away, per round."""
    rounds = list(range(1, len(accepted) + 1))
    fig = go.Figure()
    fig.add_bar(x=rounds, y=accepted, name="accepted", marker_color=ACCEPT_COLOR)
    fig.add_bar(
        x=rounds,
        y=[d - a for a, d in zip(accepted, drafted, strict=True)],
        name="rejected/discarded",
        marker_color=REJECT_COLOR,
        opacity=0.5,
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="drafts")
    return styled(fig, "Acceptance per round")


def accepted_length_chart(histogram: list[int]) -> go.Figure:
    """How many rounds kept 0, 1, ..., γ drafts."""
    fig = go.Figure(
        go.Bar(
            x=list(range(len(histogram))),
            y=histogram,
            marker_color=P_COLOR,
            hovertemplate="%{y} round(s) kept %{x} draft(s)<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="drafts accepted in the round", dtick=1)
    fig.update_yaxes(title_text="rounds")
    return styled(fig, "Accepted length per round")


def speedup_curve_chart(theory: SpeedupTheory, measured: float) -> go.Figure:
    """The expected speed-up over α (paper: v = 1; this machine: the measured v), with the measured point."""
    alphas = [i / 100 for i in range(101)]
    lengths, c, v = theory.draft_lengths, theory.cost_ratio, theory.verify_cost
    fig = go.Figure()
    fig.add_scatter(
        x=alphas,
        y=[expected_speedup(a, lengths, c) for a in alphas],
        mode="lines",
        name="paper: E[tokens/pass] / (k̄c + 1)",
        line={"color": THEORY_COLOR, "dash": "dash"},
        hovertemplate="α=%{x:.2f}: %{y:.2f}x<extra></extra>",
    )
    fig.add_scatter(
        x=alphas,
        y=[expected_speedup(a, lengths, c, v) for a in alphas],
        mode="lines",
        name=f"this machine: E[tokens/pass] / (k̄c + v), v = {v:.2f}",
        line={"color": THEORY_COLOR},
        hovertemplate="α=%{x:.2f}: %{y:.2f}x<extra></extra>",
    )
    fig.add_scatter(
        x=[theory.alpha],
        y=[measured],
        mode="markers+text",
        name="measured",
        marker={"size": 14, "color": SPEC_COLOR, "symbol": "star"},
        text=[f"{measured:.2f}x"],
        textposition="top left",
        hovertemplate="measured: α=%{x:.2f}, %{y:.2f}x<extra></extra>",
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": MUTED_COLOR})
    fig.update_xaxes(title_text="α (per-token acceptance probability)", range=[0, 1], gridcolor="#eeeeee")
    fig.update_yaxes(title_text="speed-up (x)")
    title = (f"Speed-up against α: {theory.mean_drafted:.1f} drafts a round, each costing {c:.2g} of a "
             "target step")  # in words: a class reads no symbols in a title
    return styled(fig, title, height=340)


def gamma_sweep_chart(rows: list[dict]) -> go.Figure:
    """Measured speed-up (and this machine's theory) per γ; the best γ marked."""
    gammas = [r["gamma"] for r in rows]
    fig = go.Figure()
    best = max(rows, key=lambda r: r["speedup"]) if rows else None
    colors = [SPEC_COLOR if r is best else MUTED_COLOR for r in rows]
    fig.add_bar(
        x=gammas,
        y=[r["speedup"] for r in rows],
        name="measured",
        marker_color=colors,
        hovertemplate="γ=%{x}: %{y:.2f}x<extra>measured</extra>",
    )
    fig.add_scatter(
        x=gammas,
        y=[r["theory"] for r in rows],
        mode="lines+markers",
        name="theory (this machine)",
        line={"color": THEORY_COLOR},
        hovertemplate="γ=%{x}: %{y:.2f}x<extra>theory</extra>",
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": MUTED_COLOR})
    fig.update_xaxes(title_text="γ (tokens drafted per round)", dtick=1)
    fig.update_yaxes(title_text="speed-up (x)")
    return styled(fig, "γ sweep" + (f": best γ = {best['gamma']}" if best else ""), height=300)
