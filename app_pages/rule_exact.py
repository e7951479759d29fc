"""The rule on trial's exact answers: each rule's exact law beside the samples, the position where a
lossy rule's loss shows, and a student's own rule. Widgets -> specdec.measure.exact -> charts."""

from __future__ import annotations

import streamlit as st

from app_pages import ui
from specdec.config import TOP_CHOICE
from specdec.core.acceptance import RULES
from specdec.core.output_law import REPLACEMENT_WORDS
from specdec.errors import SpecDecError
from specdec.measure import exact, rules
from specdec.measure.rule_expression import MAX_CHARS, PRESETS
from specdec.views import charts, numbers

ON_REJECT = REPLACEMENT_WORDS  # what the page calls each replacement
# One click each: the four built-in rules, then the rules students ask about.
BUILT_IN_PRESETS = {RULES[name].title: preset for name, preset in PRESETS.items()}
ASKED_PRESETS = {"p > q": ("p > q", "residual"), "p/(p+q)": ("p/(p+q)", "residual"),
                 "sqrt(p/q)": ("sqrt(p/q)", "residual")}


# -- where the trial runs ---------------------------------------------------------------------------


def trial_context(prompt_ids: list[int], settings) -> tuple[list[int], int]:
    """The token ids the trial reads: the prompt, or the prompt and a target sample's first tokens
    where the page's offer moved it (same prompt and settings only). -> (context, position)."""
    at = st.session_state.get("_rt_at")
    if not at or at["base"] != (tuple(prompt_ids), settings):
        return prompt_ids, 0
    cols = st.columns([4, 1])
    cols[0].info(f"The trial runs at token **{at['index']}** of a target sample of this prompt (seed "
                 f"{settings.seed}): after the prompt come {at['text']!r}.",
                 icon=":material/my_location:")
    if cols[1].button("Back to the prompt's next token", key="b_rt_back"):
        st.session_state.pop("_rt_at")
        st.rerun()
    return at["context"], at["index"]


def _move_to(offer: dict, prompt_ids: list[int], settings) -> None:
    st.session_state["_rt_at"] = {"base": (tuple(prompt_ids), settings), "index": offer["index"],
                                  "context": offer["context"], "text": offer["text"]}
    st.session_state["_rt_autorun"] = True  # one click: moved, and the trial runs there


# -- each rule's exact law, and what the samples can see -----------------------------------------------


def exact_section(pair, trial, rows: list[dict], prompt_ids: list[int], position: int) -> None:
    """Under the trial's table: the exact laws against p, and for a lossy rule the samples cannot
    resolve, why (in this position's numbers) and where along a target sample they could."""
    view = exact.trial_view(trial, pair.token_text, rows)
    if not view["laws"]:
        return
    titles = [(row["rule"], row["title"]) for row in rows]
    where = "the prompt's next token" if position == 0 else f"token {position} of a target sample"
    ui.chart(charts.exact_law_chart(view["laws"], titles, f"What each rule emits at {where}"))
    st.caption("Each rule's exact law of the first token, from p and q alone: the draft proposes x ~ q, "
               "the rule keeps it with its acceptance probability, else draws from its replacement. "
               "*TV exact* in the table is its distance from p; *expected there* is its exact acceptance.")
    for name, why in view["unseen"].items():  # only rules the samples did not catch (exact.trial_view)
        st.warning(f"**{_title(rows, name)}** (lossy) is not caught here: with {trial.samples} samples its "
                   f"loss cannot be seen at this position, not reliably. {why[0].upper()}{why[1:]}.",
                   icon=":material/visibility_off:")
    watched = exact.watched_rule(trial.custom)
    if watched not in view["unseen"] or watched != TOP_CHOICE:
        return
    _offer(pair, trial, prompt_ids, position)


def _title(rows: list[dict], name: str) -> str:
    return next(row["title"] for row in rows if row["rule"] == name)


def _offer(pair, trial, prompt_ids: list[int], position: int) -> None:
    settings, samples = trial.settings, trial.samples
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings, samples)
    offers = st.session_state.setdefault("_rt_offers", {})
    if key not in offers:
        with st.spinner(f"Looking along a target sample of this prompt ({exact.SCAN_TOKENS} tokens) for "
                        "where the top-choice rule's exact TV is largest…"):
            try:
                offers[key] = exact.offer(pair, prompt_ids, settings, samples)
            except SpecDecError as error:
                st.error(str(error), icon=":material/error:")
                return
    offer = offers[key]
    numbers = (f"its exact TV is {offer['tv']:.3f} at token {offer['index']} (after {offer['text']!r}), "
               f"against a noise floor of about {offer['floor']:.3f} for {samples} samples "
               "there")
    if not offer["resolved"]:
        needed = exact.samples_to_see(offer["tv"], offer["floor"], samples)
        more = f"; it would take about {needed:,} samples" if needed else ""
        st.info(f"On this prompt the top choice's loss cannot be seen with {samples} samples: of the first "
                f"{offer['scanned']} tokens of a target sample, {numbers}{more}.",
                icon=":material/info:")
        return
    if offer["index"] == position:
        return
    st.button(f"Put the rules on trial at token {offer['index']}, where the top choice's exact TV is "
              f"{offer['tv']:.3f}", key="b_rt_offer", type="primary",
              on_click=_move_to, args=(offer, prompt_ids, settings))
    st.caption(f"Of the first {offer['scanned']} tokens of a target sample of this prompt (seed "
               f"{settings.seed}), {numbers}.")


# -- a student's own rule ----------------------------------------------------------------------------------


