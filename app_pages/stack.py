"""In your stack: the same pair in transformers (run live), vLLM and llama.cpp, the engines' metric
words mapped to this app's, and the tokenizer requirement checked for any model."""

import pandas as pd
import streamlit as st

from app_pages import ui
from specdec.errors import SpecDecError
from specdec.measure import stack
from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET
from specdec.views.engine_words import (
    engine_counts,
    llamacpp_lines,
    sglang_line,
    translations,
    trap_questions,
    vllm_line,
)

NOT_RUN_HERE = "Not run here: this server has no GPU and neither engine installed."


def figures_so_far(figures: dict[str, float]) -> None:
    """While the live run goes on: each engine's figure as its stage ends."""
    cols = st.columns(4)
    for col, name in zip(cols, (stack.TRANSFORMERS_ALONE, stack.TRANSFORMERS_ASSISTED, stack.SPECDEC_ALONE,
                                stack.SPECDEC_SPECULATIVE), strict=True):
        col.metric(name, f"{figures[name]:.1f} tok/s" if name in figures else "…")


st.title("In your stack")
st.markdown(
    "Hosted APIs already speculate for you. If you serve models yourself, transformers, vLLM and "
    "llama.cpp can all do it, and each needs the same thing: **a small model that shares the target's "
    "tokenizer**. Here is the current pair in each of them, with this app's numbers beside theirs."
)
pair = ui.require_pair()
settings, prompt_ids = ui.require_prompt(pair, st.session_state["prompt"])
try:
    assistant = stack.assistant_for(pair)
except SpecDecError as error:
    st.warning(str(error), icon=":material/info:")
    st.stop()
target_name = pair.target.name
# The bundled models as a user of another stack names them: the target's hub id, the exported draft.
bundled_draft = pair.draft is not None and pair.draft.name == BUNDLED_DRAFT
shown_assistant = "./smollm2-draft" if bundled_draft else assistant
shown_target = "HuggingFaceTB/SmolLM2-135M-Instruct" if target_name == BUNDLED_TARGET else target_name

st.subheader("transformers: assisted generation")
st.code(stack.transformers_code(shown_target, shown_assistant, settings), language="python")
if bundled_draft:
    st.caption("`./smollm2-draft` is the trained draft as a standard transformers folder: "
               "`python -m specdec export-draft ./smollm2-draft` writes it (a full-vocabulary head, "
               "no specdec code needed to load it).")
run_key = (pair.target.name, pair.drafter_name, tuple(prompt_ids), settings)
pace = f"stack:{pair.target.name}:{pair.drafter_name}"  # seconds per new token, all stages together
weights = stack.stage_weights(settings)
if ui.run_stop_buttons("Run it on this prompt", "b_stack_run", "b_stack_stop", "_stack_stop"):
    st.session_state.pop("stack_run", None)
    try:
        ui.run_with_progress(
            stack.stack_steps(pair, prompt_ids, settings), len(weights),
            lambda step: f"{step.stage}: done", "_stack_stop",
            lambda steps, finished: st.session_state.__setitem__("stack_run", steps[-1].run),
            weights, draw=lambda steps: figures_so_far(steps[-1].figures), pace_key=pace,
        )
    except SpecDecError as error:
        st.error(str(error), icon=":material/error:")
run = st.session_state.get("stack_run")
if run is None:
    st.info("Press **Run it on this prompt**: the same prompt and settings, through transformers and "
            "through specdec. Each runs with and without speculation "
            f"({ui.estimate_text(pace, sum(weights))}).")
else:
    cols = st.columns(4)
    cols[0].metric("transformers, target alone", f"{run.transformers_target_only:.1f} tok/s")
    cols[1].metric("transformers, assisted", f"{run.transformers_assisted:.1f} tok/s",
                   f"{run.transformers_assisted / run.transformers_target_only:.2f}× the target alone",
                   delta_color="off", delta_arrow="off")
    cols[2].metric("specdec, target alone", f"{run.specdec_target_only:.1f} tok/s")
    cols[3].metric("specdec, speculative", f"{run.specdec_speculative:.1f} tok/s",
                   f"{run.specdec_speculative / run.specdec_target_only:.2f}× the target alone",
                   delta_color="off", delta_arrow="off")
    why = stack.assisted_words(run)
    if why:
        st.markdown(why)
    if settings.sampling.greedy:
        verdict = "the same tokens as" if run.same_text else "different tokens from"
        st.caption(f"Greedy: transformers' assisted output has {verdict} the target decoding alone.")
    lookup = " (with n-gram lookup first, which transformers has no way to combine with a model)" \
        if pair.lookup_first else ""
    st.caption(f"transformers drafted with {run.assistant}; specdec with the sidebar's drafter{lookup}. Each "
               f"figure is one run on this server ({run.device}, both engines alike), timed one after "
               "another: expect noise.")

