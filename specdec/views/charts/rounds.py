"""The round-by-round view: the draft's choices, p beside q, the accept test, and the run's
clickable timeline (Altair: a small declarative chart with a click selection).

Notation as in the paper: q is the draft's distribution, p the target's, both after the same warp.
"""

from __future__ import annotations

import copy
import functools
import html
from dataclasses import dataclass

import altair as alt
import pandas as pd
import plotly.graph_objects as go

from specdec.core.records import RoundTrace, ShownDistribution
from specdec.views.charts.style import (
    ACCEPT_COLOR,
    BONUS_COLOR,
    HIGHLIGHT_LINE,
    MAX_BARS,
    MUTED_COLOR,
    P_COLOR,
    Q_COLOR,
    REJECT_COLOR,
    RESIDUAL_COLOR,
    narrow,
    outline,
    styled,
    token_names,
)


def draft_chart(position: ShownDistribution, drafted: int, labels: dict[int, str], title: str) -> go.Figure:
    """q's most likely tokens at one position, the drafted token in colour (stage 1)."""
    assert position.draft_probs is not None, "no draft distribution at the bonus position"
    order = sorted(range(len(position.token_ids)), key=lambda i: -position.draft_probs[i])
    order = [i for i in order if position.draft_probs[i] > 0 or position.token_ids[i] == drafted]
    order = order[:MAX_BARS]
    ids = [position.token_ids[i] for i in order]
    q = [position.draft_probs[i] for i in order]
    colors = [Q_COLOR if token_id == drafted else MUTED_COLOR for token_id in ids]
    fig = go.Figure(go.Bar(x=token_names(ids, labels), y=q, marker_color=colors, name="q (draft)",
                           hovertemplate="%{x}: q=%{y:.3f}<extra></extra>"))
    fig.update_yaxes(title_text="q", range=[0, 1.05])
    return styled(narrow(fig, len(ids)), title)


def feature_chart(feature: list[float], title: str, columns: int = 32) -> go.Figure:
    """A hidden state as a heat strip: its numbers in rows of `columns`, blue below zero, red above."""
    rows = [feature[i : i + columns] for i in range(0, len(feature), columns)]
    rows[-1] = rows[-1] + [None] * (columns - len(rows[-1]))
    limit = max(abs(v) for v in feature) or 1.0
    fig = go.Figure(go.Heatmap(
        z=rows, zmin=-limit, zmax=limit, colorscale="RdBu_r", showscale=True,
        customdata=[[r * columns + c for c in range(columns)] for r in range(len(rows))],
        hovertemplate="dimension %{customdata}: %{z:.3f}<extra></extra>",
    ))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    return styled(fig, title, height=90 + 12 * len(rows))


def distribution_chart(
    position: ShownDistribution,
    labels: dict[int, str],
    title: str,
    highlight: int | None = None,
    show_residual: bool = True,
    residual_name: str = "residual norm(max(0, p−q))",
) -> go.Figure:
    """p next to q (and the residual norm(max(0, p - q)) where there is one), one group per token.
    `residual_name`: what the replacement was drawn from under the round's rule."""
    ids = position.token_ids[:MAX_BARS]
    if highlight is not None and highlight in position.token_ids and highlight not in ids:
        ids = [*ids[:-1], highlight]
    index = [position.token_ids.index(token_id) for token_id in ids]
    names = token_names(ids, labels)
    fig = go.Figure()
    fig.add_bar(x=names, y=[position.target_probs[i] for i in index], name="p (target)",
                marker={"color": P_COLOR, "line": outline(ids, highlight)},
                hovertemplate="%{x}: p=%{y:.3f}<extra></extra>")
    if position.draft_probs is not None:
        fig.add_bar(x=names, y=[position.draft_probs[i] for i in index], name="q (draft)",
                    marker={"color": Q_COLOR, "line": outline(ids, highlight)},
                    hovertemplate="%{x}: q=%{y:.3f}<extra></extra>")
    if show_residual and position.residual_probs is not None:
        fig.add_bar(x=names, y=[position.residual_probs[i] for i in index],
                    name=residual_name,
                    marker={"color": RESIDUAL_COLOR, "line": outline(ids, highlight)},
                    hovertemplate="%{x}: residual=%{y:.3f}<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability")
    return styled(narrow(fig, len(ids)), title)


