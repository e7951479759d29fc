"""The rule on trial: four acceptance rules side by side, and the exact rule at every temperature."""

from dataclasses import asdict, replace

import streamlit as st

from app_pages import class_poll, rule_exact, rule_trees, ui
from app_pages.words import drafter_words
from specdec.config import RULE_NAMES, SamplingConfig, Settings
from specdec.core.acceptance import RULES, TYPICAL_DELTA, TYPICAL_EPSILON
from specdec.errors import SpecDecError
from specdec.measure import exact, rules
from specdec.models.pair import ModelPair
from specdec.views import charts, class_questions, numbers

# A quick default run, with the time left shown as it runs: enough samples at the first ready prompt to
# catch Medusa's rule, keep both lossless rules inside the noise band, and say why the top choice's
# smaller loss is not caught there (and offer the position where it shows); the timings are in
# docs/LOG.md, "Figures that lived in code comments".
DEFAULT_SAMPLES = 80
QUIZ_DISTRACTOR = "speculation only applies at temperature zero"


def intro() -> None:
    st.title("The rule on trial")
    st.markdown(
        "Speculative decoding keeps drafts by the rejection-sampling rule, *not* by asking \"does the "
        "top choice match\": a rule that preserves the target's own distribution. Here that rule stands "
        "beside the rules people write instead. Each judges the same drafts; the lossless ones emit "
        "exactly what the target alone would, the lossy ones trade that for acceptance."
    )
    st.table([{
        "rule": rule.title,
        "a draft x is kept if": rule.test,
        "expected acceptance": rule.expected_formula,
        "lossless": "yes" if rule.lossless else "⚠ no (lossy)",
    } for rule in RULES.values()])
    st.caption(
        "p: the target's distribution, q: the draft's, both after the same temperature and top-k/top-p; "
        f"H(p): p's entropy. Typical acceptance uses Medusa's defaults (ε = {TYPICAL_EPSILON}, "
        f"δ = {TYPICAL_DELTA}) and, after a "
        "miss, draws from p cut to its typical tokens, as Medusa does. At temperature 0 every rule is "
        "the greedy rule."
    )


def trial_section(pair: ModelPair) -> tuple[list[int], Settings, int] | None:
    """The four rules sampled side by side -> (the token ids read, settings, samples) for section 2."""
    st.header("1 · The rules on one prompt")
    prompt = st.session_state["prompt"]
    st.markdown(
        f"Many short samples of the sidebar's prompt (from *Round by round*) with drafter "
        f"**{drafter_words(pair.drafter_name)}**: each rule, and the target alone in two independent halves. "
        "In each "
        "sample the draft proposes and the target scores once; every rule then judges those same drafts "
        "with its own random draws. How far apart the target's halves fall (the TV of 95 % of re-splits "
        "of their outcomes stays inside it) is the **noise band**: what sampling alone gives."
    )
    ui.note(f"Prompt: {prompt[:100]!r}")
    with ui.inputs_box("Samples, tokens, top-k and temperature"):
        cols = st.columns(4)
        samples = int(cols[0].number_input("Samples of each kind", 10, 2000, DEFAULT_SAMPLES, step=10,
                                           key="_rt_samples"))
        num_tokens = int(cols[1].selectbox("Tokens compared", [1, 2], key="_rt_tokens"))
        top_k = int(cols[2].number_input("Top-k (this section)", 1, 50, 5, key="_rt_topk",
                                         help="a small top-k keeps the outcomes few to count"))
        temperature = float(cols[3].number_input("Temperature (this section)", 0.0, 2.0, 1.0,
                                                 step=0.1, key="_rt_temp"))
    room = max(int(st.session_state["gamma"]), num_tokens) + 1  # one round: γ drafts and its own token
    base, prompt_ids = ui.require_prompt(pair, prompt, new_tokens=room)
    try:
        settings = replace(base, sampling=SamplingConfig(temperature, top_k, base.sampling.top_p))
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        return None
    context, position = rule_exact.trial_context(prompt_ids, settings)
    key = (pair.target.name, pair.drafter_name, tuple(context), settings, samples, num_tokens)
    results = st.session_state["_rt_results"]
    pressed = ui.run_stop_buttons("Put the rules on trial", "b_rt_run", "b_rt_stop", "_rt_stop")
    pace = f"trial:{pair.target.name}:{pair.drafter_name}:{num_tokens}"  # seconds per sample
    if st.session_state.pop("_rt_autorun", False) or pressed:
        try:
            steps = rules.rule_trial(pair, context, settings, samples, num_tokens)
            ui.run_with_progress(
                steps, samples, lambda trial: f"{trial.samples} of {samples} samples of each kind",
                "_rt_stop",
                lambda trials, done: results.__setitem__(key, (trials[-1], done)),
                draw=lambda trials: live_trial(trials[-1]), pace_key=pace,
            )
        except SpecDecError as error:
            st.error(str(error), icon=":material/error:")
            return None
    if key not in results:
        st.info(f"Press **Put the rules on trial** ({samples} samples of each of {len(RULE_NAMES)} rules and "
                f"of the target: {ui.estimate_text(pace, samples)}).")
        return context, settings, samples
    trial, finished = results[key]
    rows = [asdict(r) for r in rules.trial_results(trial)]
    if not finished:
        st.warning(f"Stopped after {trial.samples} samples of each kind: the numbers below are from those.")
    show_trial(rows, temperature)
    rule_exact.exact_section(pair, trial, rows, prompt_ids, position)
    return context, settings, samples


