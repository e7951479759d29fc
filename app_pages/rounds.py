"""Round by round: step through speculative decoding, one round in five stages."""

import json

import streamlit as st

from app_pages import student, ui
from app_pages.student import code, md_escape
from specdec.config import SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL
from specdec.core.acceptance import RULES
from specdec.core.records import DRAFTED_BY_LOOKUP
from specdec.lab import charts, draft_length, kvcache
from specdec.lab.stepper import Stepper
from specdec.lab.tokens import prose_and_code

STAGES = {1: "1 · Draft", 2: "2 · Verify", 3: "3 · Accept?", 4: "4 · Correct", 5: "5 · Output"}
ALL = 10**6
SPEEDS = {"slow": 2.0, "normal": 1.0, "fast": 0.5, "fastest": 0.25}  # seconds per stage

ui.init_state()  # app.py did this already; repeated so the page also runs on its own (AppTest)
state = st.session_state
state.setdefault("stage", 5)
state.setdefault("playing", False)
state.setdefault("animating", False)
state.setdefault("speed", "normal")
state.setdefault("animate_stages", True)
state.setdefault("revealed", ALL)  # stage 1 reveals the drafts one by one while animating
student.init()

st.title("Round by round")
st.markdown(ui.TOKEN_CSS + ui.STEADY_WHILE_RUNNING_CSS, unsafe_allow_html=True)


# -- prompt ------------------------------------------------------------------------------------


def _use_ready_prompt() -> None:
    choice = state.get("_ready")
    if choice and " · " in choice:
        category, number = choice.split(" · ", 1)
        state["prompt"] = ui.ready_prompts()[category][int(number.split(".")[0]) - 1]
        state["_prompt_w"] = state["prompt"]


def _prompt_edited() -> None:
    state["prompt"] = state["_prompt_w"]


ready = [
    f"{category} · {i + 1}. {text[:70]}"
    for category, prompts in ui.ready_prompts().items()
    for i, text in enumerate(prompts)
]
if "_prompt_w" not in state or state["_prompt_w"] != state["prompt"]:
    state["_prompt_w"] = state["prompt"]  # the widget's own state is dropped when the page is left
left, right = st.columns([3, 2])
right.selectbox("Ready prompts", ready, index=None, key="_ready", on_change=_use_ready_prompt,
                placeholder="code, prose or copy-heavy…")  # fmt: skip
left.text_area(
    "Prompt (changing it starts a fresh run)", key="_prompt_w", height=90, on_change=_prompt_edited,
    max_chars=ui.server_limits().max_prompt_chars,
)  # fmt: skip

pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, state["prompt"])

run_key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
if state.get("_run_key") != run_key:
    state["stepper"] = Stepper(pair, prompt_ids, settings, prefill_chunk=ui.server_limits().prefill_chunk)
    state["_figures"] = {}  # (round, chart, position) -> figure: built once, redrawn from here
    state["_run_key"] = run_key
    state["stage"], state["playing"], state["animating"] = 5, False, False
    student.new_run()
stepper: Stepper = state["stepper"]
student.controls()


def _read_prompt() -> None:
    """Read the prompt into both models when it is set (in chunks, sharing the models with other
    sessions), so that a Step then only runs a round."""
    if stepper.prompt_read:
        return
    progress = st.progress(0.0, text=f"Reading the prompt ({len(stepper.prompt_ids):,} tokens)…")

    def waiting(ahead: int) -> None:
        progress.progress(0.0, text=ui.waiting_message(ahead))

    for fraction in stepper.read_prompt(on_wait=waiting):
        progress.progress(fraction, text=f"Reading the prompt ({len(stepper.prompt_ids):,} tokens)…")
    progress.empty()


_read_prompt()
greedy = settings.sampling.greedy
rule = RULES[settings.rule]  # at temperature 0 every rule is the greedy rule
if ui.lossy_rule_in_use():
    st.warning(f"Rule: **{rule.title}**. {ui.LOSSY_NOTE} (see *The rule on trial*).",
               icon=":material/warning:")  # fmt: skip
elif settings.rule != SPECULATIVE and not greedy:
    st.info(f"Rule: **{rule.title}** (exact, but it accepts less than speculative sampling).",
            icon=":material/rule:")  # fmt: skip


