"""Student mode: a student's guesses against the true chances."""

from __future__ import annotations

import plotly.graph_objects as go

from specdec.views.charts.style import MUTED_COLOR, P_COLOR, RESIDUAL_COLOR, styled


def calibration_chart(calibration: list[dict], count_guesses: list[dict]) -> go.Figure:
    """A student's guesses against the truth: for ticked drafts, the share said "kept" per bin of the
    true survival probability; for counts, the number said against the expected number. The
    diagonal is perfect calibration."""
    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", name="calibrated",
                    line={"dash": "dot", "color": MUTED_COLOR}, hoverinfo="skip")
    if calibration:
        fig.add_scatter(
            x=[row["true_probability"] for row in calibration],
            y=[row["said_kept"] for row in calibration],
            mode="lines+markers",
            name="drafts: share you said kept",
            marker={"size": [8 + 2 * min(row["drafts"], 10) for row in calibration], "color": P_COLOR},
            text=[f"{row['drafts']} draft(s)" for row in calibration],
            hovertemplate="true chance %{x:.2f}: you said kept %{y:.0%} (%{text})<extra></extra>",
        )
    if count_guesses:
        most = max(max(g["expected"], g["said"]) for g in count_guesses) or 1
        fig.add_scatter(
            x=[g["expected"] / most for g in count_guesses],
            y=[g["said"] / most for g in count_guesses],
            mode="markers",
            name=f"counts (÷ {most:g})",
            marker={"size": 10, "color": RESIDUAL_COLOR, "symbol": "diamond"},
            hovertemplate="expected %{x:.2f}, you said %{y:.2f} (scaled)<extra></extra>",
        )
    fig.update_xaxes(title_text="true chance a draft survives", range=[-0.02, 1.02], gridcolor="#eeeeee")
    fig.update_yaxes(title_text="your answer", range=[-0.02, 1.02])
    return styled(fig, "Calibration: your guesses against the true chances", height=300)