st.subheader("vLLM")
st.code(stack.vllm_command(shown_target, shown_assistant, settings.gamma), language="bash")
st.caption(f"Needs a CUDA GPU (or vLLM's CPU build), vLLM, and the target and draft as transformers "
           f"folders or hub ids. `draft_model` drafts with a small model, `ngram` copies from the prompt, "
           f"`eagle` runs a feature head like this app's. {NOT_RUN_HERE}")

st.subheader("llama.cpp")
if target_name == BUNDLED_TARGET:
    draft_gguf = f"./smollm2-draft/{stack.GGUF_NAME}"
    commands = "\n".join([stack.TARGET_GGUF_HINT, stack.DRAFT_GGUF_HINT,
                          stack.llamacpp_command(settings.gamma, draft_gguf)])
    st.code(commands, language="bash")
    st.caption("Needs llama.cpp built (`llama-server`) and both models as GGUF files. The target's is the "
               "bundled Q4_1 file; the draft's comes from `export-draft --gguf` (F32, llama.cpp's tensor "
               "names, the target's tokenizer). llama.cpp drafts greedily and keeps drafts while they match "
               "the target's sample. Not run by this page: `scripts/llama_cpp_check.py` runs it through "
               "llama-cpp-python, and docs/howto/export.md has what it measured. There the F32 draft reads "
               "more bytes per token than the 4-bit target, so speculation did not pay: it pays only where "
               "verifying is dear next to drafting.")
else:
    st.caption("llama.cpp reads GGUF files: convert both models with llama.cpp's `convert_hf_to_gguf.py`, "
               "then `llama-server -m target.gguf -md draft.gguf --draft-max γ`. " + NOT_RUN_HERE)

st.markdown(stack.EARLY_EXIT_ENGINES)

st.subheader("The engines' words")
if run is None or not run.speculative.traces:
    st.info("Run the pair above: its specdec rounds are then printed here the way each engine logs them.")
else:
    counts = engine_counts(run.speculative.traces, run.speculative.seconds)
    st.markdown("This run's rounds, as each engine would log them:")
    st.code(f"# vLLM\n{vllm_line(counts)}\n\n# llama.cpp (llama-server)\n{llamacpp_lines(counts)}\n\n"
            f"# SGLang\n{sglang_line(counts)}", language="text", wrap_lines=True)
    rows = [{"engine": t.engine, "figure": t.figure, "value": t.value, "computed as": t.formula,
             "in this app": t.here} for t in translations(counts)]
    st.table(pd.DataFrame(rows), hide_index=True)  # a table: long cells wrap instead of being cut off
    st.markdown("**Two traps.** Answer from the lines above.")
    for number, question in enumerate(trap_questions(counts)):
        choice = st.radio(question.question, question.options, index=None, key=f"stack_quiz_{number}")
        if choice is not None:
            if question.options.index(choice) == question.answer:
                st.success(f"Right. {question.explanation}", icon=":material/check:")
            else:
                st.error(f"Not quite: it is {question.options[question.answer]}. {question.explanation}",
                         icon=":material/close:")

st.subheader("Can it draft for this target?")
st.markdown(f"Name a model: a Hugging Face id in this server's cache, or a folder. The pair check reads its "
            f"tokenizer and compares it with **{target_name}**'s.")
with st.form("pair_check"):
    name = st.text_input("Draft model", placeholder="HuggingFaceTB/SmolLM2-135M or /path/to/folder")
    checked = st.form_submit_button("Check")
if checked:
    verdict = stack.check_drafter(pair, name)
    (st.success if verdict.can_draft else st.error)(verdict.reason)