# -- controls ----------------------------------------------------------------------------------


def _step() -> None:
    """The Step button: the round itself is computed in the fragment, where waiting can be shown."""
    state["_clicked"] = True
    state["_steps_pending"] = state.get("_steps_pending", 0) + 1  # clicks before the fragment ran count


def _run_pending_step() -> None:
    """Compute the next round, telling the student how many requests are ahead while the models are busy."""
    note, shown = st.empty(), False

    def waiting(ahead: int) -> None:
        nonlocal shown
        note.info(ui.waiting_message(ahead), icon="⏳")
        shown = True

    trace = stepper.step(on_wait=waiting)
    if trace is not None and student.on_new_round(trace):
        state["stage"], state["animating"], state["revealed"] = student.ask_stage(), False, ALL
    elif trace is not None:
        state["stage"] = 1 if state["animate_stages"] else 5
        state["animating"] = state["animate_stages"]
        state["revealed"] = 1 if state["animate_stages"] else ALL
    elif stepper.at_end:
        state["playing"] = False
    if shown:
        note.empty()


def _back() -> None:
    state["_clicked"] = True
    stepper.back()
    state["stage"], state["animating"], state["revealed"] = 5, False, ALL


def _reset() -> None:
    state["_clicked"] = True
    stepper.reset()
    student.new_run()  # the rounds replay; their questions are asked afresh
    state["stage"], state["playing"], state["animating"] = 5, False, False
    state["revealed"] = ALL


def _play() -> None:
    state["_clicked"] = True
    state["playing"] = not state["playing"]
    state["animating"] = False


def _tick() -> None:
    """One timer beat: the next draft of stage 1, the next stage, or the next round."""
    current = stepper.current
    if state["animate_stages"] and current is not None and state["stage"] == 1:
        if state["revealed"] < current.num_drafted:
            state["revealed"] += 1
            return
    if state["animate_stages"] and current is not None and state["stage"] < 5:
        state["stage"] += 1
        state["revealed"] = ALL
        return
    if not state["playing"] or student.active():  # student mode: each round waits for an answer
        state["animating"] = False
        return
    if stepper.step() is None:
        state["playing"] = False
        return
    state["stage"] = 1 if state["animate_stages"] else 5
    state["revealed"] = 1 if state["animate_stages"] else ALL


def _timer_interval() -> float | None:
    """Seconds between beats while playing or animating a round; None when nothing moves."""
    return SPEEDS[state["speed"]] if state["playing"] or state["animating"] else None


timer_interval = _timer_interval()  # what the fragment below is set up with on this run

# -- the round view (a fragment: buttons and timer beats redraw only this part) ----------------


def _counters(hide_current: bool) -> None:
    """`hide_current`: totals before the shown round (its acceptance would answer the question)."""
    c = stepper.counters(stepper.shown - 1 if hide_current else None)
    cols = st.columns(5)
    cols[0].metric("Rounds", c.rounds)
    cols[1].metric("Target passes", c.target_passes)
    cols[2].metric("Tokens emitted", c.tokens_emitted)
    cols[3].metric("Acceptance so far", f"{c.acceptance_rate:.0%}" if c.drafted else "–",
                   help=f"{c.accepted} of {c.drafted} drafted tokens kept")  # fmt: skip
    cols[4].metric("Tokens per pass", f"{c.tokens_per_pass:.2f}" if c.rounds else "–")


def _drafted_under_confidence_rule(trace) -> bool:
    """The round's drafts came from a model under adaptive length: Π matters (a copied round is sure)."""
    return stepper.settings.adaptive and trace.drafted_by != DRAFTED_BY_LOOKUP


