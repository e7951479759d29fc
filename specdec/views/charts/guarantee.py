"""The guarantee page: the rule on toy distributions, and sampled outcomes side by side."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.measure.stats import wilson_interval
from specdec.views.charts.style import (
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


def error_bars(shares: list[float], size: int) -> dict:
    """Plotly's error_y for shares of `size` draws: each share's 95 % Wilson interval (the sampling
    error), drawn from the bar's top."""
    intervals = [wilson_interval(round(share * size), size) for share in shares]
    above = [high - share for share, (_, high) in zip(shares, intervals, strict=True)]
    below = [share - low for share, (low, _) in zip(shares, intervals, strict=True)]
    return {"type": "data", "symmetric": False, "thickness": 1.5, "width": 4, "color": "#424242",
            "array": above, "arrayminus": below}


def empirical_chart(
    labels: list[str], speculative: list[float], target: list[float], title: str,
    control: list[float] | None = None, exact: list[float] | None = None,
    sizes: tuple[int, int, int] | None = None,
) -> go.Figure:
    """Empirical distributions over the same outcomes, side by side: speculative, target only, and the
    negative control (the draft alone) where given. Any number of samples, from the first pair on: a
    run draws this as its results arrive. `exact`: the target's own law of each outcome, drawn first;
    `sizes`: each sample's draws (speculative, target only, control), for error bars of 95 %."""
    names = token_names(list(range(len(labels))), dict(enumerate(labels)), width=28)  # outcomes: a few tokens
    series = [("speculative", speculative, SPEC_COLOR, "speculative"),
              ("target only", target, PLAIN_COLOR, "target only")]
    if control is not None:
        series.append(("draft alone (negative control)", control, Q_COLOR, "draft alone"))
    fig = go.Figure()
    if exact is not None:
        fig.add_bar(x=names, y=exact, name="exact: the target's p", marker_color=P_COLOR,
                    marker_pattern_shape="/", hovertemplate="%{x}: %{y:.3f}<extra>the target's p</extra>")
    for number, (name, values, color, short) in enumerate(series):
        errors = error_bars(values, sizes[number]) if sizes and sizes[number] else None
        fig.add_bar(x=names, y=values, name=name + (" ± 95 %" if errors else ""), marker_color=color,
                    error_y=errors,
                    hovertemplate=f"%{{x}}: %{{y:.3f}}<extra>{short}</extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="share")  # whiskers: 95 % sampling error (the page says so under it)
    return styled(fig, title, height=320)
