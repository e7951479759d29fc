"""Pure chart builders: records in, figures out (Plotly, and Altair for the clickable timeline).
No Streamlit here.

Notation as in the paper: q is the draft's distribution, p the target's, both after the same warp.
Token labels come in as a {token id: label} mapping; they are untrusted text, and Plotly reads a
few HTML tags in labels, so every label is escaped here.
"""

from __future__ import annotations

import copy
import functools
import html
import math
from dataclasses import dataclass

import altair as alt
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec.core.metrics import SpeedupTheory, expected_speedup
from specdec.core.records import RoundTrace, ShownDistribution

P_COLOR, Q_COLOR, RESIDUAL_COLOR = "#1e88e5", "#8e24aa", "#ef6c00"
ACCEPT_COLOR, REJECT_COLOR, BONUS_COLOR, MUTED_COLOR = "#2e7d32", "#c62828", "#1565c0", "#bdbdbd"
HIGHLIGHT_LINE = "#212121"
MAX_BARS = 8


def _names(token_ids: list[int], labels: dict[int, str]) -> list[str]:
    """Escaped, unique category names (two tokens can look alike, e.g. two unknown bytes)."""
    names, seen = [], set()
    for token_id in token_ids:
        name = html.escape(labels.get(token_id, f"<id {token_id}>"))
        if name in seen:
            name = f"{name} #{token_id}"
        seen.add(name)
        names.append(name)
    return names


def _narrow(fig: go.Figure, categories: int) -> go.Figure:
    """Keep bars a readable width when only a few tokens are shown (one bar would fill the plot)."""
    fig.update_xaxes(range=[-0.5, max(categories, 6) - 0.5])
    return fig


def _layout(fig: go.Figure, title: str, height: int = 260) -> go.Figure:
    fig.update_layout(
        title={"text": html.escape(title), "font": {"size": 14}},
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        bargap=0.25,
        plot_bgcolor="white",
    )
    fig.update_yaxes(gridcolor="#eeeeee", rangemode="tozero")
    fig.update_xaxes(tickfont={"size": 13})  # token labels such as "," must stay readable
    return fig


def _outline(token_ids: list[int], highlight: int | None) -> dict:
    """A thick dark outline around the highlighted token's bars."""
    return {
        "color": HIGHLIGHT_LINE,
        "width": [3 if token_id == highlight else 0 for token_id in token_ids],
    }


def draft_chart(position: ShownDistribution, drafted: int, labels: dict[int, str], title: str) -> go.Figure:
    """q's most likely tokens at one position, the drafted token in colour (stage 1)."""
    assert position.draft_probs is not None, "no draft distribution at the bonus position"
    order = sorted(range(len(position.token_ids)), key=lambda i: -position.draft_probs[i])
    order = [i for i in order if position.draft_probs[i] > 0 or position.token_ids[i] == drafted]
    order = order[:MAX_BARS]
    ids = [position.token_ids[i] for i in order]
    q = [position.draft_probs[i] for i in order]
    colors = [Q_COLOR if token_id == drafted else MUTED_COLOR for token_id in ids]
    fig = go.Figure(go.Bar(x=_names(ids, labels), y=q, marker_color=colors, name="q (draft)",
                           hovertemplate="%{x}: q=%{y:.3f}<extra></extra>"))  # fmt: skip
    fig.update_yaxes(title_text="q", range=[0, 1.05])
    return _layout(_narrow(fig, len(ids)), title)


