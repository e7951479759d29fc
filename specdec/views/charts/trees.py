"""Token trees: a round's tree coloured by verdict, the verification pass's attention mask, one beat of
the sibling-by-sibling test, and the multi-candidate rules' acceptance on the rule trial.

Each takes a trace's tree (core.records.TreeRecord) or plain rows; specdec.views.tree_view says what
each node is and where it sits.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from specdec.views.charts.rule_trial import RULE_COLORS
from specdec.views.charts.style import (
    ACCEPT_COLOR,
    INK,
    MAX_BARS,
    MUTED_COLOR,
    P_COLOR,
    Q_COLOR,
    REJECT_COLOR,
    RESIDUAL_COLOR,
    THEORY_COLOR,
    narrow,
    outline,
    styled,
    token_names,
)
from specdec.views.tree_view import (
    AFTER,
    COIN,
    KEPT,
    OUTCOME,
    REJECTED,
    ROOT,
    UNTESTED,
    SiblingStep,
    attention_mask,
    layout,
    node_status,
)

if TYPE_CHECKING:  # a trace's tree, read by its fields
    from specdec.core.records import TopTokens, TreeRecord

NODE_COLORS = {ROOT: INK, KEPT: ACCEPT_COLOR, REJECTED: REJECT_COLOR, UNTESTED: MUTED_COLOR}
DRAFTED = "drafted"  # every node before the Accept stage: nothing judged yet
NODE_TEXT = 20  # px: a node's token, readable on a projector as drawn


def tree_chart(tree: TreeRecord, labels: dict[int, str], title: str, judged: bool,
               numbered: bool = False) -> go.Figure:
    """The round's tree left to right, the root first: each node its token (after its node number,
    `numbered`, as the attention mask names it). `judged`: coloured kept, rejected and never tested
    (from the Accept stage on); before that every node is simply drafted."""
    places = layout(tree.parents)
    status = node_status(tree) if judged else [ROOT] + [DRAFTED] * (len(tree.tokens) - 1)
    names = token_names(list(tree.tokens), labels)
    if numbered:
        names = [f"{node} {name}" for node, name in enumerate(names)]
    fig = go.Figure()
    edge_x, edge_y = [], []
    for node in range(1, len(tree.tokens)):
        (x0, y0), (x1, y1) = places[tree.parents[node]], places[node]
        edge_x += [x0, x1, None]
        edge_y += [y0, y1, None]
    fig.add_scatter(x=edge_x, y=edge_y, mode="lines", line={"color": "#9e9e9e", "width": 2},
                    hoverinfo="skip", showlegend=False)
    order = [ROOT, KEPT, REJECTED, UNTESTED, DRAFTED]
    for kind in order:
        nodes = [node for node, s in enumerate(status) if s == kind]
        if not nodes:
            continue
        color = Q_COLOR if kind == DRAFTED else NODE_COLORS[kind]
        fig.add_scatter(
            x=[places[n][0] for n in nodes], y=[places[n][1] for n in nodes], mode="markers+text",
            name="root (last token)" if kind == ROOT else kind,
            marker={"size": 18, "color": color, "symbol": "x" if kind == REJECTED else "circle",
                    "line": {"color": "white", "width": 1}},
            text=[names[n] for n in nodes], textposition="middle right",
            textfont={"size": NODE_TEXT, "color": color if kind != UNTESTED else "#616161"},
            customdata=[n for n in nodes], hovertemplate="node %{customdata}: %{text}<extra></extra>",
        )
    depth = max(x for x, _ in places)
    rows = max(y for _, y in places)
    fig.update_xaxes(visible=False, range=[-0.3, depth + 0.9])
    fig.update_yaxes(visible=False, autorange=False, range=[rows + 0.6, -0.6])  # the first child on top
    return styled(fig, title, height=max(220, 90 + 46 * (rows + 1)))


def mask_chart(tree: TreeRecord, labels: dict[int, str], title: str) -> go.Figure:
    """The verification pass's attention mask over the tree: row i, column j filled where node i sees
    node j (itself and its ancestors; every node also sees the context before the root)."""
    mask = attention_mask(tree.parents)
    names = [f"{node} {name}" for node, name in enumerate(token_names(list(tree.tokens), labels, width=8))]
    fig = go.Figure(go.Heatmap(
        z=[[1 if seen else 0 for seen in row] for row in mask], x=names, y=names, zmin=0, zmax=1,
        colorscale=[[0, "#f5f5f5"], [1, P_COLOR]], showscale=False, xgap=2, ygap=2,
        hovertemplate="%{y} sees %{x}: %{z}<extra></extra>",
    ))
    fig.update_xaxes(side="top", tickangle=-45, title_text="attends to (key)")
    fig.update_yaxes(autorange="reversed", title_text="node (query)")
    side = 120 + 30 * len(names)
    return styled(fig, title, height=min(720, max(300, side)))


def _bars(fig: go.Figure, probs: TopTokens | None, ids: list[int], names: list[str], name: str, color: str,
          highlight: int | None) -> None:
    if probs is None:
        return
    values = dict(probs)
    fig.add_bar(x=names, y=[values.get(token, 0.0) for token in ids], name=name,
                marker={"color": color, "line": outline(ids, highlight)},
                hovertemplate="%{x}: %{y:.3f}<extra></extra>")


def step_chart(step: SiblingStep, labels: dict[int, str], title: str) -> go.Figure:
    """One beat of the test at a node: p_i beside q_i with the candidate outlined; at the coin, the keep
    chance and u as lines; after a rejection, the residual and q without the rejected candidate; at the
    outcome, the distribution the node's token came from."""
    ids: list[int] = []
    for probs in (step.target_probs, step.draft_probs):
        for token, _ in (probs or [])[:MAX_BARS]:
            if token not in ids:
                ids.append(token)
    known = {token for probs in (step.target_probs, step.draft_probs) for token, _ in probs or []}
    ids = ids[:MAX_BARS]
    if step.token in known and step.token not in ids:  # the candidate's bars always shown, where known
        ids[-1:] = [step.token]
    names = token_names(ids, labels)
    fig = go.Figure()
    after = step.phase == AFTER
    p_name = "residual p (after the rejection)" if after else "p"
    if step.phase == OUTCOME:
        p_name = "p (the kept node's)" if step.kept else "last residual (drawn from)"
    from_residual = after or (step.phase == OUTCOME and not step.kept)
    p_color = RESIDUAL_COLOR if from_residual else P_COLOR
    _bars(fig, step.target_probs, ids, names, p_name, p_color, step.token)
    q_name = "q without the rejected x" if after else "q"
    _bars(fig, step.draft_probs, ids, names, q_name, Q_COLOR, step.token)
    if step.phase == COIN and step.keep_chance is not None:
        fig.add_hline(y=step.keep_chance, line_color=ACCEPT_COLOR, line_width=3,
                      annotation_text=f"keep chance {step.keep_chance:.2f}", annotation_position="top left")
        if step.uniform is not None:
            fig.add_hline(y=step.uniform, line_color=INK, line_dash="dash", line_width=3,
                          annotation_text=f"u = {step.uniform:.2f}", annotation_position="bottom right")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability", range=[0, 1.05])
    return styled(narrow(fig, len(ids)), title, height=340)


