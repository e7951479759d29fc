"""The round view's five stages: what each stage of one round says and draws.

Each stage view takes the run's Stepper, the round's trace and its token labels; the page
(app_pages/rounds.py) picks the stage and calls STAGE_VIEWS[stage]. Widgets here mark their changes
as clicks (`mark_click`), so the round view's timer does not treat them as beats.
"""

import streamlit as st

from app_pages import ui
from app_pages.student import code, md_escape
from specdec.config import SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL
from specdec.core.acceptance import RULES
from specdec.core.records import DRAFTED_BY_LOOKUP
from specdec.views import charts, draft_length
from specdec.views.stepper import Stepper

STAGES = {1: "1 · Draft", 2: "2 · Verify", 3: "3 · Accept?", 4: "4 · Correct", 5: "5 · Output"}
state = st.session_state


def _drafted_under_confidence_rule(stepper: Stepper, trace) -> bool:
    """The round's drafts came from a model under adaptive length: Π matters (a copied round is sure; a
    tree's shape is fixed before it is drafted)."""
    return stepper.settings.adaptive and trace.drafted_by != DRAFTED_BY_LOOKUP and trace.tree is None


def draft_strip(stepper: Stepper, trace, stage: int) -> str:
    """The drafted tokens; from stage 3 marked kept / rejected / discarded; from 4 the new token."""
    if trace.tree is not None and stage < 3:  # its main line is the accepted path: the drawing shows all
        return (f'<div class="sd-line"><i>a tree of {len(trace.tree.tokens) - 1} drafted tokens, drawn '
                "below</i></div>")
    chips = []
    adaptive = _drafted_under_confidence_rule(stepper, trace)
    confidence = draft_length.running_confidence(trace) if adaptive else []
    for i, token in enumerate(trace.drafted_tokens):
        if stage == 1 and i >= state["revealed"]:
            break  # not drafted yet: stage 1 shows the drafter at work, one token per beat
        label = stepper.label(token)
        q, p = trace.draft_token_probs[i], trace.target_token_probs[i]
        if stage < 3:
            note = f"q={q:.2f}" if stage == 1 else f"q={q:.2f} p={p:.2f}"
            if stage == 1 and adaptive:
                note += f" Π={confidence[i]:.2f}"
            chips.append(ui.token_chip(label, "sd-draft", title=f"draft {i + 1}: {label}", note=note))
        elif i < trace.num_accepted:
            chips.append(ui.token_chip(label, style=ui.ORIGIN_STYLE["accepted"], note="✓",
                                       title=f"draft {i + 1} accepted"))
        elif i == trace.num_accepted:
            chips.append(ui.token_chip(label, "sd-reject", note="✗", title=f"draft {i + 1} rejected"))
        else:
            chips.append(ui.token_chip(label, "sd-struck", title=f"draft {i + 1}: discarded, never tested"))
    if stage >= 4:
        origin = "bonus" if trace.is_bonus else "resampled"
        chips.append(" → " + ui.token_chip(stepper.label(trace.next_token), style=ui.ORIGIN_STYLE[origin],
                                           note=origin, title=f"{origin} token"))
    if not chips:
        return '<div class="sd-line"><i>the drafter proposed nothing this round (no n-gram match)</i></div>'
    return f'<div class="sd-line">{"".join(chips)}</div>'


def side_by_side():
    """Where a stage's words and its chart go: in presenter mode two columns, so the whole stage fits a
    projector's screen; elsewhere one after the other."""
    return st.columns([1, 1], gap="medium") if ui.presenter() else (st.container(), st.container())


def mark_click() -> None:
    """A widget in the fragment changed: this rerun is a click, not a timer beat."""
    state["_clicked"] = True


def _position_picker(trace, labels, count: int, label: str, follow: int | None = None) -> int:
    """Pick one position of the round: buttons named by position and drafted token."""
    if count <= 1:
        return 0

    def name(i: int) -> str:
        token = labels[trace.drafted_tokens[i]] if i < trace.num_drafted else "bonus slot"
        return f"{i + 1} · {md_escape(token)}"

    key = f"_pos_{trace.index}_{count}"
    state.setdefault(key, 0)
    if state[key] is None or follow is not None:
        state[key] = follow or 0
    st.segmented_control(label, options=list(range(count)), format_func=name, key=key, on_change=mark_click,
                         label_visibility="collapsed" if ui.presenter() else "visible")  # a line saved
    return state[key] or 0


def _figure(trace, chart: str, position: int, build):
    """A round's chart, built the first time it is shown and reused on every later rerun."""
    key = (trace.index, chart, position)
    if key not in state["_figures"]:
        state["_figures"][key] = build()
    return state["_figures"][key]


