"""The guarantee: speculative sampling draws from exactly the target's distribution. Shown three ways."""

from dataclasses import replace

import streamlit as st

from app_pages import class_poll, ui
from app_pages.student import md_escape
from app_pages.words import drafter_words
from specdec.config import SPECULATIVE, SamplingConfig
from specdec.errors import SpecDecError
from specdec.measure import guarantee
from specdec.measure.stats import chi_square_two_sample, tv_distance
from specdec.models.pair import ModelPair
from specdec.views import charts, class_questions, numbers
from specdec.views.tokens import token_label

TOY_DEFAULT = [
    {"token": "the", "p (target)": 0.40, "q (draft)": 0.60},
    {"token": "a", "p (target)": 0.25, "q (draft)": 0.10},
    {"token": "this", "p (target)": 0.15, "q (draft)": 0.20},
    {"token": "one", "p (target)": 0.12, "q (draft)": 0.05},
    {"token": "my", "p (target)": 0.08, "q (draft)": 0.05},
]


def intro() -> None:
    st.title("The guarantee")
    st.markdown(
        "Accept a draft x with probability min(1, p(x)/q(x)); after a rejection, draw from the residual "
        "norm(max(0, p − q)). Whatever the draft q is, every emitted token is distributed **exactly** as "
        "the target's p. A good draft only makes it faster."
    )


def toy_playground() -> None:
    st.header("1 · Toy playground")
    st.caption("Shape p and q over five tokens (weights; each column is normalised to sum to 1).")
    # On a projector the grid's text is scaled up: it needs the full width to show its every column.
    left, right = (st.container(), st.container()) if ui.presenter() else st.columns([2, 3])
    with left:
        table = st.data_editor(
            TOY_DEFAULT,
            key="_gu_toy",
            hide_index=True,
            width="stretch",
            column_config={
                "p (target)": st.column_config.NumberColumn(min_value=0.0, step=0.01),
                "q (draft)": st.column_config.NumberColumn(min_value=0.0, step=0.01),
            },
        )
    rows = table if isinstance(table, list) else table.to_dict("records")
    try:
        labels = [str(r.get("token") or f"token {i + 1}") for i, r in enumerate(rows)]
        rule = guarantee.toy_rule(
            [float(r["p (target)"] or 0) for r in rows], [float(r["q (draft)"] or 0) for r in rows]
        )
    except (SpecDecError, TypeError, ValueError, KeyError) as error:
        message = str(error) if isinstance(error, SpecDecError) else "every weight must be a number ≥ 0"
        right.error(message, icon=":material/error:")
        return
    ui.chart(charts.toy_chart(labels, rule.target_probs, rule.draft_probs, rule.residual, rule.output),
             container=right)
    cols = st.columns(3)
    cols[0].metric("P(draft accepted) = Σ min(p, q)", f"{rule.accept_probability:.3f}")
    cols[1].metric("P(draw from residual)", f"{1 - rule.accept_probability:.3f}")
    worst = max(abs(a - b) for a, b in zip(rule.output, rule.target_probs, strict=True))
    cols[2].metric("max |output − p|", numbers.figure(worst, 2))
    st.markdown(
        "For each token x: P(output = x) = **min(p(x), q(x))** (drafted and kept) + "
        "**(1 − Σ min(p, q)) · residual(x)** (a rejection, then the residual). Where p > q the residual "
        "tops x up by exactly p(x) − q(x); where q ≥ p the draft alone gives p(x). Sum: p(x)."
    )


