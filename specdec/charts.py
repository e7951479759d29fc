"""Pure chart builders: a round trace (or one position of it) -> a Plotly figure. No Streamlit here.

Notation as in the paper: q is the draft's distribution, p the target's, both after the same warp.
Token labels come in as a {token id: label} mapping; they are untrusted text, and Plotly reads a
few HTML tags in labels, so every label is escaped here.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from specdec.rounds import RoundTrace, ShownDistribution

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


def distribution_chart(
    position: ShownDistribution,
    labels: dict[int, str],
    title: str,
    highlight: int | None = None,
    show_residual: bool = True,
) -> go.Figure:
    """p next to q (and the residual norm(max(0, p - q)) where there is one), one group per token."""
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
                    name="residual norm(max(0, p−q))",
                    marker={"color": RESIDUAL_COLOR, "line": _outline(ids, highlight)},
                    hovertemplate="%{x}: residual=%{y:.3f}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability")
    return _layout(_narrow(fig, len(ids)), title)


def acceptance_chart(trace: RoundTrace, labels: dict[int, str]) -> go.Figure:
    """One 0–1 line per drafted token: the accept zone [0, min(1, p/q)] and the uniform draw u.

    u below the ratio = accept. Positions after the first rejection were never tested (grey).
    In greedy mode there is no coin: the zone is all (argmax match) or nothing, and no u is drawn.
    """
    k = trace.gamma
    rows = [f"{i + 1}. {name}" for i, name in enumerate(_names(trace.drafted_tokens, labels))]
    fig = go.Figure()
    greedy = trace.uniforms is None
    rule = "1 if x = argmax p, else 0" if greedy else "min(1, p/q)"
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
    title = "greedy rule: accept while the draft equals the target's argmax" if trace.uniforms is None else (
        "accept if u < min(1, p/q)"
    )  # fmt: skip
    return _layout(fig, title, height=90 + 42 * max(k, 1))