def _stage_drafting(stepper: Stepper, trace, labels) -> None:
    words, picture = side_by_side()
    words.markdown(
        f"The drafter proposes **{trace.num_drafted}** token(s), one after another, each drawn from its "
        "distribution **q**. Nothing has been checked yet."
    )
    why = draft_length.why_drafting_stopped(trace, stepper.settings)
    words.markdown(f"**Why {trace.num_drafted}?** {why}")
    if _drafted_under_confidence_rule(stepper, trace):
        with words.expander("Π: how sure the draft is that its drafts survive"):
            st.markdown(
                "Π on each draft is the product of the draft's top probabilities so far: its estimate that "
                "every draft up to there survives.\n\n"
                f"Drafting stops before Π would fall below what the next draft costs: the threshold "
                f"{stepper.settings.draft_threshold:.2f}, plus what that draft adds to the target's pass "
                "on this machine (listed on *The idle machine*).\n\n"
                "The first draft's drafting step is already paid. So where a pass over two tokens costs "
                "what a pass over one does, the first draft is always made."
            )
    if trace.head_read is not None:
        with words:
            _what_the_head_read(stepper, trace)
    if trace.num_drafted == 0:
        return
    if trace.drafted_by == DRAFTED_BY_LOOKUP:
        words.caption("Copied by n-gram lookup: what followed the same few tokens earlier in the text. "
                      "q puts all its mass on the copied token.")
    revealing = state["revealed"] < trace.num_drafted
    follow = state["revealed"] - 1 if revealing else None  # the chart follows the newest draft
    with words:
        i = _position_picker(trace, labels, trace.num_drafted, "Drafted token", follow)
    drafted = trace.drafted_tokens[i]
    title = f"q at draft position {i + 1}: drafted {labels[drafted]}"
    fig = _figure(trace, "draft", i, lambda: charts.draft_chart(trace.positions[i], drafted, labels, title))
    ui.chart(fig, key=f"_c1_{trace.index}", container=picture)


def _what_the_head_read(stepper: Stepper, trace) -> None:
    read = trace.head_read
    token = md_escape(stepper.label(read.next_token))
    st.markdown(
        f"**What the feature head read.** The target's hidden state at token {read.position + 1} of the "
        "text (prompt included): the last token the target has verified, whose hidden state its last "
        f"pass computed anyway. Next to it, the embedding of **{token}**, the token the target chose "
        "after it. From these the head's decoder layers predict the "
        "target's next hidden state, and the target's own output head turns it into q for draft 1. "
        "Each later draft reads the head's own prediction instead of the target's."
    )
    if read.feature is not None:
        title = f"The target's hidden state at token {read.position + 1} ({len(read.feature)} numbers)"
        ui.chart(_figure(trace, "feature", 0, lambda: charts.feature_chart(read.feature, title)),
                 key=f"_c1f_{trace.index}")


def _stage_verify(stepper: Stepper, trace, labels) -> None:
    k = trace.num_drafted
    words, picture = side_by_side()
    words.markdown(
        f"**One** target forward pass over the context plus the {k} draft(s) gives the target's "
        f"distribution **p** at all **{k + 1}** positions (the last one is the bonus slot)."
    )
    rows = []
    for i, position in enumerate(trace.positions):
        top = position.token_ids[0]
        rows.append({
            "position": i + 1,
            "drafted x": md_escape(labels[trace.drafted_tokens[i]]) if i < k else "(bonus slot)",
            "q(x)": round(trace.draft_token_probs[i], 4) if i < k else None,
            "p(x)": round(trace.target_token_probs[i], 4) if i < k else None,
            "target's top token": md_escape(labels[top]),  # table cells read Markdown
            "p(top)": round(position.target_probs[0], 4),
        })
    # The chips above already carry q and p; on a projector the full table waits behind an expander.
    (words.expander("p and q at every position, with the target's top token") if ui.presenter()
     else words).table(rows)
    with words:
        i = _position_picker(trace, labels, k + 1, "Position")
    drafted = trace.drafted_tokens[i] if i < k else None
    title = f"p vs q at position {i + 1}" if i < k else f"p at position {k + 1} (bonus slot)"
    fig = _figure(trace, "verify", i, lambda: charts.distribution_chart(
        trace.positions[i], labels, title, highlight=drafted, show_residual=False))
    ui.chart(fig, key=f"_c2_{trace.index}", container=picture)


