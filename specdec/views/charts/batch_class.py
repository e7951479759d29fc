"""The batched class: throughput, a pass's cost and the ratio as rows are added (log-2 axes)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec.views.charts.style import (
    ACCEPT_COLOR,
    LANE_COLORS,
    MUTED_COLOR,
    PLAIN_COLOR,
    REJECT_COLOR,
    SPEC_COLOR,
    THEORY_COLOR,
    styled,
)


def _log2_axis(fig: go.Figure, values: list[int], title: str, **where) -> None:
    fig.update_xaxes(title_text=title, type="log", tickvals=values, ticktext=[str(v) for v in values],
                     **where)


def batch_throughput_chart(points: list[dict], crossover: int | None) -> go.Figure:
    """Tokens/s of all rows together against the batch size B, with and without speculation (`points`:
    batch_size, target_only_tokens_per_second, speculative_tokens_per_second), the crossover marked:
    the first B at which speculation is slower (None: never, up to the largest B measured)."""
    sizes = [p["batch_size"] for p in points]
    fig = go.Figure()
    for key, name, color in (("speculative_tokens_per_second", "speculative", SPEC_COLOR),
                             ("target_only_tokens_per_second", "target only", PLAIN_COLOR)):
        fig.add_scatter(x=sizes, y=[p[key] for p in points], mode="lines+markers", name=name,
                        line={"color": color}, hovertemplate="B=%{x}: %{y:.1f} tokens/s<extra></extra>")
    if crossover is not None:
        fig.add_vline(x=crossover, line_dash="dash", line_color=REJECT_COLOR)
        fig.add_annotation(x=math.log10(crossover), y=1, yref="paper", showarrow=False, yanchor="bottom",
                           text=f"crossover: slower from B={crossover}", font={"color": REJECT_COLOR})
    _log2_axis(fig, sizes, "batch size B (rows decoded together)")
    fig.update_yaxes(title_text="tokens/s, all rows")
    title = (f"Throughput: speculation stops paying at B = {crossover}" if crossover is not None
             else "Throughput: speculation still pays at every B measured")
    return styled(fig, title, height=400)


def batch_cost_chart(curve: list[dict]) -> go.Figure:
    """One target pass's cost against the tokens in it, B × (tokens per row) (`curve`: rows,
    tokens_per_row, tokens, seconds): left, ms per pass beside 'if flat' and 'if ∝ tokens'; right, ms
    per token in the pass, which falls while the pass is memory-bound and levels off once compute-bound."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12)
    for number, per_row in enumerate(sorted({r["tokens_per_row"] for r in curve})):
        mine = sorted((r for r in curve if r["tokens_per_row"] == per_row), key=lambda r: r["tokens"])
        name = "1 per row (plain step)" if per_row == 1 else f"{per_row} per row"
        color = PLAIN_COLOR if per_row == 1 else LANE_COLORS[number % len(LANE_COLORS)]
        custom = [r["rows"] for r in mine]
        per_pass, per_token = (lambda r: r["seconds"] * 1000), (lambda r: r["seconds"] * 1000 / r["tokens"])
        for col, scale in ((1, per_pass), (2, per_token)):
            fig.add_scatter(x=[r["tokens"] for r in mine], y=[scale(r) for r in mine], mode="lines+markers",
                            name=name, line={"color": color}, customdata=custom, showlegend=col == 1,
                            hovertemplate="B=%{customdata}, %{x} tokens: %{y:.2f} ms<extra></extra>",
                            row=1, col=col)
    if curve:
        first = min(curve, key=lambda r: r["tokens"])
        tokens = sorted({r["tokens"] for r in curve})
        fig.add_scatter(x=tokens, y=[first["seconds"] * 1000] * len(tokens), mode="lines", row=1, col=1,
                        name="if flat", line={"dash": "dash", "color": ACCEPT_COLOR})
        fig.add_scatter(x=tokens, y=[first["seconds"] * 1000 * n / first["tokens"] for n in tokens],
                        mode="lines", row=1, col=1, name="if ∝ tokens",
                        line={"dash": "dot", "color": MUTED_COLOR})
        ticks = [2**i for i in range(max(tokens).bit_length()) if 2**i <= max(tokens)]  # labels apart
        for col in (1, 2):
            _log2_axis(fig, ticks, "tokens in the pass (B × tokens per row)", row=1, col=col)
        # The '∝ tokens' line climbs far above the measured passes: keep the axis on the measurements.
        fig.update_yaxes(range=[0, 1.3 * max(r["seconds"] for r in curve) * 1000], row=1, col=1)
    fig.update_yaxes(title_text="ms per target pass", row=1, col=1)
    fig.update_yaxes(title_text="ms per token in the pass", row=1, col=2)
    return styled(fig, "What one target pass costs as rows are added", height=420)


def batch_ratio_chart(rows: list[dict]) -> go.Figure:
    """Speculative over target-only tokens/s per batch size: measured, and expected from the measured
    acceptance and the cost curve (`rows`: batch_size, ratio, expected_ratio); 1 = break-even."""
    labels = [f"B={r['batch_size']}" for r in rows]
    fig = go.Figure()
    # Labels inside the bars' tops, white: outside, a bar near 1 had its label struck through by the line.
    text = {"texttemplate": "%{y:.2f}×", "textposition": "inside", "insidetextanchor": "end",
            "textfont": {"color": "white"}}
    fig.add_bar(x=labels, y=[r["ratio"] for r in rows], name="measured", marker_color=SPEC_COLOR, **text)
    fig.add_bar(x=labels, y=[r["expected_ratio"] for r in rows], name="expected from α and the cost curve",
                marker_color=THEORY_COLOR, **text)
    fig.add_hline(y=1.0, line_dash="dash", line_color=REJECT_COLOR, layer="below")
    fig.update_yaxes(title_text="speculative ÷ target only")
    return styled(fig, "The ratio, measured and expected", height=340)
