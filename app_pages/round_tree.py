"""The round view's five stages for a tree round (Settings.tree): the tree as drafted, the verification
pass's attention mask, the sibling-by-sibling test at each position, and where the last token came from.

A chain round goes to app_pages/round_stages.py; `STAGE_VIEWS` here sends each round to its own. No
verdict shows before the Accept stage: the tree is drawn uncoloured until then.
"""

import streamlit as st

from app_pages import ui
from app_pages.round_stages import STAGE_VIEWS as CHAIN_VIEWS
from app_pages.round_stages import _figure, mark_click, side_by_side
from app_pages.student import code, md_escape
from specdec.core.tree_rule import TREE_RULES
from specdec.views import charts, tree_view
from specdec.views.stepper import Stepper

state = st.session_state


def _tree_chart(trace, labels, judged: bool, numbered: bool = False):
    title = (f"The round's tree: {len(trace.tree.tokens) - 1} drafted tokens"
             + (", kept / rejected / never tested" if judged else ""))
    shown = {**labels, **{token: labels.get(token, "?") for token in trace.tree.tokens}}
    return _figure(trace, f"tree-{judged}-{numbered}", 0,
                   lambda: charts.tree_chart(trace.tree, shown, title, judged, numbered))


def _stage_drafting(stepper: Stepper, trace, labels) -> None:
    tree = trace.tree
    words, picture = side_by_side()
    nodes, levels = len(tree.tokens) - 1, max(tree_view.depths(tree.parents))
    draw = ("the draft's likeliest tokens" if stepper.settings.sampling.greedy
            else "candidates drawn from q **without replacement** (distinct tokens)")
    words.markdown(
        f"The drafter proposes a **tree** of **{nodes}** tokens, **{levels}** deep. At each node that "
        f"branches, its children are {draw}; the first child is the likeliest guess. Every branch is a "
        "different guess at how the text goes on. Nothing has been checked yet."
    )
    words.markdown("The tree's shape was chosen from the acceptance measured at each depth and rank "
                   "and from what a target pass over that many tokens costs here.")
    ui.chart(_tree_chart(trace, labels, judged=False), key=f"_t1_{trace.index}", container=picture)


def _stage_verify(stepper: Stepper, trace, labels) -> None:
    tree = trace.tree
    words, picture = side_by_side()
    words.markdown(
        f"**One** target forward pass over all **{len(tree.tokens)}** tokens (the root and every node). "
        "Each node sees the context and **only its own ancestors**: the attention mask on the right, "
        "row = the node, filled column = a token it sees. So each branch is scored as if it were the "
        "only one, and the pass gives p after every node."
    )
    ui.chart(_tree_chart(trace, labels, judged=False, numbered=True), key=f"_t2t_{trace.index}",
             container=words)
    title = "Attention mask: row sees column"
    fig = _figure(trace, "mask", 0, lambda: charts.mask_chart(tree, labels, title))
    ui.chart(fig, key=f"_t2m_{trace.index}", container=picture)


def _position_name(tree, records, i: int, labels) -> str:
    node = records[i].node
    at = "the root" if node == 0 else f"node {node} {md_escape(labels.get(tree.tokens[node], '?'))}"
    return f"position {i + 1} · after {at}"


def _beat_words(step: tree_view.SiblingStep, labels, greedy: bool) -> str:
    x = code(labels.get(step.token, "?")) if step.token is not None else ""
    name = f"x{step.child + 1} {x}"
    if step.phase == tree_view.OUTCOME:
        if step.kept:
            return f"**Candidate {name} survives**: the path goes on below it."
        return (f"**Every candidate here was rejected**: the token {x} is drawn from the last residual "
                "(what p has left that no candidate covered), and the round ends.")
    p = dict(step.target_probs or []).get(step.token)
    q = dict(step.draft_probs or []).get(step.token)
    shown = ", ".join(f"{k}(x)={v:.3f}" for k, v in (("p", p), ("q", q)) if v is not None)
    shown = f"{shown}; " if shown else "(outside the likeliest tokens the trace keeps); "
    if step.phase == tree_view.PQ:
        if greedy:
            return f"Candidate {name}: {shown}kept if it is p's top token (temperature 0)."
        return (f"Candidate {name}: {shown}it is kept with probability min(1, p(x)/q(x)) = "
                f"**{step.keep_chance:.3f}**.")
    if step.phase == tree_view.COIN:
        verdict = "**kept**" if step.kept else "**rejected**"
        if step.uniform is None:
            return f"Candidate {name}: {'is' if step.kept else 'is not'} p's top token → {verdict}."
        sign = "<" if step.kept else "≥"
        return f"Candidate {name}: the coin u = {step.uniform:.3f} {sign} {step.keep_chance:.3f} → {verdict}."
    return (f"{name} rejected. The next candidate faces what is left: p becomes the residual "
            "**norm(max(0, p − q))**, and q loses x (**renormalised**), because x can no longer be drawn.")