def _test_line(trace, labels, i: int, greedy: bool) -> str:
    """Draft i's test under the round's rule (greedy mode: the argmax test), in its own numbers."""
    x = labels[trace.drafted_tokens[i]]
    q, p, a = trace.draft_token_probs[i], trace.target_token_probs[i], trace.accept_probs[i]
    kept = i < trace.num_accepted
    verdict = "**accept**" if kept else "**reject**"
    rule = None if greedy else trace.rule
    if rule == TYPICAL:
        sign = ">" if kept else "≤"
        return f"{i + 1}. {code(x)}: p(x)={p:.3f} {sign} threshold {trace.thresholds[i]:.3f} → {verdict}"
    if rule == SAMPLE_COMPARE:
        y = labels.get(trace.target_draws[i], "?")
        sign = "=" if kept else "≠"
        return f"{i + 1}. {code(x)}: the target drew y = {code(y)} {sign} x (chance p(x)={p:.3f}) → {verdict}"
    if rule in (None, TOP_CHOICE):  # greedy, or the top-choice rule
        top = labels[trace.positions[i].token_ids[0]]
        relation = "matches" if kept else "differs from"
        return f"{i + 1}. {code(x)} {relation} the target's argmax {code(top)} → {verdict}"
    u = trace.uniforms[i]
    sign = "<" if kept else "≥"
    numbers = f"q={q:.3f}, p={p:.3f}, min(1, p/q)={a:.3f}; u={u:.3f} {sign} ratio"
    return f"{i + 1}. {code(x)}: {numbers} → {verdict}"


def _stage_accept(stepper: Stepper, trace, labels) -> None:
    if trace.num_drafted == 0:
        st.markdown("Nothing was drafted, so there is nothing to test: the target's pass gives one token.")
        return
    words, picture = side_by_side()
    if stepper.settings.sampling.greedy:
        words.markdown(
            "**Greedy mode** (temperature 0): no coin flips. A draft is kept if it equals the target's "
            "most likely token (argmax of p); the first mismatch ends the round."
        )
    else:
        words.markdown(RULES[trace.rule].test_words)
    fig = _figure(trace, "accept", 0, lambda: charts.acceptance_chart(trace, labels))
    ui.chart(fig, key=f"_c3_{trace.index}", container=picture)
    greedy = stepper.settings.sampling.greedy
    words.markdown("\n".join(_test_line(trace, labels, i, greedy) for i in range(trace.num_tested)))


def _stage_correct(stepper: Stepper, trace, labels) -> None:
    words, picture = side_by_side()
    with words:
        fig = _correction_words(stepper, trace, labels)
    ui.chart(fig, key=f"_c4_{trace.index}", container=picture)
    k, j, nxt = trace.num_drafted, trace.num_accepted, labels[trace.next_token]
    shown = trace.positions[k if trace.is_bonus else j].token_ids
    if trace.next_token not in shown:
        words.caption(f"{code(nxt)} is outside the most likely tokens the trace keeps: it has no bar here.")


def _correction_words(stepper: Stepper, trace, labels):
    """Stage 4's words (bonus or replacement), and the figure they describe."""
    greedy = stepper.settings.sampling.greedy
    k, j = trace.num_drafted, trace.num_accepted
    nxt = labels[trace.next_token]
    if trace.is_bonus:
        how = " (its argmax)." if greedy else (
            " cut to its typical tokens (p ≥ the bar), as Medusa samples." if trace.rule == TYPICAL else ".")
        if k == 0:
            st.markdown(
                f"Nothing was drafted: the target's pass gives p for the next position, and "
                f"{code(nxt)} is drawn from it{how} (Plain decoding, one token per pass.)"
            )
        else:
            st.markdown(
                f"All {k} draft(s) were accepted, so the target's pass already holds p for the next "
                f"position: the **bonus** token {code(nxt)} is drawn from it{how}"
            )
        title = f"p at position {k + 1}: bonus token {nxt}"
        fig = _figure(trace, "correct", k, lambda: charts.distribution_chart(
            trace.positions[k], labels, title, highlight=trace.next_token))
    else:
        rejected = labels[trace.drafted_tokens[j]]
        rule = RULES[trace.rule]
        name = rule.replacement_name
        how = (f"the target's argmax {code(nxt)} replaces it" if greedy
               else rule.replaced_by.format(nxt=code(nxt)))
        st.markdown(f"Draft {j + 1} {code(rejected)} was rejected: {how}. Drafts after it are discarded.")
        drawn_from = "the residual" if greedy or trace.rule == SPECULATIVE else name
        title = f"position {j + 1}: p, q and {drawn_from}; drawn: {nxt}"
        fig = _figure(trace, "correct", j, lambda: charts.distribution_chart(
            trace.positions[j], labels, title, highlight=trace.next_token, residual_name=name))
    return fig


def _stage_output(stepper: Stepper, trace, labels) -> None:
    st.markdown(
        f"This round emitted **{len(trace.emitted_tokens)}** token(s) for **one** target pass "
        f"({trace.num_accepted} accepted draft(s) + 1 {'bonus' if trace.is_bonus else 'resampled'} token). "
        "They join the output above (outlined)."
    )


STAGE_VIEWS = {1: _stage_drafting, 2: _stage_verify, 3: _stage_accept, 4: _stage_correct, 5: _stage_output}