def sampled_outcomes(pair: ModelPair) -> None:
    st.header("2 · With the real models")
    st.markdown(
        f"Many short runs of the same prompt, each with its own seed, speculative (drafter "
        f"**{drafter_words(pair.drafter_name)}**) and target-only. Top-k keeps the support small, so a "
        "few hundred samples show the whole distribution. Beside them, a negative control that should "
        "*not* match: the draft alone (each run's first draft, as if every draft were kept)."
    )
    with ui.inputs_box(f"Prompt: {md_escape(st.session_state['_gu_prompt'][:70])}"):
        left, right = st.columns([4, 1])
        left.text_input("Prompt", value=st.session_state["_gu_prompt"], key="_gu_prompt",
                        max_chars=ui.server_limits().max_prompt_chars)
        right.toggle("Chat template", key="_gu_chat", help="off: the model continues the text as it is")
        st.caption(
            "This section samples with its own temperature and top-k, set here (they override the "
            "sidebar's for this section only): a small top-k keeps the outcomes few enough to count."
        )
        cols = st.columns(4)
        samples = int(cols[0].number_input("Samples of each kind (full run)", 10, 2000, 200, step=10,
                                           key="_gu_samples"))
        num_tokens = int(cols[1].selectbox("Tokens per sample", [1, 2], key="_gu_tokens"))
        top_k = cols[2].number_input("Top-k (this section)", 1, 50, 5, key="_gu_topk")
        temperature = cols[3].number_input("Temperature (this section)", 0.1, 2.0, 1.0, step=0.1,
                                           key="_gu_temp")
    chat = bool(st.session_state["_gu_chat"])
    base, prompt_ids = ui.require_prompt(pair, st.session_state["_gu_prompt"], chat, num_tokens + 1)
    # The engine's own rule here, whatever the sidebar's: the other rules are on trial on their own page.
    settings = replace(base, sampling=SamplingConfig(float(temperature), int(top_k), 1.0), rule=SPECULATIVE)
    if base.rule != SPECULATIVE:
        st.caption("This section samples with speculative sampling, whatever the sidebar's rule: the "
                   "other rules are tried on *The rule on trial*.")
    key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings, num_tokens)
    results = st.session_state["_gu_results"]
    quick = min(guarantee.QUICK_SAMPLES, samples)
    pace = f"guarantee:{pair.target.name}:{pair.drafter_name}:{num_tokens}"  # seconds per sample pair
    chosen = ui.quick_full_buttons(("Sample both ways", "b_sample"),
                                   (f"Full run ({samples} each)", "b_gu_full"), "b_gu_stop", "_gu_stop")
    note = st.empty()  # the estimates: written after a run, at the pace it measured
    if chosen:
        planned = quick if chosen == "quick" else samples
        exact = exact_law(pair, prompt_ids, settings, num_tokens)
        ui.run_with_progress(
            guarantee.sample_outcomes(pair, prompt_ids, settings, planned, num_tokens), planned,
            lambda tally: f"{tally.samples} of {planned} each", "_gu_stop",
            lambda tallies, finished: results.__setitem__(key, (tallies[-1], finished)),
            draw=lambda tallies: live_tally(pair, tallies[-1], exact, planned), pace_key=pace,
        )
    ui.note(f"**Sample both ways** is the quick run: {quick} samples of each kind "
            f"({ui.estimate_text(pace, quick)}). The full run takes {samples} of each "
            f"({ui.estimate_text(pace, samples)}) and resolves smaller differences.",
            container=note)
    if key not in results:
        st.info("Press **Sample both ways**.")
        return
    tally, finished = results[key]
    if not finished:
        st.warning(f"Stopped after {tally.samples} samples of each kind.")
    show_tally(pair, tally, exact_law(pair, prompt_ids, settings, num_tokens), samples)


def exact_law(pair: ModelPair, prompt_ids: list[int], settings, num_tokens: int) -> dict:
    """The target's exact law of the outcomes counted (measure.guarantee.exact_outcomes), once per prompt
    and settings: one target pass, or one per first token for two tokens."""
    key = (pair.target.name, tuple(prompt_ids), settings.sampling, num_tokens)
    laws = st.session_state.setdefault("_gu_exact", {})
    if key not in laws:
        laws[key] = guarantee.exact_outcomes(pair, prompt_ids, settings, num_tokens)
    return laws[key]


def tally_chart(pair: ModelPair, tally: guarantee.SampleTally, exact: dict, planned: int | None = None):
    """The sampled outcomes as a figure: the 20 likeliest (by the exact law and the samples), the
    target's exact p, speculative and target only with their sampling error, and the draft alone.
    `planned`: while a run is under way, its size (said in the title)."""
    n_spec, n_plain, n_control = (sum(c.values()) for c in (tally.speculative, tally.target, tally.control))

    def weight(outcome) -> float:
        return exact.get(outcome, 0.0) + tally.speculative[outcome] / n_spec + tally.target[outcome] / n_plain

    outcomes = sorted(set(tally.speculative) | set(tally.target) | set(exact), key=lambda o: -weight(o))[:20]
    names = [" ".join(token_label(pair, t) for t in outcome) for outcome in outcomes]
    so_far = f" (of {planned}, so far)" if planned else ""
    title = f"First {tally.num_tokens} token(s): {n_spec}{so_far} speculative vs {n_plain} target only"
    control = [tally.control[o] / n_control for o in outcomes] if n_control else None
    shares = [[counts[o] / n for o in outcomes] for counts, n in ((tally.speculative, n_spec),
                                                                   (tally.target, n_plain))]
    return charts.empirical_chart(names, *shares, title, control, [exact.get(o, 0.0) for o in outcomes],
                                  (n_spec, n_plain, n_control))


def live_tally(pair: ModelPair, tally: guarantee.SampleTally, exact: dict, planned: int) -> None:
    """What a run draws as its samples arrive: the chart so far and its verdict so far."""
    ui.chart(tally_chart(pair, tally, exact, planned), key=f"_gu_live{tally.samples}")
    st.caption(f"So far: TV {tv_distance(tally.speculative, tally.target):.3f} between speculative and "
               "target only. The verdict, against the noise band, comes when the run ends.")