def feature_chart(feature: list[float], title: str, columns: int = 32) -> go.Figure:
    """A hidden state as a heat strip: its numbers in rows of `columns`, blue below zero, red above."""
    rows = [feature[i : i + columns] for i in range(0, len(feature), columns)]
    rows[-1] = rows[-1] + [None] * (columns - len(rows[-1]))
    limit = max(abs(v) for v in feature) or 1.0
    fig = go.Figure(go.Heatmap(
        z=rows, zmin=-limit, zmax=limit, colorscale="RdBu_r", showscale=True,
        customdata=[[r * columns + c for c in range(columns)] for r in range(len(rows))],
        hovertemplate="dimension %{customdata}: %{z:.3f}<extra></extra>",
    ))  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    return _layout(fig, title, height=90 + 12 * len(rows))


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
    names = _names(ids, labels)
    fig = go.Figure()
    fig.add_bar(x=names, y=[position.target_probs[i] for i in index], name="p (target)",
                marker={"color": P_COLOR, "line": _outline(ids, highlight)},
                hovertemplate="%{x}: p=%{y:.3f}<extra></extra>")  # fmt: skip
    if position.draft_probs is not None:
        fig.add_bar(x=names, y=[position.draft_probs[i] for i in index], name="q (draft)",
                    marker={"color": Q_COLOR, "line": _outline(ids, highlight)},
                    hovertemplate="%{x}: q=%{y:.3f}<extra></extra>")  # fmt: skip
    if show_residual and position.residual_probs is not None:
        fig.add_bar(x=names, y=[position.residual_probs[i] for i in index],
                    name=residual_name,
                    marker={"color": RESIDUAL_COLOR, "line": _outline(ids, highlight)},
                    hovertemplate="%{x}: residual=%{y:.3f}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability")
    return _layout(_narrow(fig, len(ids)), title)


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
    rows = [f"{i + 1}. {name}" for i, name in enumerate(_names(trace.drafted_tokens, labels))]
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
                    showlegend=False, hovertemplate=hover)  # fmt: skip
        fig.add_bar(y=[rows[i]], x=[1 - ratio], base=[ratio], orientation="h", marker_color=reject_color,
                    opacity=0.12, showlegend=False, hoverinfo="skip")  # fmt: skip
    fig.add_scatter(y=rows, x=trace.accept_probs[:k], mode="markers", name=rule,
                    marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": HIGHLIGHT_LINE}},
                    hovertemplate="ratio %{x:.3f}<extra></extra>")  # fmt: skip
    if trace.uniforms is not None:
        tested_rows = rows[: trace.num_tested]
        u = trace.uniforms[: trace.num_tested]
        colors = [ACCEPT_COLOR if i < trace.num_accepted else REJECT_COLOR for i in range(len(u))]
        fig.add_scatter(y=tested_rows, x=u, mode="markers+text", name="u ~ Uniform(0, 1)",
                        marker={"symbol": "diamond", "size": 14, "color": colors,
                                "line": {"width": 1, "color": "white"}},
                        text=[f"u={value:.2f}" for value in u], textposition="top center",
                        hovertemplate="u = %{x:.3f}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(range=[0, 1.0], tickvals=[0, 0.25, 0.5, 0.75, 1], gridcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", type="category")
    if trace.target_draws is not None:
        tested = range(trace.num_tested)
        fig.add_scatter(y=[rows[i] for i in tested], x=[trace.accept_probs[i] for i in tested],
                        mode="text", text=[f"y = {html.escape(labels.get(trace.target_draws[i], '?'))}"
                                           for i in tested],  # fmt: skip
                        textposition="middle right", showlegend=False, hoverinfo="skip")
    title = zone[1] if zone else "accept if u < min(1, p/q)"
    return _layout(fig, title, height=90 + 42 * max(k, 1))