# What each rule's accept zone is, and the chart's title, when the round has no coin flips.
ZONES = {
    "top-choice": ("1 if x = argmax p, else 0", "top-choice rule: keep x while it is the target's argmax"),
    "sample-compare": ("P(y = x) = p(x)", "sample and compare: keep x if the target's own draw y equals it"),
    "typical": ("1 if p(x) > threshold, else 0", "typical acceptance: keep x while p(x) is above the bar"),
}
GREEDY_ZONE = ("1 if x = argmax p, else 0", "greedy rule: accept while the draft equals the target's argmax")


def acceptance_chart(trace: RoundTrace, labels: dict[int, str]) -> go.Figure:
    """One 0–1 line per drafted token: the accept zone [0, min(1, p/q)] and the uniform draw u.

    u below the ratio = accept. Positions after the first rejection were never tested (grey).
    In greedy mode there is no coin: the zone is all (argmax match) or nothing, and no u is drawn.
    The other rules (core.acceptance) have their own zones; typical acceptance plots p(x) against
    its threshold instead.
    """
    if trace.thresholds is not None:
        return threshold_chart(trace, labels)
    k = trace.num_drafted
    rows = [f"{i + 1}. {name}" for i, name in enumerate(token_names(trace.drafted_tokens, labels))]
    fig = go.Figure()
    if trace.uniforms is not None:
        zone = None  # speculative sampling: the ratio, and a coin
    elif trace.target_draws is not None:
        zone = ZONES["sample-compare"]
    else:  # greedy mode (any rule), or the top-choice rule at any temperature: the same argmax test
        zone = ZONES["top-choice"] if trace.rule == "top-choice" else GREEDY_ZONE
    rule = zone[0] if zone else "min(1, p/q)"
    for i in range(k):
        # Accept zone [0, ratio) in green, reject zone [ratio, 1] in red; grey once never tested.
        tested = i < trace.num_tested
        ratio = trace.accept_probs[i]
        accept_color, reject_color = (ACCEPT_COLOR, REJECT_COLOR) if tested else (MUTED_COLOR, MUTED_COLOR)
        hover = f"accept zone: {rule} = {ratio:.3f}<extra></extra>"
        fig.add_bar(y=[rows[i]], x=[ratio], orientation="h", marker_color=accept_color, opacity=0.35,
                    showlegend=False, hovertemplate=hover)
        fig.add_bar(y=[rows[i]], x=[1 - ratio], base=[ratio], orientation="h", marker_color=reject_color,
                    opacity=0.12, showlegend=False, hoverinfo="skip")
    fig.add_scatter(y=rows, x=trace.accept_probs[:k], mode="markers", name=rule,
                    marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": HIGHLIGHT_LINE}},
                    hovertemplate="ratio %{x:.3f}<extra></extra>")
    if trace.uniforms is not None:
        tested_rows = rows[: trace.num_tested]
        u = trace.uniforms[: trace.num_tested]
        colors = [ACCEPT_COLOR if i < trace.num_accepted else REJECT_COLOR for i in range(len(u))]
        fig.add_scatter(y=tested_rows, x=u, mode="markers+text", name="u ~ Uniform(0, 1)",
                        marker={"symbol": "diamond", "size": 14, "color": colors,
                                "line": {"width": 1, "color": "white"}},
                        text=[f"u={value:.2f}" for value in u], textposition="top center",
                        cliponaxis=False,  # the first row's label sits above the plot area
                        hovertemplate="u = %{x:.3f}<extra></extra>")
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(range=[0, 1.0], tickvals=[0, 0.25, 0.5, 0.75, 1], gridcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", type="category")
    if trace.target_draws is not None:
        tested = range(trace.num_tested)
        fig.add_scatter(y=[rows[i] for i in tested], x=[trace.accept_probs[i] for i in tested],
                        mode="text", text=[f"y = {html.escape(labels.get(trace.target_draws[i], '?'))}"
                                           for i in tested],
                        textposition="middle right", showlegend=False, hoverinfo="skip")
    title = zone[1] if zone else "accept if u < min(1, p/q)"
    return styled(fig, title, height=90 + 42 * max(k, 1))


def threshold_chart(trace: RoundTrace, labels: dict[int, str]) -> go.Figure:
    """Typical acceptance: per drafted token, p(x) against the bar min(ε, δ·exp(−H(p))); kept if above."""
    k = trace.num_drafted
    rows = [f"{i + 1}. {name}" for i, name in enumerate(token_names(trace.drafted_tokens, labels))]
    colors = [MUTED_COLOR if i >= trace.num_tested else ACCEPT_COLOR if i < trace.num_accepted
              else REJECT_COLOR for i in range(k)]
    fig = go.Figure()
    fig.add_bar(y=rows, x=trace.target_token_probs[:k], orientation="h", marker_color=colors, opacity=0.5,
                name="p(x)", hovertemplate="p(x) = %{x:.3f}<extra></extra>")
    fig.add_scatter(y=rows, x=trace.thresholds[:k], mode="markers", name="threshold",
                    marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": HIGHLIGHT_LINE}},
                    hovertemplate="threshold %{x:.3f}<extra></extra>")
    fig.update_xaxes(range=[0, 1.0], title_text="probability", gridcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", type="category")
    return styled(fig, ZONES["typical"][1], height=110 + 42 * max(k, 1))



TIMELINE_COLORS = {"accepted": ACCEPT_COLOR, "rejected": REJECT_COLOR, "not tested": "#e0e0e0",
                   "resampled": RESIDUAL_COLOR, "bonus": BONUS_COLOR}
TIMELINE_PICK = "pick"  # the selection's name: a click on a round selects {"round": n}


def timeline_rows(traces: list[RoundTrace], labels: dict[int, str], shown: int = -1) -> list[dict]:
    """One cell per drafted token and one for the token each round adds, with its fate; `shown`
    (a round index) marks the cells of the round on screen."""
    rows = []
    for trace in traces:
        for i, token in enumerate(trace.drafted_tokens):
            fate = "accepted" if i < trace.num_accepted else "rejected" if i < trace.num_tested else (
                "not tested"
            )
            rows.append({"round": trace.index + 1, "slot": i + 1, "fate": fate,
                         "token": labels.get(token, ""), "shown": trace.index == shown})
        rows.append({"round": trace.index + 1, "slot": trace.num_drafted + 1,
                     "fate": "bonus" if trace.is_bonus else "resampled",
                     "token": labels.get(trace.next_token, ""), "shown": trace.index == shown})
    return rows


@dataclass(frozen=True)
class VegaLiteFigure:
    """A Vega-Lite chart as its two parts: draw it with st.vega_lite_chart(figure.data, figure.spec)."""

    data: pd.DataFrame
    spec: dict


def timeline_chart(traces: list[RoundTrace], labels: dict[int, str], shown: int) -> VegaLiteFigure:
    """Every round so far as a column of cells (drafts, then the added token); the shown round outlined.

    Clicking a column selects its round (TIMELINE_PICK). Token labels appear only in the tooltip,
    which Vega renders as text, not HTML. The rounds are the data; the spec never changes with them,
    so a browser updates the drawn chart's data instead of building a new one each Step, and the
    server builds the spec with Altair once per process (building and validating it every Step was
    most of the server's drawing time for a Step: docs/LOG.md, "Serving a class: the load test").
    """
    return VegaLiteFigure(pd.DataFrame(timeline_rows(traces, labels, shown)), copy.deepcopy(_timeline_spec()))


@functools.cache
def _timeline_spec() -> dict:
    pick = alt.selection_point(name=TIMELINE_PICK, fields=["round"], on="click", clear=False)
    fates = list(TIMELINE_COLORS)
    chart = (
        alt.Chart()
        .mark_rect(cornerRadius=2, stroke=HIGHLIGHT_LINE)
        .encode(
            x=alt.X("round:O", title="round (click one to show it)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("slot:O", title=None, axis=None),
            color=alt.Color("fate:N", scale=alt.Scale(domain=fates, range=list(TIMELINE_COLORS.values())),
                            legend=alt.Legend(orient="top", title=None, direction="horizontal")),
            strokeWidth=alt.condition("datum.shown", alt.value(2.5), alt.value(0)),
            tooltip=[alt.Tooltip("round:O"), alt.Tooltip("slot:O", title="position"),
                     alt.Tooltip("token:N"), alt.Tooltip("fate:N")],
        )
        .add_params(pick)
        .properties(height={"step": 16})  # one 16-pixel row per drafted position
    )
    with alt.theme.enable("none"):  # Streamlit applies its own theme
        spec = chart.to_dict()
    for placeholder in ("data", "datasets"):  # Altair's, for a chart built without data
        del spec[placeholder]  # the rounds go beside the spec
    return spec