def plain(text: str) -> str:
    """Text shown as typed: a student's `__import__` must not turn bold (Markdown's marks escaped)."""
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|~$" else c for c in text)


def _preset(text: str, on_reject: str) -> None:
    st.session_state["accept"], st.session_state["on_reject"] = text, on_reject


def own_rule_section(pair, context: list[int], settings, samples: int) -> None:
    st.header("2 · Your own rule")
    st.markdown(
        "Type the probability of keeping a drafted token x, as an expression in **p** and **q**: x's "
        "probability under the target and under the draft. Then choose what replaces a rejected draft. "
        "The page works out what your rule emits at the trial's position, exactly, and whether that is "
        "the target's p."
    )
    with st.expander("What an expression may use"):
        st.markdown(
            "Numbers, + − * /, ** with a number, comparisons (true = 1), min, max, sqrt, exp, log, abs, "
            "and **pmax** and **H** (the target's top probability and entropy here). The value is clamped "
            f"to [0, 1], at most {MAX_CHARS} characters."
        )
    number = 0
    rows = (("The four rules:", BUILT_IN_PRESETS), ("Rules students ask about:", ASKED_PRESETS))
    for heading, presets in rows:
        cols = st.columns([1.3, *[2] * 4], vertical_alignment="center")
        cols[0].markdown(heading)
        for col, (label, (text, on_reject)) in zip(cols[1:], presets.items(), strict=False):
            col.button(label, key=f"b_rt_preset_{number}", on_click=_preset, args=(text, on_reject),
                       width="stretch")
            number += 1
    cols = st.columns([3, 2])
    with cols[0]:
        ui.mirrored(st.text_input, "Keep x with probability", "accept", placeholder="e.g. min(1, p/q)",
                    max_chars=None)
    with cols[1]:
        ui.mirrored(st.selectbox, "On a rejection, emit", "on_reject", list(ON_REJECT),
                    format_func=ON_REJECT.get)
    text = st.session_state["accept"]
    if not text.strip():
        st.info("Type an expression, or press a preset above.")
        return
    try:
        custom = exact.CustomRule.of(text, st.session_state["on_reject"])
        judged = exact.judge_position(pair, context, settings, custom)
    except SpecDecError as error:
        st.error(plain(str(error)), icon=":material/error:")
        return
    _show_judgement(judged, custom)
    _sample_own(pair, context, settings, samples, custom)


def _show_judgement(judged: dict, custom) -> None:
    cols = st.columns(3)
    tv = judged["tv"]
    cols[0].metric("exact TV from p", numbers.figure(tv, 2))
    cols[1].metric("exact acceptance", f"{judged['acceptance']:.3f}",
                   f"{judged['acceptance'] - judged['speculative_acceptance']:+.3f} vs min(1, p/q)",
                   delta_color="off")
    cols[2].metric("verdict", "lossless" if judged["lossless"] else "lossy")
    if judged["greedy"]:
        st.info("At temperature 0 every rule is the greedy rule: yours too emits the target's top token.")
    elif not judged["drafts"]:
        st.info("The drafter proposes nothing at this position, so no rule has a draft to judge here.")
    if judged["lossless"]:  # a checked expression holds no backtick: a code span shows it as typed
        st.success(f"Lossless: `{custom.text}` with {ON_REJECT[custom.on_reject]} emits exactly p here "
                   "(TV at float precision), and on five hand-built pairs of distributions too.",
                   icon=":material/verified:")
    else:
        st.error(f"Lossy: `{custom.text}` with {ON_REJECT[custom.on_reject]} does not emit the target's "
                 f"distribution{' here' if judged['tv'] > exact.LOSSLESS_TV else ' on every pair'}: exact "
                 f"TV {numbers.figure(judged['tv'], 2)} from p at this position.",
                 icon=":material/gavel:")
    titles = [("yours", f"yours: {custom.text}"), ("speculative", "speculative sampling")]
    ui.chart(charts.exact_law_chart(judged["laws"], titles, "Your rule's exact law against p"))


def _sample_own(pair, context: list[int], settings, samples: int, custom) -> None:
    key = (pair.target.name, pair.drafter_name, tuple(context), settings, samples, custom)
    results = st.session_state.setdefault("_rt_own", {})
    label = "Sample the real pair with your rule"
    if ui.run_stop_buttons(label, "b_rt_own", "b_rt_own_stop", "_rt_own_stop"):
        try:
            steps = rules.rule_trial(pair, context, settings, samples, 1, rules=(), custom=custom)
            ui.run_with_progress(
                steps, samples, lambda trial: f"{trial.samples} of {samples} samples",
                "_rt_own_stop", lambda trials, done: results.__setitem__(key, (trials[-1], done)),
            )
        except SpecDecError as error:
            st.error(str(error), icon=":material/error:")
            return
    if key not in results:
        return
    trial, finished = results[key]
    row = next(iter(rules.trial_results(trial)), None)
    if row is None:
        return
    stopped = "" if finished else f" (stopped after {trial.samples})"
    st.markdown(
        f"Sampled{stopped}: {row.samples} first tokens of your rule against the target's: TV "
        f"**{row.tv:.3f}** (exact {row.tv_exact:.3f}), noise band 0 to {row.tv_noise_band:.3f} (mean "
        f"{row.tv_noise_floor:.3f}), "
        f"χ² p {'' if row.chi2_p < 1e-3 else '= '}{numbers.p_value(row.chi2_p)}; the first draft kept "
        f"{row.first_acceptance:.3f} of the time "
        f"(exactly {row.acceptance_exact:.3f})."
    )