def threshold_chart(trace: RoundTrace, labels: dict[int, str]) -> go.Figure:
    """Typical acceptance: per drafted token, p(x) against the bar min(ε, δ·exp(−H(p))); kept if above."""
    k = trace.num_drafted
    rows = [f"{i + 1}. {name}" for i, name in enumerate(_names(trace.drafted_tokens, labels))]
    colors = [MUTED_COLOR if i >= trace.num_tested else ACCEPT_COLOR if i < trace.num_accepted
              else REJECT_COLOR for i in range(k)]  # fmt: skip
    fig = go.Figure()
    fig.add_bar(y=rows, x=trace.target_token_probs[:k], orientation="h", marker_color=colors, opacity=0.5,
                name="p(x)", hovertemplate="p(x) = %{x:.3f}<extra></extra>")
    fig.add_scatter(y=rows, x=trace.thresholds[:k], mode="markers", name="threshold",
                    marker={"symbol": "line-ns", "size": 22, "line": {"width": 3, "color": HIGHLIGHT_LINE}},
                    hovertemplate="threshold %{x:.3f}<extra></extra>")  # fmt: skip
    fig.update_xaxes(range=[0, 1.0], title_text="probability", gridcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", type="category")
    return _layout(fig, ZONES["typical"][1], height=110 + 42 * max(k, 1))


# -- instructor pages: measured results -> figures --------------------------------------------

SPEC_COLOR, PLAIN_COLOR, THEORY_COLOR = "#2e7d32", "#757575", "#1e88e5"


LANE_COLORS = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


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
    return _layout(fig, "Tokens over time (slope = tokens/s)")


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
    return _layout(fig, "Cumulative speed-up")


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
    return _layout(fig, "Acceptance per round")


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
    return _layout(fig, "Accepted length per round")


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
        name=f"this machine: / (k̄c + v), v = {v:.2f}",
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
    title = f"Speed-up vs α at k̄ = {theory.mean_drafted:.1f} drafts per round, c = {c:.3f}"
    return _layout(fig, title, height=340)


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
    return _layout(fig, "γ sweep" + (f": best γ = {best['gamma']}" if best else ""), height=300)


def category_chart(rows: list[dict], key: str, title: str, axis: str) -> go.Figure:
    """One box per category with every prompt as a point: the spread, not just the average."""
    fig = go.Figure()
    for category in dict.fromkeys(r["category"] for r in rows):
        values = [r[key] for r in rows if r["category"] == category]
        fig.add_box(
            y=values,
            name=html.escape(str(category)),
            boxpoints="all",
            jitter=0.4,
            pointpos=0,
            hovertemplate="%{y:.2f}<extra></extra>",
        )
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title_text=axis, rangemode="tozero")
    return _layout(fig, title, height=300)


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
    fig = _layout(fig, "Toy distributions: the output equals p", height=360)
    fig.update_layout(
        legend={"orientation": "h", "y": -0.15, "x": 0, "xanchor": "left", "yanchor": "top"}, margin={"b": 60}
    )  # below the plot: four entries do not fit beside the title
    return fig


def empirical_chart(
    labels: list[str], speculative: list[float], target: list[float], title: str
) -> go.Figure:
    """Two empirical distributions over the same outcomes, side by side."""
    names = _names(list(range(len(labels))), dict(enumerate(labels)))
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=speculative,
        name="speculative",
        marker_color=SPEC_COLOR,
        hovertemplate="%{x}: %{y:.3f}<extra>speculative</extra>",
    )
    fig.add_bar(
        x=names,
        y=target,
        name="target only",
        marker_color=PLAIN_COLOR,
        hovertemplate="%{x}: %{y:.3f}<extra>target only</extra>",
    )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="frequency")
    return _layout(fig, title, height=320)


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
    return _layout(fig, f"Target forward pass cost on {device}", height=340)


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
    return _layout(fig, "Where a round's time goes", height=220)


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
    return _layout(fig, "Drafters on the same prompt and settings", height=300)


# -- the run's timeline (Altair: a small declarative chart with a click selection) -------------

TIMELINE_COLORS = {"accepted": ACCEPT_COLOR, "rejected": REJECT_COLOR, "not tested": "#e0e0e0",
                   "resampled": RESIDUAL_COLOR, "bonus": BONUS_COLOR}  # fmt: skip
TIMELINE_PICK = "pick"  # the selection's name: a click on a round selects {"round": n}


def timeline_rows(traces: list[RoundTrace], labels: dict[int, str], shown: int = -1) -> list[dict]:
    """One cell per drafted token and one for the token each round adds, with its fate; `shown`
    (a round index) marks the cells of the round on screen."""
    rows = []
    for trace in traces:
        for i, token in enumerate(trace.drafted_tokens):
            fate = "accepted" if i < trace.num_accepted else "rejected" if i < trace.num_tested else (
                "not tested"
            )  # fmt: skip
            rows.append({"round": trace.index + 1, "slot": i + 1, "fate": fate,
                         "token": labels.get(token, ""), "shown": trace.index == shown})  # fmt: skip
        rows.append({"round": trace.index + 1, "slot": trace.num_drafted + 1,
                     "fate": "bonus" if trace.is_bonus else "resampled",
                     "token": labels.get(trace.next_token, ""), "shown": trace.index == shown})  # fmt: skip
        if trace.kept_sibling is not None and len(trace.emitted_tokens) > trace.num_accepted + 1:
            # The resampled token was the draft's kept second choice: the token after it came free.
            rows.append({"round": trace.index + 1, "slot": trace.num_drafted + 2, "fate": "bonus",
                         "token": labels.get(trace.emitted_tokens[-1], ""), "shown": trace.index == shown})
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
    server builds the spec with Altair once per process (building and validating it every Step took
    ~18 ms, most of the server's drawing time for a Step).
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
    )  # fmt: skip
    with alt.theme.enable("none"):  # Streamlit applies its own theme
        spec = chart.to_dict()
    for placeholder in ("data", "datasets"):  # Altair's, for a chart built without data
        del spec[placeholder]  # the rounds go beside the spec
    return spec