def _draft_strip(trace, stage: int) -> str:
    """The drafted tokens; from stage 3 marked kept / rejected / discarded; from 4 the new token."""
    chips = []
    adaptive = _drafted_under_confidence_rule(trace)
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
                                       title=f"draft {i + 1} accepted"))  # fmt: skip
        elif i == trace.num_accepted:
            chips.append(ui.token_chip(label, "sd-reject", note="✗", title=f"draft {i + 1} rejected"))
        else:
            chips.append(ui.token_chip(label, "sd-struck", title=f"draft {i + 1}: discarded, never tested"))
    if stage >= 4:
        origin = "bonus" if trace.is_bonus else "resampled"
        note = "2nd choice" if trace.kept_sibling is not None else origin
        chips.append(" → " + ui.token_chip(stepper.label(trace.next_token), style=ui.ORIGIN_STYLE[origin],
                                           note=note, title=f"{origin} token"))  # fmt: skip
        if trace.kept_sibling is not None:
            after = stepper.label(trace.emitted_tokens[-1])
            chips.append(ui.token_chip(after, style=ui.ORIGIN_STYLE["bonus"], note="bonus",
                                       title="the target's token after the kept second choice"))
    if not chips:
        return '<div class="sd-line"><i>the drafter proposed nothing this round (no n-gram match)</i></div>'
    return f'<div class="sd-line">{"".join(chips)}</div>' + (_sibling_line(trace) if stage >= 2 else "")


def _sibling_line(trace) -> str:
    """The draft's second choices that shared the verification pass (core.siblings), if any."""
    if not trace.sibling_positions:
        return ""
    chips = [ui.token_chip(stepper.label(token), "sd-draft", note=f"beside draft {position + 1}",
                           title="the draft's second choice, verified in the same pass")
             for position, token in zip(trace.sibling_positions, trace.sibling_tokens, strict=True)]
    return f'<div class="sd-line"><small>second choices in the pass:</small> {"".join(chips)}</div>'


def _mark_click() -> None:
    """A widget in the fragment changed: this rerun is a click, not a timer beat."""
    state["_clicked"] = True


def _stage_chosen() -> None:
    _mark_click()
    state["revealed"] = ALL


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
    st.segmented_control(label, options=list(range(count)), format_func=name, key=key, on_change=_mark_click)
    return state[key] or 0


def _figure(trace, chart: str, position: int, build):
    """A round's chart, built the first time it is shown and reused on every later rerun."""
    key = (trace.index, chart, position)
    if key not in state["_figures"]:
        state["_figures"][key] = build()
    return state["_figures"][key]


def _stage_drafting(trace, labels) -> None:
    st.markdown(
        f"The drafter proposes **{trace.num_drafted}** token(s), one after another, each drawn from its "
        "distribution **q**. Nothing has been checked yet."
    )
    why = draft_length.why_drafting_stopped(trace, stepper.settings)
    if _drafted_under_confidence_rule(trace):
        why += (" (Π on each draft: the product of the draft's top probabilities so far, its estimate "
                f"that every draft up to there survives; drafting stops before Π would fall below what "
                f"the next draft costs: the threshold {stepper.settings.draft_threshold:.2f} for drafting "
                "it, plus what it adds to the target's pass on this machine, listed on *The idle "
                "machine*. The first draft's drafting step is already paid, so where a pass over two "
                "tokens costs what a pass over one does, the first draft is always made.)")
    st.markdown(f"**Why {trace.num_drafted}?** {why}")
    if trace.head_read is not None:
        _what_the_head_read(trace)
    if trace.num_drafted == 0:
        return
    if trace.drafted_by == DRAFTED_BY_LOOKUP:
        st.caption("Copied by n-gram lookup: what followed the same few tokens earlier in the text. "
                   "q puts all its mass on the copied token.")  # fmt: skip
    revealing = state["revealed"] < trace.num_drafted
    follow = state["revealed"] - 1 if revealing else None  # the chart follows the newest draft
    i = _position_picker(trace, labels, trace.num_drafted, "Drafted token", follow)
    drafted = trace.drafted_tokens[i]
    title = f"q at draft position {i + 1}: drafted {labels[drafted]}"
    fig = _figure(trace, "draft", i, lambda: charts.draft_chart(trace.positions[i], drafted, labels, title))
    ui.chart(fig, key=f"_c1_{trace.index}")


def _what_the_head_read(trace) -> None:
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


