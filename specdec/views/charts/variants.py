"""The variants page: drafters side by side (the race itself is speedup.race_chart); the early exit's
branch off the target's layers."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.views.charts.style import MUTED_COLOR, P_COLOR, Q_COLOR, SPEC_COLOR, styled


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


def early_exit_chart(depth: int, exit_layer: int, adapter: bool = True, adapter_layers: int = 2) -> go.Figure:
    """The target's `depth` layers in a row, and the exit branch after layer `exit_layer` below them:
    the draft runs layers 1..L (the target's own, on its one KV cache), then an adapter if trained, then
    the target's own final norm and output head; verification runs every layer."""
    fig = go.Figure()
    head_at = depth + 0.6  # the norm-and-head boxes start here, right of the last layer
    head_width = max(6.0, depth / 4)

    def box(x0: float, x1: float, y0: float, color: str, text: str) -> None:
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y0 + 1, fillcolor=color, opacity=0.85,
                      line={"color": "white", "width": 1})
        if text:
            fig.add_annotation(x=(x0 + x1) / 2, y=y0 + 0.5, text=text, showarrow=False,
                               font={"color": "white" if color != MUTED_COLOR else "black"})

    def arrow(x0: float, y0: float, x1: float, y1: float) -> None:
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                           showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor=MUTED_COLOR)

    for n in range(1, depth + 1):
        shown = n in (1, exit_layer, depth)  # the rest unnamed: thirty labels would not fit
        box(n - 1, n, 1.4, SPEC_COLOR if n <= exit_layer else P_COLOR, str(n) if shown else "")
    box(head_at, head_at + head_width, 1.4, MUTED_COLOR, "norm + head → p")
    fig.add_annotation(x=-0.5, y=2.65, showarrow=False, xanchor="left",
                       text=f"layers 1–{exit_layer}: the target's own, one KV cache for both")
    fig.add_annotation(x=depth, y=2.65, showarrow=False, xanchor="right",
                       text=f"layers {exit_layer + 1}–{depth}: verification only")
    branch_x = exit_layer - 0.5
    arrow(branch_x, 1.4, branch_x, 0.6)
    if adapter:
        box(branch_x - 0.5, branch_x + 7.5, -0.4, Q_COLOR,
            f"exit adapter ({adapter_layers} layer{'s' if adapter_layers > 1 else ''})")
        arrow(branch_x + 7.5, 0.1, head_at, 0.1)
    else:
        arrow(branch_x, 0.1, head_at, 0.1)
        fig.add_annotation(x=(branch_x + head_at) / 2, y=0.35, showarrow=False, text="no adapter (early:L)")
    box(head_at, head_at + head_width, -0.4, MUTED_COLOR, "norm + head → q")
    fig.update_xaxes(visible=False, range=[-0.5, head_at + head_width + 0.5])
    fig.update_yaxes(visible=False, range=[-0.6, 3.0])
    fig.update_layout(showlegend=False)
    return styled(fig, f"The target's {depth} layers and the exit after layer {exit_layer}", height=230)