def live_trial(trial) -> None:
    """What a trial draws as its samples arrive: each rule's TV so far against the noise band so far."""
    rows = [asdict(r) for r in rules.trial_results(trial)]
    if rows:
        ui.chart(charts.rule_trial_chart(rows, rows[0]["tv_noise_band"]), key=f"_rt_live{trial.samples}")


def band_cell(tv: float, band: float) -> str:
    """Inside the noise band, or how far outside (as a multiple of its edge, where it has one)."""
    if tv <= band:
        return "yes"
    return f"no, {tv / band:.1f}× its edge" if band else "no"


def show_trial(rows: list[dict], temperature: float) -> None:
    floor, band = rows[0]["tv_noise_floor"], rows[0]["tv_noise_band"]
    st.table([{  # a table, not a data frame: every column in view, none behind a scroll bar
        "rule": row["title"] + ("" if row["lossless"] else " ⚠ lossy"),
        "acceptance α": f"{row['alpha']:.3f}",
        "α expected": f"{row['expected_alpha']:.3f}",
        "1st draft kept": f"{row['first_acceptance']:.3f}",
        "expected there": f"{row['first_expected']:.3f}",
        "tokens / pass": f"{row['tokens_per_pass']:.2f}",
        "speed-up": f"{row['speedup']:.2f}×",
        "TV from target": f"{row['tv']:.3f}",
        "TV exact": "–" if row["tv_exact"] is None else f"{row['tv_exact']:.3f}",
        "in noise band": band_cell(row["tv"], band),
        "χ² p-value": numbers.p_value(row["chi2_p"]),
    } for row in rows])
    ui.chart(charts.rule_trial_chart(rows, band))
    st.markdown(
        f"Noise band (the target's two halves, re-split 200 times): TV 0 to **{band:.3f}** (mean "
        f"{floor:.3f}). A lossless rule falls inside it about 19 times in 20, and outside it 1 time in 20 "
        f"by chance alone. This run: {charts.band_headline(rows, band)}."
    )
    with st.expander("Where the expected figures come from"):
        st.markdown(
            "*Expected* acceptance comes from p and q alone: at the first draft, where every sample has the "
            "same p and q, Σ min(p, q) for speculative sampling, Σ p·q for sample-and-compare, q(argmax p) "
            "for the top choice and Σ q over the typical tokens for Medusa's rule; α expected averages the "
            "same quantity over every draft tested. Speed-up: these short samples' tokens per second over "
            "the target alone's, on the same clock."
        )
    kind, words = exact.trial_verdict(rows, temperature == 0)  # from the samples: never beside its contrary
    if kind == "caught":
        st.error(words, icon=":material/gavel:")
    else:
        st.info(words, icon=":material/info:")