def _stage_verify(trace, labels) -> None:
    k = trace.num_drafted
    st.markdown(
        f"**One** target forward pass over the context plus the {k} draft(s) gives the target's "
        f"distribution **p** at all **{k + 1}** positions (the last one is the bonus slot)."
        + (f" The same pass scores the draft's second choice beside {len(trace.sibling_positions)} "
           "draft(s), each seeing only the tokens before its draft (a tree attention mask), and p after "
           "each." if trace.sibling_positions else "")
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
        })  # fmt: skip
    st.table(rows)
    i = _position_picker(trace, labels, k + 1, "Position")
    drafted = trace.drafted_tokens[i] if i < k else None
    title = f"p vs q at position {i + 1}" if i < k else f"p at position {k + 1} (bonus slot)"
    fig = _figure(trace, "verify", i, lambda: charts.distribution_chart(
        trace.positions[i], labels, title, highlight=drafted, show_residual=False))  # fmt: skip
    ui.chart(fig, key=f"_c2_{trace.index}")


RULE_TESTS = {  # stage 3's opening line under each rule, above temperature 0
    SPECULATIVE: "Each draft x faces a test, left to right: draw **u ~ Uniform(0, 1)**, keep x if "
    "**u < min(1, p(x)/q(x))**. The first rejection ends the round; later drafts are never tested.",
    TOP_CHOICE: "**The top choice matches** (lossy): a draft x is kept while it equals the target's most "
    "likely token (argmax of p), at any temperature. The first mismatch ends the round.",
    SAMPLE_COMPARE: "**Sample and compare** (exact): at each position the target draws its own token "
    "**y ~ p**; x is kept if **y = x** (chance p(x)). The first mismatch ends the round.",
    TYPICAL: "**Typical acceptance** (Medusa, lossy): x is kept while **p(x) > min(0.09, 0.3·exp(−H(p)))**, "
    "a bar that is high where p is sure and low where it is flat. No coin. The first miss ends the round.",
}


def _test_line(trace, labels, i: int) -> str:
    """Draft i's test under the round's rule, in its own numbers."""
    x = labels[trace.drafted_tokens[i]]
    q, p, a = trace.draft_token_probs[i], trace.target_token_probs[i], trace.accept_probs[i]
    kept = i < trace.num_accepted
    verdict = "**accept**" if kept else "**reject**"
    if trace.thresholds is not None:
        sign = ">" if kept else "≤"
        return f"{i + 1}. {code(x)}: p(x)={p:.3f} {sign} threshold {trace.thresholds[i]:.3f} → {verdict}"
    if trace.target_draws is not None:
        y = labels.get(trace.target_draws[i], "?")
        sign = "=" if kept else "≠"
        return f"{i + 1}. {code(x)}: the target drew y = {code(y)} {sign} x (chance p(x)={p:.3f}) → {verdict}"
    if trace.uniforms is None:  # greedy, or the top-choice rule
        top = labels[trace.positions[i].token_ids[0]]
        relation = "matches" if kept else "differs from"
        return f"{i + 1}. {code(x)} {relation} the target's argmax {code(top)} → {verdict}"
    u = trace.uniforms[i]
    sign = "<" if kept else "≥"
    numbers = f"q={q:.3f}, p={p:.3f}, min(1, p/q)={a:.3f}; u={u:.3f} {sign} ratio"
    return f"{i + 1}. {code(x)}: {numbers} → {verdict}"


def _stage_accept(trace, labels) -> None:
    if trace.num_drafted == 0:
        st.markdown("Nothing was drafted, so there is nothing to test: the target's pass gives one token.")
        return
    if greedy:
        st.markdown(
            "**Greedy mode** (temperature 0): no coin flips. A draft is kept if it equals the target's "
            "most likely token (argmax of p); the first mismatch ends the round."
        )
    else:
        st.markdown(RULE_TESTS[trace.rule])
    fig = _figure(trace, "accept", 0, lambda: charts.acceptance_chart(trace, labels))
    ui.chart(fig, key=f"_c3_{trace.index}")
    st.markdown("\n".join(_test_line(trace, labels, i) for i in range(trace.num_tested)))


# What the replacement after a rejection is drawn from, under each rule (above temperature 0).
REPLACEMENTS = {
    SPECULATIVE: ("a replacement {nxt} is drawn from the residual norm(max(0, p − q)), which removes the "
                  "mass q already had its chance at", "residual norm(max(0, p−q))"),
    TOP_CHOICE: ("a replacement {nxt} is drawn from p itself (it can even be the argmax again)",
                 "p (drawn from)"),
    SAMPLE_COMPARE: ("the target's own draw y = {nxt} is emitted: given y ≠ x it is a draw from p "
                     "without x", "p without x (y given y ≠ x)"),
    TYPICAL: ("a replacement {nxt} is drawn from p cut to its typical tokens (p ≥ the bar), as Medusa "
              "samples", "p cut to typical tokens"),
}  # fmt: skip