def calibration_chart(calibration: list[dict], count_guesses: list[dict]) -> go.Figure:
    """A student's guesses against the truth: for ticked drafts, the share said "kept" per bin of the
    true survival probability; for counts, the number said against the expected number. The
    diagonal is perfect calibration."""
    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", name="calibrated",
                    line={"dash": "dot", "color": MUTED_COLOR}, hoverinfo="skip")  # fmt: skip
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
    return _layout(fig, "Calibration: your guesses against the true chances", height=300)


# -- the rule on trial -------------------------------------------------------------------------

RULE_COLORS = {"speculative": "#2e7d32", "top-choice": "#c62828", "sample-compare": "#1e88e5",
               "typical": "#ef6c00"}  # fmt: skip


def rule_trial_chart(rows: list[dict], noise_floor: float) -> go.Figure:
    """Acceptance against distance from the target, one point per rule (`rows`: rule, title,
    lossless, alpha, tv), with the noise floor (two target-only halves) as a band: a lossless rule
    sits on it, a lossy one to its right."""
    fig = go.Figure()
    fig.add_vrect(x0=0, x1=noise_floor, fillcolor="#9e9e9e", opacity=0.18, line_width=0,
                  annotation_text="noise floor", annotation_position="top left")  # fmt: skip
    label_at = ["top center", "bottom center", "middle right", "middle left"]  # apart where points meet
    for number, row in enumerate(rows):
        kind = "lossless" if row["lossless"] else "lossy"
        fig.add_scatter(x=[row["tv"]], y=[row["alpha"]], mode="markers+text",
                        name=f"{row['title']} ({kind})",
                        marker={"size": 16, "color": RULE_COLORS.get(row["rule"], THEORY_COLOR),
                                "symbol": "circle" if row["lossless"] else "x"},
                        text=[html.escape(row["title"])], textposition=label_at[number % len(label_at)],
                        hovertemplate="TV %{x:.3f}, acceptance %{y:.2f}<extra></extra>")  # fmt: skip
    top = max([noise_floor, *(r["tv"] for r in rows)]) * 1.25 + 0.02
    fig.update_xaxes(range=[0, top], title_text="TV distance from the target's first tokens")
    fig.update_yaxes(range=[0, 1.08], title_text="acceptance α (drafts kept / tested)")
    fig.update_layout(showlegend=False)
    return _layout(fig, "Acceptance against distance: the lossless rules sit on the noise floor", height=380)