def _stage_accept(stepper: Stepper, trace, labels) -> None:
    tree, greedy = trace.tree, stepper.settings.sampling.greedy
    records = tree_view.tested_positions(tree)
    words, picture = side_by_side()
    if greedy:
        words.markdown("**Greedy mode** (temperature 0): at each position the child that is the target's "
                       "top token is kept, if there is one; otherwise the round ends with that token.")
    else:
        rule = TREE_RULES[stepper.settings.tree_rule]
        words.markdown(f"From the root down, the children of each kept node are tested **in turn** "
                       f"(*{rule.title}*): {rule.test_words}. The first kept child continues the path; "
                       "the rest are never tested.")
    ui.chart(_tree_chart(trace, labels, judged=True), key=f"_t3t_{trace.index}", container=words)
    if not records:
        return
    key = f"_tpos_{trace.index}"
    state.setdefault(key, 0)
    with words:
        st.segmented_control("Position", options=list(range(len(records))), key=key, on_change=mark_click,
                             format_func=lambda i: _position_name(tree, records, i, labels),
                             label_visibility="collapsed" if ui.presenter() else "visible")
    at = state[key] or 0
    steps = tree_view.sibling_steps(records[at])
    beat_key = f"_tbeat_{trace.index}_{at}"
    state.setdefault(beat_key, 0)
    with words:
        st.select_slider("Step through the test", options=list(range(len(steps))), key=beat_key,
                         format_func=lambda i: tree_view.step_name(steps[i]), on_change=mark_click)
    beat = steps[state[beat_key] or 0]
    words.markdown(_beat_words(beat, labels, greedy))
    title = f"Position {at + 1}, {tree_view.step_name(beat)}"
    fig = _figure(trace, "beat", (at, state[beat_key]), lambda: charts.step_chart(beat, labels, title))
    ui.chart(fig, key=f"_t3b_{trace.index}", container=picture)


def _stage_correct(stepper: Stepper, trace, labels) -> None:
    tree = trace.tree
    words, picture = side_by_side()
    nxt = code(labels.get(trace.next_token, "?"))
    kept = len(tree.path)
    if tree.bonus:
        words.markdown(f"A candidate was kept at every position down to a leaf ({kept} in all): the "
                       "target's pass already holds p after that leaf, and the **bonus** token "
                       f"{nxt} is drawn from it.")
    else:
        words.markdown(f"{kept} position(s) kept a candidate; at the next one every candidate was rejected, "
                       f"and {nxt} was drawn from the **last residual**: the mass of p that no candidate "
                       "there had covered. The branches below are discarded.")
    records = tree_view.tested_positions(tree)
    if records and not tree.bonus:
        outcome = tree_view.sibling_steps(records[-1])[-1]
        title = f"Where {labels.get(trace.next_token, '?')} came from"
        fig = _figure(trace, "tree-correct", 0, lambda: charts.step_chart(outcome, labels, title))
        ui.chart(fig, key=f"_t4_{trace.index}", container=picture)


TREE_VIEWS = {1: _stage_drafting, 2: _stage_verify, 3: _stage_accept, 4: _stage_correct, 5: CHAIN_VIEWS[5]}


def _view(stage: int):
    def show(stepper: Stepper, trace, labels) -> None:
        (TREE_VIEWS if trace.tree is not None else CHAIN_VIEWS)[stage](stepper, trace, labels)

    return show


STAGE_VIEWS = {stage: _view(stage) for stage in CHAIN_VIEWS}  # each round to its own stages