def _stage_correct(trace, labels) -> None:
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
            trace.positions[k], labels, title, highlight=trace.next_token))  # fmt: skip
    else:
        rejected = labels[trace.drafted_tokens[j]]
        text, name = REPLACEMENTS[trace.rule]
        how = f"the target's argmax {code(nxt)} replaces it" if greedy else text.format(nxt=code(nxt))
        st.markdown(f"Draft {j + 1} {code(rejected)} was rejected: {how}. Drafts after it are discarded.")
        if trace.kept_sibling is not None:
            after = labels[trace.emitted_tokens[-1]]
            st.markdown(f"{code(nxt)} was the draft's **second choice** here, verified in the same pass "
                        f"beside draft {j + 1}: the pass already holds p after it, and its argmax "
                        f"{code(after)} comes free, one token more than the chain alone gives.")
        drawn_from = "the residual" if greedy or trace.rule == SPECULATIVE else name
        title = f"position {j + 1}: p, q and {drawn_from}; drawn: {nxt}"
        fig = _figure(trace, "correct", j, lambda: charts.distribution_chart(
            trace.positions[j], labels, title, highlight=trace.next_token, residual_name=name))  # fmt: skip
    ui.chart(fig, key=f"_c4_{trace.index}")
    shown = trace.positions[k if trace.is_bonus else j].token_ids
    if trace.next_token not in shown:
        st.caption(f"{code(nxt)} is outside the most likely tokens the trace keeps, so it has no bar here.")


def _stage_output(trace, labels) -> None:
    st.markdown(
        f"This round emitted **{len(trace.emitted_tokens)}** token(s) for **one** target pass "
        f"({trace.num_accepted} accepted draft(s) + 1 {'bonus' if trace.is_bonus else 'resampled'} token"
        f"{' + 1 after the kept second choice' if trace.kept_sibling is not None else ''}). "
        "They join the output above (outlined)."
    )


STAGE_VIEWS = {1: _stage_drafting, 2: _stage_verify, 3: _stage_accept, 4: _stage_correct, 5: _stage_output}


@st.fragment(run_every=timer_interval)
def round_view() -> None:
    beat = not state.pop("_clicked", False) and not state.pop("_full_run", False)
    for _ in range(state.pop("_steps_pending", 0)):
        _run_pending_step()
    if beat and timer_interval:
        _tick()
    if _timer_interval() != timer_interval:
        st.rerun(scope="app")  # the timer starts or stops: set the fragment up again

    waiting_for_answer = student.awaiting(stepper.current)
    cols = st.columns(4)
    cols[0].button("Step ▶|", on_click=_step, disabled=stepper.at_end or waiting_for_answer,
                   width="stretch", key="b_step",
                   help="answer the question first" if waiting_for_answer else None)  # fmt: skip
    play_help = "in student mode each round waits for your answer" if student.active() else None
    cols[1].button("Pause ⏸" if state["playing"] else "Play ▶", on_click=_play, width="stretch",
                   disabled=(stepper.at_end and not state["playing"]) or student.active(), key="b_play",
                   help=play_help)  # fmt: skip
    cols[2].button("Back |◀", on_click=_back, disabled=stepper.shown < 0, width="stretch", key="b_back")
    cols[3].button("Reset ⟲", on_click=_reset, disabled=not stepper.traces, width="stretch", key="b_reset")

    _counters(hide_current=waiting_for_answer)
    _timeline(hide_current=waiting_for_answer)
    trace = stepper.current
    _output(trace)  # under the timeline: the text so far, as chips and as text
    if trace is None:
        st.info("Press **Step** to run the first round, or **Play** to watch rounds go by.")
    else:
        done = " · generation finished" if stepper.at_end else ""
        st.subheader(f"Round {trace.index + 1} of {len(stepper.traces)} computed{done}")
        if waiting_for_answer:  # stages 3-5 would give the answer away
            stage = state["stage"] = student.ask_stage()
        else:
            st.segmented_control("Stage", options=list(STAGES), format_func=STAGES.get, key="stage",
                                 label_visibility="collapsed", on_change=_stage_chosen)  # fmt: skip
            stage = state["stage"] or 5
        labels = stepper.labels_for(trace)
        st.markdown(_draft_strip(trace, stage), unsafe_allow_html=True)
        STAGE_VIEWS[stage](trace, labels)
        if waiting_for_answer:
            student.question(trace, labels, greedy, on_reveal=_play_reveal)
        elif stage >= 3:
            student.answer_box(trace, labels)
        _cache_strip(trace, stage)

    if student.active():
        student.score_panel()


