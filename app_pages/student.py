"""Student mode of the round view (not a page): predict a round before it is revealed, then see why.

The round is computed when Step is pressed, as always; in student mode the view stops at stage 1
(drafts and q) or stage 2 (p too), asks a question, and plays stages 3-5 on Reveal, with each answer
marked and explained from the round's own numbers (specdec.views.quiz). The score lives in the browser
session. The mode, the question and the hint are sidebar-like settings carried in the URL, so an
instructor's link (prompt, seed and settings included) gives every student the same rounds.
"""

from __future__ import annotations

import re

import streamlit as st

from app_pages import ui
from specdec.views import charts
from specdec.views.quiz import (
    BRANCH,
    COUNT,
    NONE_SURVIVES,
    TICK,
    Answer,
    Score,
    branch_options,
    judge,
    judge_branch,
)

QUESTIONS = {TICK: "Which drafts survive? (tick them)", COUNT: "How many drafts survive?"}


def md_escape(text: str) -> str:
    """Untrusted text inside a widget label: Markdown characters shown as themselves."""
    return re.sub(r"([\\`*_{}\[\]()<>#+\-.!|~$])", r"\\\1", text)


def code(label: str) -> str:
    """A token label as inline code in Markdown, whatever backticks it holds."""
    longest = max((len(part) for part in re.findall(r"`+", label)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {label} {fence}"


def init() -> None:
    st.session_state.setdefault("_answers", {})  # round index -> Answer, for the current run
    st.session_state.setdefault("_score", Score())  # every answer of this browser session
    st.session_state.setdefault("_awaiting", None)  # the round waiting for an answer, if any


def new_run() -> None:
    """A new prompt or settings: the answers belong to the old run; the score stays."""
    st.session_state["_answers"], st.session_state["_awaiting"] = {}, None


def controls() -> None:
    """The switch, the question type and how much is shown before answering."""
    cols = st.columns([2, 3, 2])
    with cols[0]:
        ui.mirrored(st.toggle, "Student mode", "student",
                    help="predict, then reveal: each round stops before its acceptance test and asks")
    if not st.session_state["student"]:
        return
    with cols[1]:
        ui.mirrored(st.radio, "Question", "question", list(QUESTIONS), format_func=QUESTIONS.get,
                    horizontal=True)
    with cols[2]:
        ui.mirrored(st.radio, "Answer with", "hint", ["p", "q"], horizontal=True,
                    format_func={"p": "p and q in view", "q": "only the drafts and q (harder)"}.get)


def active() -> bool:
    return bool(st.session_state.get("student"))


def awaiting(trace) -> bool:
    """True while the shown round waits for the student's answer."""
    return active() and trace is not None and st.session_state.get("_awaiting") == trace.index


def ask_stage() -> int:
    """The stage a question is asked at: 2 (p and q in view) or 1 (only the drafts and q)."""
    return 2 if st.session_state.get("hint", "p") == "p" else 1


def on_new_round(trace) -> bool:
    """Called after a Step computed `trace`: in student mode, stop before stage 3 and ask.
    Returns whether a question is now waiting (a round with no drafts has nothing to ask)."""
    if not active() or trace.num_drafted == 0:
        return False
    st.session_state["_awaiting"] = trace.index
    return True


def question(trace, labels: dict[int, str], greedy: bool, on_reveal) -> None:
    """The question about the shown round, and Reveal. `on_reveal(answer)` plays the stages."""
    if trace.tree is not None:
        _branch_question(trace, labels, greedy, on_reveal)
        return
    k = trace.num_drafted
    kind = st.session_state.get("question", TICK)
    with st.container(border=True):
        st.markdown(f"**Your turn.** The target has checked the {k} draft(s), but you cannot see how yet. "
                    f"{QUESTIONS[kind]}")
        if greedy:
            st.caption("Temperature 0: a draft is kept exactly when it is the target's most likely token "
                       "(the argmax of p), and every draft after the first mismatch is discarded.")
        else:
            st.caption("A draft x is kept with probability min(1, p(x)/q(x)): a uniform random number u "
                       "in [0, 1) is drawn, and x is kept if u < min(1, p(x)/q(x)). Drafts are tested left "
                       "to right; the first rejection discards every draft after it.")
        key = f"_ans_{id(st.session_state['stepper'])}_{trace.index}"
        if kind == TICK:
            st.pills("Drafts the target keeps", list(range(k)), selection_mode="multi", key=key,
                     format_func=lambda i: f"{i + 1} · {md_escape(labels[trace.drafted_tokens[i]])}")
        else:
            st.segmented_control("Drafts that survive", list(range(k + 1)), key=key)

        def reveal() -> None:
            value = st.session_state.get(key)
            tops = [labels.get(p.token_ids[0], "") for p in trace.positions[:k]]
            if kind == TICK:
                picked = set(value or [])
                answer = judge(trace, predicted_kept=[i in picked for i in range(k)], target_top=tops)
            else:
                answer = judge(trace, predicted_count=int(value or 0), target_top=tops)
            st.session_state["_answers"][trace.index] = answer
            st.session_state["_score"].add(answer)
            st.session_state["_awaiting"] = None
            on_reveal(answer)

        st.button("Reveal", type="primary", key=f"b_reveal_{trace.index}", on_click=reveal)


def _branch_name(trace, labels: dict[int, str], node: int) -> str:
    return "none survives" if node == NONE_SURVIVES else md_escape(labels.get(trace.tree.tokens[node], "?"))


def _branch_question(trace, labels: dict[int, str], greedy: bool, on_reveal) -> None:
    """A tree round's question: which of the first position's candidates survives (or none)."""
    options = branch_options(trace)
    with st.container(border=True):
        st.markdown(f"**Your turn.** The target has checked the whole tree in one pass, but you cannot see "
                    f"how yet. **Which branch survives?** The first position has {len(options) - 1} "
                    "candidates, tested in turn.")
        if greedy:
            st.caption("Temperature 0: the candidate that is the target's most likely token is kept, if "
                       "one is.")
        else:
            st.caption("Each candidate x is kept with probability min(1, p(x)/q(x)); after a rejection p "
                       "becomes the residual and q loses x, and the next candidate is tested.")
        key = f"_ans_{id(st.session_state['stepper'])}_{trace.index}"
        st.segmented_control("The branch that survives", options, key=key,
                             format_func=lambda node: _branch_name(trace, labels, node))

        def reveal() -> None:
            picked = st.session_state.get(key)
            answer = judge_branch(trace, NONE_SURVIVES if picked is None else int(picked))
            st.session_state["_answers"][trace.index] = answer
            st.session_state["_score"].add(answer)
            st.session_state["_awaiting"] = None
            on_reveal(answer)

        st.button("Reveal", type="primary", key=f"b_reveal_{trace.index}", on_click=reveal)


def _branch_answer(trace, labels: dict[int, str], answer: Answer) -> None:
    options = branch_options(trace)
    picked = next((options[m.position] for m in answer.marks if m.predicted_kept), NONE_SURVIVES)
    survived = next((options[m.position] for m in answer.marks if m.kept), NONE_SURVIVES)
    lines = [f"You said **{_branch_name(trace, labels, picked)}**; **{_branch_name(trace, labels, survived)}"
             f"** survived: {'right' if answer.right else 'wrong'}."]
    for mark in answer.marks:
        token = code(labels.get(trace.tree.tokens[options[mark.position]], "?"))
        why = mark.reason[:1].upper() + mark.reason[1:]
        lines.append(f"- candidate {mark.position + 1} {token}: {why}; its chance to be the one kept, before "
                     f"any coin: {mark.survival_probability:.2f}")
    (st.success if answer.right else st.warning)("\n".join(lines))


def answer_box(trace, labels: dict[int, str]) -> None:
    """The student's answer about the shown round, marked, with the reasons."""
    answer: Answer | None = st.session_state["_answers"].get(trace.index)
    if answer is None:
        return
    if answer.question == BRANCH:
        _branch_answer(trace, labels, answer)
        return
    lines = []
    if answer.question == COUNT:
        verdict = "right" if answer.right else "wrong"
        lines.append(f"You said **{answer.predicted_count}** draft(s) survive; **{answer.kept_count}** did: "
                     f"{verdict}. On average {answer.expected_count:.2f} would (Σ of the chances below).")
    else:
        lines.append(f"**{answer.drafts_right} of {len(answer.marks)}** drafts judged right.")
    for mark in answer.marks:
        token = code(labels[trace.drafted_tokens[mark.position]])
        said = ""
        if mark.predicted_kept is not None:
            said = f" (you said: {'kept' if mark.predicted_kept else 'dropped'})"
        sign = "" if mark.right is None else ("**✓ right**" if mark.right else "**✗ wrong**")
        why = mark.reason[:1].upper() + mark.reason[1:]
        lines.append(f"- {sign} draft {mark.position + 1} {token}{said}. {why}; "
                     f"chance it survives the round, the drafts before it included: "
                     f"{mark.survival_probability:.2f}")
    (st.success if answer.right else st.warning)("\n".join(lines))


def score_panel() -> None:
    score: Score = st.session_state["_score"]
    if not score.rounds_answered:
        return
    title = f"Your score: {score.rounds_right} of {score.rounds_answered} rounds right"
    with st.expander(title, expanded=True):
        cols = st.columns(3)
        cols[0].metric("Rounds answered", score.rounds_answered)
        cols[1].metric("Rounds right", score.rounds_right)
        cols[2].metric("Drafts judged right", f"{score.drafts_right} of {score.drafts_judged}"
                       if score.drafts_judged else "–")
        ui.chart(charts.calibration_chart(score.calibration(), score.count_guesses()), key="_calibration")