def temperature_sweep_chart(rows: list[dict]) -> go.Figure:
    """The exact rule per prompt set over temperature (`rows`: temperature, category, alpha,
    expected_alpha, speedup): acceptance measured (solid) and expected from Σ min(p, q) (dotted),
    and the speed-up on a second axis."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("acceptance α", "speed-up over the target alone"))
    for number, category in enumerate(dict.fromkeys(r["category"] for r in rows)):
        mine = sorted((r for r in rows if r["category"] == category), key=lambda r: r["temperature"])
        color = LANE_COLORS[(number + 1) % len(LANE_COLORS)]
        x = [r["temperature"] for r in mine]
        fig.add_scatter(x=x, y=[r["alpha"] for r in mine], mode="lines+markers", row=1, col=1,
                        name=f"{category}: measured", line={"color": color})  # fmt: skip
        fig.add_scatter(x=x, y=[r["expected_alpha"] for r in mine], mode="lines", row=1, col=1,
                        line={"color": color, "dash": "dot"}, name=f"{category}: Σ min(p, q)")  # fmt: skip
        fig.add_scatter(x=x, y=[r["speedup"] for r in mine], mode="lines+markers", row=1, col=2,
                        line={"color": color}, marker={"symbol": "diamond"},
                        name=f"{category}: speed-up")  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dash", line_color=PLAIN_COLOR, row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="temperature (0 = greedy)")
    fig = _layout(fig, "The exact rule at every temperature", height=440)
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": -0.22, "xanchor": "left", "yanchor": "top"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})  # fmt: skip
    return fig


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
             else "Throughput: speculation still pays at every B measured")  # fmt: skip
    fig = _layout(fig, title, height=400)
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": -0.25, "xanchor": "left", "yanchor": "top"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})  # fmt: skip
    return fig


def batch_cost_chart(curve: list[dict]) -> go.Figure:
    """One target pass's cost against the tokens in it, B × (tokens per row) (`curve`: rows,
    tokens_per_row, tokens, seconds): left, ms per pass beside 'if flat' and 'if ∝ tokens'; right, ms
    per token in the pass, which falls while the pass is memory-bound and levels off once compute-bound."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("ms per target pass", "ms per token in the pass"))
    for number, per_row in enumerate(sorted({r["tokens_per_row"] for r in curve})):
        mine = sorted((r for r in curve if r["tokens_per_row"] == per_row), key=lambda r: r["tokens"])
        name = "1 token per row (plain step)" if per_row == 1 else \
            f"{per_row} per row (verify, k = {per_row - 1})"
        color = PLAIN_COLOR if per_row == 1 else LANE_COLORS[number % len(LANE_COLORS)]
        custom = [r["rows"] for r in mine]
        per_pass, per_token = (lambda r: r["seconds"] * 1000), (lambda r: r["seconds"] * 1000 / r["tokens"])
        for col, scale in ((1, per_pass), (2, per_token)):
            fig.add_scatter(x=[r["tokens"] for r in mine], y=[scale(r) for r in mine], mode="lines+markers",
                            name=name, line={"color": color}, customdata=custom, showlegend=col == 1,
                            hovertemplate="B=%{customdata}, %{x} tokens: %{y:.2f} ms<extra></extra>",
                            row=1, col=col)  # fmt: skip
    if curve:
        first = min(curve, key=lambda r: r["tokens"])
        tokens = sorted({r["tokens"] for r in curve})
        fig.add_scatter(x=tokens, y=[first["seconds"] * 1000] * len(tokens), mode="lines", row=1, col=1,
                        name="if flat (memory-bound)", line={"dash": "dash", "color": ACCEPT_COLOR})
        fig.add_scatter(x=tokens, y=[first["seconds"] * 1000 * n / first["tokens"] for n in tokens],
                        mode="lines", row=1, col=1, name="if ∝ tokens (compute-bound)",
                        line={"dash": "dot", "color": MUTED_COLOR})  # fmt: skip
        ticks = [2**i for i in range(max(tokens).bit_length()) if 2**i <= max(tokens)]  # labels apart
        for col in (1, 2):
            _log2_axis(fig, ticks, "tokens in the pass (B × tokens per row)", row=1, col=col)
        # The '∝ tokens' line climbs far above the measured passes: keep the axis on the measurements.
        fig.update_yaxes(range=[0, 1.3 * max(r["seconds"] for r in curve) * 1000], row=1, col=1)
    fig = _layout(fig, "What one target pass costs as rows are added", height=400)
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": -0.25, "xanchor": "left", "yanchor": "top"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})  # fmt: skip
    return fig


def batch_ratio_chart(rows: list[dict]) -> go.Figure:
    """Speculative over target-only tokens/s per batch size: measured, and expected from the measured
    acceptance and the cost curve (`rows`: batch_size, ratio, expected_ratio); 1 = break-even."""
    labels = [f"B={r['batch_size']}" for r in rows]
    fig = go.Figure()
    fig.add_bar(x=labels, y=[r["ratio"] for r in rows], name="measured", marker_color=SPEC_COLOR,
                texttemplate="%{y:.2f}x", textposition="outside")
    fig.add_bar(x=labels, y=[r["expected_ratio"] for r in rows], name="expected from α and the cost curve",
                marker_color=THEORY_COLOR, texttemplate="%{y:.2f}x", textposition="outside")  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dash", line_color=REJECT_COLOR)
    fig.update_yaxes(title_text="speculative ÷ target only")
    return _layout(fig, "The ratio, measured and expected", height=340)