def _play_reveal(answer) -> None:
    """After an answer: play stages 3-5 (or show stage 3 when stages are not animated)."""
    _mark_click()
    state["stage"], state["revealed"] = 3, ALL
    state["animating"] = state["animate_stages"]


def _cache_strip(trace, stage: int) -> None:
    rows = kvcache.cache_rows(trace, stage)
    if not rows:
        return
    st.markdown(
        "**KV caches.** Each model keeps keys and values for the tokens it has read. Drafting and "
        "verifying add positions; from stage 4 the roll-back drops those after the first rejection "
        "(greyed). The target caches the accepted drafts for free; the draft usually never fed its "
        "last proposal (an adaptive stop has: it computed q for one more token, then stopped), so "
        "after a bonus round it reads that token, with the bonus, next round."
    )
    st.markdown(ui.cache_strip(rows, stepper.label), unsafe_allow_html=True)


def _output(trace) -> None:
    """The text so far as token chips, and beside it as readable text (code shown as code)."""
    shows_current = trace is not None and (state["stage"] or 5) == 5
    upto = stepper.shown if shows_current else stepper.shown - 1
    new_round = trace.index if shows_current else None
    chips, text = st.columns([3, 2])
    chips.markdown("**Output so far**")
    line = ui.output_line(stepper.output_tokens(upto), new_round) + ui.legend()
    chips.markdown(line, unsafe_allow_html=True)
    text.markdown("**As text**")
    for kind, part, language in prose_and_code(stepper.text(upto)):
        if kind == "code":
            text.code(part, language=language)
        else:
            text.text(part)


def _timeline_clicked() -> None:
    """A click on the timeline: show that round, at its last stage (as Back does)."""
    _mark_click()
    picked = st.session_state["_timeline"].selection.get(charts.TIMELINE_PICK) or []
    if picked:
        stepper.show_round(int(picked[0]["round"]) - 1)
        state["stage"], state["animating"], state["revealed"] = 5, False, ALL


def _timeline(hide_current: bool) -> None:
    """Every round so far, one column each; clicking a column jumps to that round. `hide_current`:
    the rounds before the shown one (a student has not answered for it yet)."""
    traces = stepper.traces[: stepper.shown] if hide_current else stepper.traces
    if len(traces) < 2:
        return
    figure = charts.timeline_chart(traces, stepper.labels_for_all(), stepper.shown)
    st.vega_lite_chart(figure.data, figure.spec, key="_timeline", on_select=_timeline_clicked,
                       selection_mode=charts.TIMELINE_PICK, width="stretch")  # fmt: skip


def _json() -> str:
    return json.dumps(stepper.to_dict(), indent=1)


def _playback_controls() -> None:
    """Speed and stage animation. Outside the round view: a change sets its timer up again (a full
    rerun), and a Step need not redraw them (every element a Step sends costs each browser time)."""
    speed, animate, _ = st.columns([2, 2, 4])
    speed.select_slider("Speed", options=list(SPEEDS), key="speed", label_visibility="collapsed",
                        format_func=lambda name: f"speed: {name}")  # fmt: skip
    animate.toggle("Animate stages", key="animate_stages")


def _downloads() -> None:
    """The run as files, built when clicked (callables). Outside the round view, for the same reason."""
    cols = st.columns(2)
    cols[0].download_button(
        "Download trace (JSON)", data=_json, file_name="specdec-trace.json",
        mime="application/json", key="b_json", on_click="ignore",
    )  # fmt: skip
    cols[1].download_button(
        "Download rounds (CSV)", data=stepper.to_csv, file_name="specdec-rounds.csv",
        mime="text/csv", key="b_csv", on_click="ignore",
    )  # fmt: skip


_playback_controls()
state["_full_run"] = True
round_view()
_downloads()