def sweep_section(pair: ModelPair) -> None:
    st.header("4 · The exact rule at every temperature")
    st.markdown(
        f"A classic wrong answer: \"{QUIZ_DISTRACTOR}\". Here is speculative sampling on the held-out "
        f"code and prose prompts at T = {', '.join(f'{t:g}' for t in rules.SWEEP_TEMPERATURES)}. The "
        "target alone runs beside it, with the sidebar's other settings."
    )
    with ui.inputs_box("Prompts per set and new tokens"):
        cols = st.columns(3)
        per_set = int(cols[0].number_input("Prompts per set", 1, 6, 2, key="_rt_per_set"))
        new_tokens = int(cols[1].number_input("New tokens per prompt", 8, 256, 48, key="_rt_sweep_tokens"))
    chat = bool(st.session_state["chat"])
    try:
        settings = replace(ui.current_settings(), max_new_tokens=new_tokens)
        prompt_sets = rules.sweep_prompt_sets(per_set=per_set)
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
        return
    total = per_set * len(prompt_sets) * len(rules.SWEEP_TEMPERATURES)
    key = (pair.target.name, pair.drafter_name, settings, per_set, chat)
    results = st.session_state["_rt_sweep"]
    pace = f"sweep:{pair.target.name}:{pair.drafter_name}:{settings.gamma}"  # seconds per prompt run
    if ui.run_stop_buttons("Sweep the temperature", "b_rt_sweep", "b_rt_sweep_stop", "_rt_sweep_stop"):
        try:
            ui.run_with_progress(
                rules.temperature_sweep(pair, prompt_sets, settings, chat), total,
                lambda row: f"T = {row['temperature']:g}, {row['category']} prompt {row['prompt']}",
                "_rt_sweep_stop", lambda rows, finished: results.__setitem__(key, (list(rows), finished)),
                draw=lambda rows: ui.chart(charts.temperature_sweep_chart(rules.sweep_summary(rows)),
                                           key=f"_rt_sweep_live{len(rows)}"),
                pace_key=pace,
            )
        except SpecDecError as error:
            st.error(str(error), icon=":material/error:")
            return
    if key not in results:
        st.info(f"Press **Sweep the temperature** ({total} prompt runs, each speculative and target-only: "
                f"{ui.estimate_text(pace, total)}).")
        return
    rows, finished = results[key]
    if not finished:
        st.warning(f"Stopped after {len(rows)} of {total} prompt runs.")
    summary = rules.sweep_summary(rows)
    st.dataframe([{
        "T": row["temperature"], "set": row["category"], "prompts": row["prompts"],
        "α measured": round(row["alpha"], 3), "α expected (Σ min(p, q))": round(row["expected_alpha"], 3),
        "tokens / pass": round(row["tokens_per_pass"], 2), "speed-up": f"{row['speedup']:.2f}×",
    } for row in summary], hide_index=True, width="stretch")
    ui.chart(charts.temperature_sweep_chart(summary))
    hot = [r for r in summary if r["temperature"] > 0]
    if not hot:
        return
    low = min(hot, key=lambda r: r["speedup"])
    where = f"**{low['speedup']:.2f}×** ({low['category']}, T = {low['temperature']:g})"
    alphas = [r["alpha"] for r in hot]
    accepts = (f"Above temperature 0 the exact rule still accepts drafts (α {min(alphas):.2f} to "
               f"{max(alphas):.2f}, where Σ min(p, q) puts it)")
    speed = (f" and still speeds things up: its lowest speed-up here is {where}." if low["speedup"] >= 1
             else f". Its lowest speed-up here is {where}: a speed-up needs acceptance high enough to pay "
             "for the drafting, at any temperature (and few prompts of few tokens make these numbers noisy).")
    st.markdown(
        accepts + speed + " Acceptance moves with the temperature because p and q change shape with it; "
        "nothing in the rule needs T = 0, and it is exact at every temperature."
    )

ui.init_state()
st.session_state.setdefault("_rt_results", {})
st.session_state.setdefault("_rt_sweep", {})
intro()
class_poll.ask(class_questions.RULE_TRIAL, missing="Put the rules on trial first: the trial answers it.",
               reveal=lambda: class_questions.caught_truth([asdict(r) for r in rules.trial_results(
                   class_poll.last_run(st.session_state["_rt_results"]))]) if st.session_state["_rt_results"]
               else None)
pair = ui.require_pair()
at = trial_section(pair)
if at is not None:
    rule_exact.own_rule_section(pair, *at)
    rule_trees.tree_rules_section(pair, *at)
sweep_section(pair)