def tree_acceptance_chart(rows: list[dict], single: float, title: str) -> go.Figure:
    """The multi-candidate rules' exact acceptance, stacked by the rank of the candidate kept (`rows`:
    rule, title, kept_at_exact), beside one draft's Σ min(p, q) as a line."""
    fig = go.Figure()
    names = [html.escape(row["title"]) for row in rows]
    ranks = max(len(row["kept_at_exact"]) for row in rows) if rows else 0
    shades = [0.95, 0.7, 0.5, 0.35, 0.25]
    for rank in range(ranks):
        fig.add_bar(x=names, y=[row["kept_at_exact"][rank] if rank < len(row["kept_at_exact"]) else 0
                                for row in rows],
                    name=f"candidate {rank + 1} kept",
                    marker={"color": [RULE_COLORS.get(row["rule"], THEORY_COLOR) for row in rows],
                            "opacity": shades[rank % len(shades)], "line": {"color": "white", "width": 1}},
                    hovertemplate=f"candidate {rank + 1} kept: %{{y:.3f}}<extra></extra>")
    # One draft's acceptance as a dashed line across the bars, named in the legend (a note on the plot
    # would sit over the bars).
    fig.add_scatter(x=names, y=[single] * len(names), mode="lines", hoverinfo="skip",
                    line={"color": INK, "dash": "dash", "width": 2},
                    name=f"one draft: Σ min(p, q) = {single:.2f}")  # fmt: skip
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title_text="P(a candidate is kept)", range=[0, 1.08])
    return styled(fig, title, height=380)