def show_tally(pair: ModelPair, tally: guarantee.SampleTally, exact: dict, full_samples: int) -> None:
    ui.chart(tally_chart(pair, tally, exact))
    st.markdown(f"Hatched: the target's exact p. Each sample's whisker spans where its share would land "
                f"19 times in 20 with {tally.samples} samples: a bar whose whisker reaches p is p, give or "
                "take sampling.")
    tv = tv_distance(tally.speculative, tally.target)
    test = chi_square_two_sample(tally.speculative, tally.target)
    cols = st.columns(4)
    cols[0].metric("TV distance", f"{tv:.3f}", help="½ Σ |speculative(x) − target(x)|; 0 = identical")
    cols[1].metric("χ² p-value", f"{test.p_value:.2f}",
                   help=f"χ² = {test.statistic:.2f} on {test.dof} dof (rare outcomes pooled)")
    cols[2].metric("Drafts tested", tally.drafted)
    cols[3].metric("Drafts rejected", tally.rejected)
    same, control = guarantee.verdict_words(tally, full_samples)
    st.markdown(f"{same}\n\n{control}")
    st.caption("The noise band is the 95th percentile of the TVs of 200 random re-splits of the two samples "
               "pooled: what sampling alone gives. The χ² p-value is the chance of a gap at least this large "
               "if the two were the same.")
    if tally.drafted == 0:
        st.warning(
            "The drafter proposed nothing for these tokens (an n-gram drafter needs a repeat in "
            "the text), so both runs used the target alone: pick a model drafter to test the rule."
        )


def greedy_equality(pair: ModelPair) -> None:
    st.header("3 · Greedy: token for token")
    st.markdown("At temperature 0 speculative decoding must produce *the same tokens* as the target alone.")
    if pair.target.precision != "float32":
        st.info(f"This target runs in {pair.target.precision} (SPECDEC_DTYPE), not float32. Verification "
                "scores γ+1 tokens in one pass and plain decoding one, and in low precision the two round "
                "differently, so where the top two tokens are nearly tied the greedy texts may part. "
                "The sampled distribution (section 2) is still exactly the target's.",
                icon=":material/info:")
    state = st.session_state
    if ui.run_stop_buttons("Compare greedy outputs", "b_greedy", "b_gu_greedy_stop", "_gu_greedy_stop"):
        settings, greedy_ids = ui.require_prompt(pair, state["prompt"])
        prompt, total = state["prompt"], 2 * settings.max_new_tokens  # both sides' tokens
        ui.run_with_progress(
            guarantee.greedy_steps(pair, greedy_ids, settings), total,
            lambda check: f"{len(check.speculative)} speculative and {len(check.target)} target-only tokens "
            f"of {settings.max_new_tokens} each", "_gu_greedy_stop",
            lambda checks, finished: state.__setitem__("_gu_greedy", (checks[-1], prompt)),
            draw=lambda checks: greedy_texts(pair, checks[-1]), pace_key=f"greedy:{pair.target.name}",
        )
    if "_gu_greedy" not in state:
        return
    check, prompt = state["_gu_greedy"]
    st.caption(f"Prompt (the sidebar's, from Round by round): {prompt[:80]!r} · {len(check.target)} tokens")
    if not check.finished:
        st.warning(f"Stopped: {len(check.speculative)} speculative and {len(check.target)} target-only "
                   "tokens so far.")
    if check.first_difference is None:
        st.success(f"Identical{' so far' if not check.finished else ''}: all "
                   f"{min(len(check.speculative), len(check.target))} tokens match.")
    else:
        i = check.first_difference

        def at(tokens: list[int]) -> str:
            return token_label(pair, tokens[i]) if i < len(tokens) else "(end)"

        st.warning(f"First difference at token {i + 1}: speculative {at(check.speculative)} vs "
                   f"target-only {at(check.target)}.")
        st.markdown(
            "The rule itself is exact; the numbers are not. Verification scores γ+1 tokens in one "
            "batched pass, plain decoding one token per pass, and the two use different matrix shapes "
            "and so different summation orders, so the logits can differ in the last bits: rarely "
            "in fp32 (the target's default, on a CPU and a GPU), often in bf16 (SPECDEC_DTYPE=bfloat16). "
            "Where the top two tokens are nearly tied, the argmax can flip, and from there the texts go "
            "their own ways. Both are correct greedy decodings of slightly different numbers."
        )
    greedy_texts(pair, check)


def greedy_texts(pair: ModelPair, check: guarantee.GreedyCheck) -> None:
    """The two greedy texts side by side, each under a heading (not a caption: presenter mode hides
    captions)."""
    cols = st.columns(2)
    sides = (("Speculative", check.speculative), ("Target alone", check.target))
    for col, (name, tokens) in zip(cols, sides, strict=True):
        col.markdown(f"##### {name} · {len(tokens)} tokens")
        col.code(pair.decode(tokens) or "…", language=None, wrap_lines=True)


ui.init_state()
st.session_state.setdefault("_gu_prompt", guarantee.SAMPLE_PROMPT)
st.session_state.setdefault("_gu_chat", False)
st.session_state.setdefault("_gu_results", {})
intro()
class_poll.ask(class_questions.GUARANTEE)  # the room answers before the playground shows it
toy_playground()
pair = ui.require_pair()
sampled_outcomes(pair)
greedy_equality(pair)
