"""The guarantee page: the rule on toy distributions, and sampled outcomes side by side."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.lab.charts.style import (
    P_COLOR,
    PLAIN_COLOR,
    Q_COLOR,
    RESIDUAL_COLOR,
    SPEC_COLOR,
    styled,
    token_names,
)


def toy_chart(
    labels: list[str], target: list[float], draft: list[float], residual: list[float], output: list[float]
) -> go.Figure:
    """p, q, the residual and the exact output distribution of one speculative step."""
    names = [html.escape(name) for name in labels]
    fig = go.Figure()
    for series, name, color in (
        (target, "p (target)", P_COLOR),
        (draft, "q (draft)", Q_COLOR),
        (residual, "residual norm(max(0, p−q))", RESIDUAL_COLOR),
        (output, "output of the rule", SPEC_COLOR),
    ):
        fig.add_bar(
            x=names,
            y=series,
            name=name,
            marker_color=color,
            hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability", range=[0, 1.05])
    return styled(fig, "Toy distributions: the output equals p", height=360)  # the house legend: below


def empirical_chart(
    labels: list[str], speculative: list[float], target: list[float], title: str,
    control: list[float] | None = None,
) -> go.Figure:  # fmt: skip
    """Empirical distributions over the same outcomes, side by side: speculative, target only, and the
    negative control (the draft alone) where given. Any number of samples, from the first pair on: a
    run draws this as its results arrive."""
    names = token_names(list(range(len(labels))), dict(enumerate(labels)), width=28)  # outcomes: a few tokens
    series = [("speculative", speculative, SPEC_COLOR, "speculative"),
              ("target only", target, PLAIN_COLOR, "target only")]
    if control is not None:
        series.append(("draft alone (negative control)", control, Q_COLOR, "draft alone"))
    fig = go.Figure()
    for name, values, color, short in series:
        fig.add_bar(x=names, y=values, name=name, marker_color=color,
                    hovertemplate=f"%{{x}}: %{{y:.3f}}<extra>{short}</extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="frequency")
    return styled(fig, title, height=320)
