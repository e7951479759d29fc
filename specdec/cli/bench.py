"""Side-by-side speed: every drafter, with and without adaptive length, vs target-only decoding and
vs Hugging Face assisted generation with the same drafter.

All methods run in one process on the same target, prompts and settings, in rotating order per
prompt, so machine noise hits each alike. Only ratios measured in the same run are reported.
The races are here; their printed tables and the rule that picks a default from reports are in
bench_report.py.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import torch

from specdec.config import Settings
from specdec.core.metrics import speedup_theory, summarize
from specdec.errors import SpecDecError
from specdec.measure.stack import transformers_options
from specdec.model_names import early_exit_layers
from specdec.models.exit_files import is_exit
from specdec.models.feature_head_files import is_head, shipped_head_exists
from specdec.models.loading import cpu_description, gpu_description, shipped_draft_exists
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair, default_drafter
from specdec.models.runs import generate
from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET, HELD_OUT_PROMPT_SETS

DEFAULT_PROMPT_SETS = list(HELD_OUT_PROMPT_SETS.values())

TARGET_ONLY, SPECULATIVE, HF_ASSISTED = "target only", "speculative", "HF assisted"
HEAD_LABELS = ("feature head", "n-gram, then head")  # how a head's rows read: alone, behind lookup


@dataclass(frozen=True)
class Method:
    """One way of decoding that bench times: target-only, or one drafter by us or by transformers."""

    label: str
    kind: str  # TARGET_ONLY, SPECULATIVE or HF_ASSISTED
    drafter: str | None = None  # NGRAM, a draft model's or a feature head's name, maybe after LOOKUP_FIRST
    adaptive: bool = False
    named: bool = False  # the drafter's name joins its label: a bundled drafter of its kind runs too
    gamma: int | None = None  # a draft length of its own (--race-lengths); None: the run's settings'
    draft_threshold: float | None = None
    price_drafts: bool | None = None  # False: drafts priced as if short passes were free
    tree: str | None = None  # a tree of drafts per round (Settings.tree: off, auto or N nodes)

    @property
    def length_note(self) -> str:
        """", γ 3, threshold 0.1" for a row with a draft length of its own (", passes free" where its
        drafts are not priced by the passes, ", tree auto" where it sets Settings.tree); "" at the run's
        settings."""
        note = "" if self.gamma is None else f", γ {self.gamma}"
        note += "" if self.draft_threshold is None else f", threshold {self.draft_threshold:g}"
        note += ", passes free" if self.price_drafts is False else ""
        return note + ("" if self.tree is None else f", tree {self.tree}")

    @property
    def name(self) -> str:
        """The row's name in every report, whatever else raced (its label depends on that): the drafter
        as the command line names it, and the draft length."""
        if self.kind == TARGET_ONLY:
            return TARGET_ONLY
        if self.kind == HF_ASSISTED:
            return f"{HF_ASSISTED}: {self.drafter}"
        return f"{self.drafter}, {'adaptive' if self.adaptive else 'γ fixed'}{self.length_note}"

    def settings(self, run: Settings) -> Settings:
        """The run's settings as this row decodes: its draft length (adaptive or fixed, maybe its own)."""
        own = {"gamma": self.gamma, "draft_threshold": self.draft_threshold,
               "price_drafts": self.price_drafts, "tree": self.tree}
        return replace(run, adaptive=self.adaptive, **{k: v for k, v in own.items() if v is not None})

    def hf_label(self) -> str:
        return f"{HF_ASSISTED}: {self.drafter_label}"

    @property
    def drafter_label(self) -> str:
        if self.drafter == NGRAM:
            return "n-gram"
        model = self.drafter.removeprefix(LOOKUP_FIRST)
        if is_exit(model):  # the untrained exit names its layer, as two of them may race
            layers = early_exit_layers(model)
            kind = f"early exit after layer {layers}" if layers else "exit adapter"
            return f"n-gram, then {kind}" if self.drafter.startswith(LOOKUP_FIRST) else kind
        alone, behind_lookup = HEAD_LABELS if is_head(model) else ("draft model", "n-gram, then model")
        label = behind_lookup if self.drafter.startswith(LOOKUP_FIRST) else alone
        return f"{label} ({Path(model).name})" if self.named else label


def bench_methods(drafters: list[str], with_hf: bool) -> list[Method]:
    """Target-only, then per drafter: fixed γ, adaptive, and (with_hf) transformers' own where it
    has that drafter (it has no lookup-then-model, and no feature head)."""
    methods = [Method(TARGET_ONLY, TARGET_ONLY)]
    for drafter in drafters:
        fixed = Method("", SPECULATIVE, drafter, named=_named(drafter, drafters))
        methods += [replace(fixed, label=f"{fixed.drafter_label}, γ fixed"),
                    replace(fixed, label=f"{fixed.drafter_label}, adaptive", adaptive=True)]
        if with_hf and not drafter.startswith(LOOKUP_FIRST) and not is_head(drafter) and not is_exit(drafter):
            methods.append(Method(fixed.hf_label(), HF_ASSISTED, drafter))
    return methods


def _named(drafter: str, drafters: list[str]) -> bool:
    """Whether a drafter's model name joins its label: a bundled model of its kind races too."""
    bundled = (BUNDLED_DRAFT, BUNDLED_HEAD)
    models = {d.removeprefix(LOOKUP_FIRST) for d in drafters}
    model = drafter.removeprefix(LOOKUP_FIRST)
    bundled_kinds = {is_head(name) for name in bundled if name in models}
    return drafter != NGRAM and model not in bundled and is_head(model) in bundled_kinds


def race_methods(drafters: list[str], adaptive: bool, lengths: list[RaceLength] = (),
                 trees: list[str] = ()) -> list[Method]:
    """Target-only, then each drafter at the run's one draft length, at each of `lengths` ((γ, draft
    threshold, priced), --race-lengths) and with each of `trees` (Settings.tree, --race-trees):
    a shorter race between a few."""
    length = "adaptive" if adaptive else "γ fixed"
    methods = [Method(TARGET_ONLY, TARGET_ONLY)]
    for drafter in drafters:
        method = Method("", SPECULATIVE, drafter, adaptive=adaptive, named=_named(drafter, drafters))
        for gamma, threshold, priced in [(None, None, None), *lengths]:
            row = replace(method, gamma=gamma, draft_threshold=threshold, price_drafts=priced)
            methods.append(replace(row, label=f"{row.drafter_label}, {length}{row.length_note}"))
        for tree in trees:
            row = replace(method, tree=tree)
            methods.append(replace(row, label=f"{row.drafter_label}, {length}{row.length_note}"))
    labels = [m.label for m in methods]
    if len(set(labels)) < len(labels):  # rows are kept by label: two alike would pool their runs
        raise SpecDecError(f"--race names two drafters that read alike: {', '.join(labels[1:])}")
    return methods


def parse_race(text: str) -> list[str]:
    """"ngram+bundled:A,bundled:B" -> the drafters' names; SpecDecError if empty or repeated."""
    drafters = [word.strip() for word in text.split(",")]
    if not all(drafters) or len(set(drafters)) < len(drafters):
        raise SpecDecError(f"--race needs distinct drafter names separated by commas, got {text!r}")
    return drafters


# γ, draft threshold, drafts priced by the passes
RaceLength = tuple[int, float | None, bool | None]


def parse_race_lengths(text: str) -> list[RaceLength]:
    """"3:0.1,5,6:0.1:free" -> [(3, 0.1, None), (5, None, None), (6, 0.1, False)]: draft lengths as γ
    (the cap), optionally the draft threshold, then "free" where drafts are priced as if short passes
    cost nothing (Settings.price_drafts off); SpecDecError on anything else or a value Settings would
    refuse."""
    lengths = []
    for word in text.split(","):
        gamma, threshold, *words = [*word.strip().split(":"), ""]
        words = [w for w in words if w]
        try:
            if words not in ([], ["free"]):
                raise ValueError(word)
            length = (int(gamma), float(threshold) if threshold else None, False if words else None)
        except ValueError:
            message = (f"--race-lengths takes γ or γ:threshold, maybe followed by :free, separated by "
                       f"commas, got {text!r}")
            raise SpecDecError(message) from None
        Settings(gamma=length[0], draft_threshold=0.0 if length[1] is None else length[1])  # checks both
        lengths.append(length)
    return lengths


def parse_race_trees(text: str) -> list[str]:
    """"off,auto,8" -> ["off", "auto", "8"]: Settings.tree values a race runs each drafter with too;
    SpecDecError on a value Settings would refuse, or on one named twice."""
    trees = [word.strip().lower() for word in text.split(",")]
    for tree in trees:
        Settings(tree=tree)  # refuses a bad value in one line
    if len(set(trees)) < len(trees):
        raise SpecDecError(f"--race-trees names a tree twice: {text!r}")
    return trees


def default_method(methods: list[Method], drafter: str, adaptive: bool) -> str | None:
    """The label of the row that decodes as `generate` does by default (its drafter and draft length)."""
    return next((m.label for m in methods if m.kind == SPECULATIVE and m.drafter == drafter
                 and m.adaptive == adaptive and not m.length_note), None)


def bench_drafters(pair: ModelPair) -> list[str]:
    """n-gram lookup; and for each draft model or feature head the pair has loaded: it alone, and
    lookup first, then it. For the bundled target, its shipped draft and head too."""
    models = [m.name for m in (pair.draft, pair.head, *pair.loaded) if m is not None]
    if pair.target.name == BUNDLED_TARGET:
        models += [BUNDLED_DRAFT] if shipped_draft_exists() else []
        models += [BUNDLED_HEAD] if shipped_head_exists() else []
    return [NGRAM] + [d for name in dict.fromkeys(models) for d in (name, LOOKUP_FIRST + name)]


def load_prompt_sets(paths: list[Path] | None) -> dict[str, list[str]]:
    """Each file: {"name": ..., "prompts": [...]}. Returns name -> prompts."""
    sets = {}
    for path in paths or DEFAULT_PROMPT_SETS:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            name, prompts = data["name"], data["prompts"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SpecDecError(f"cannot read prompt set '{path}': expected "
                               '{"name": ..., "prompts": [...]}') from error
        if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
            raise SpecDecError(f"prompt set '{path}' needs a non-empty list of non-empty prompts")
        sets[name] = prompts
    return sets


def hf_assisted_generate(pair: ModelPair, prompt_ids: list[int], settings: Settings) -> tuple[int, float]:
    """transformers' own assisted generation with the same pair, γ and sampling -> (tokens, seconds).

    transformers' runs use the same target model object, so the same matrix layout (kernels.matmul)."""
    model = pair.target.model
    draft = pair.draft.model if pair.draft is not None else None  # None: transformers' prompt lookup
    options = transformers_options(settings, pair.target.tokenizer.eos_token_id, draft)
    input_ids = torch.tensor([prompt_ids], device=model.device)
    torch.manual_seed(settings.seed)  # transformers samples from the global generator
    start = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **options)
    seconds = time.perf_counter() - start
    return output.shape[1] - input_ids.shape[1], seconds


def _describe_drafter(pair: ModelPair) -> str:
    model = pair.head or pair.draft or pair.exit
    if model is None:
        return "n-gram prompt lookup"
    return ("n-gram prompt lookup, then " if pair.lookup_first else "") + model.describe()


def _run(method: Method, pair: ModelPair, prompt_ids: list[int], settings: Settings):
    """-> (tokens, seconds, traces, plain decoding seconds: target-only's steps without the prefill)"""
    pair = pair.with_drafter(method.drafter) if method.drafter else pair
    if method.kind == HF_ASSISTED:
        tokens, seconds = hf_assisted_generate(pair, prompt_ids, settings)
        return tokens, seconds, [], 0.0
    result = generate(pair, prompt_ids, method.settings(settings), speculative=method.kind == SPECULATIVE,
                      detail=False)
    return len(result.token_ids), result.wall_seconds, result.rounds, result.metrics.get("step_seconds", 0.0)


def _rate(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds else 0.0


def run_bench_sets(
    pair: ModelPair,
    prompt_sets: dict[str, list[str]],
    settings: Settings,
    chat: bool,
    repeats: int = 1,
    with_hf: bool = True,
    log: TextIO | None = None,
    race: list[str] | None = None,
    race_lengths: list[RaceLength] = (),
    race_trees: list[str] = (),
) -> dict:
    """Every method on every prompt (see the module's docstring) -> the report `format_bench_table` prints.
    `race`: only these drafters, at the settings' draft length, at each of `race_lengths` and with each
    of `race_trees`. Every drafter is loaded once before the first timed run."""
    drafters = race or bench_drafters(pair)
    for drafter in drafters:  # load each drafter once: later switches between them load nothing
        pair = pair.with_drafter(drafter)
    methods = (race_methods(drafters, settings.adaptive, race_lengths, race_trees) if race
               else bench_methods(drafters, with_hf))
    warmup_ids = pair.encode_prompt("Hello", chat, 8)
    for method in methods:  # first calls pay for lazy initialisation; keep that out of the numbers
        _run(method, pair, warmup_ids, replace(settings, max_new_tokens=8))
    report = {
        "cpu": cpu_description(),
        "gpu": gpu_description(),  # None when the models ran on the CPU
        "target": pair.target.describe(),
        "target_pass_costs": [round(c, 3) for c in pair.target.pass_costs],  # how drafts were priced
        "drafters": {m.drafter_label: _describe_drafter(pair.with_drafter(m.drafter))
                     for m in methods if m.drafter},
        "gamma": settings.gamma,
        "draft_threshold": settings.draft_threshold,
        "temperature": settings.sampling.temperature,
        "top_k": settings.sampling.top_k,
        "top_p": settings.sampling.top_p,
        "max_new_tokens": settings.max_new_tokens,
        "chat": chat,
        "repeats": repeats,
        "methods": [m.label for m in methods],
        "method_names": {m.label: m.name for m in methods},
        "default_method": default_method(methods, default_drafter(pair.target.name), settings.adaptive),
        "sets": {},
    }
    for set_name, prompts in prompt_sets.items():
        tokens = {m.label: 0 for m in methods}
        seconds = {m.label: 0.0 for m in methods}
        traces = {m.label: [] for m in methods}
        plain_step_seconds = 0.0
        for prompt_index, prompt in enumerate(prompts):
            prompt_ids = pair.encode_prompt(prompt, chat, settings.max_new_tokens)
            for repeat in range(repeats):
                shift = (prompt_index + repeat) % len(methods)  # rotate who runs first
                for method in methods[shift:] + methods[:shift]:
                    n, s, t, steps = _run(method, pair, prompt_ids, settings)
                    if log:
                        print(f"    {method.label}: {n} tokens in {s:.2f} s", file=log)
                    tokens[method.label] += n
                    seconds[method.label] += s
                    traces[method.label] += t
                    plain_step_seconds += steps
            if log:
                print(f"  {set_name}: prompt {prompt_index + 1}/{len(prompts)} done", file=log)
        rates = {label: _rate(tokens[label], seconds[label]) for label in tokens}
        plain_step = _rate(plain_step_seconds, tokens[TARGET_ONLY])
        entry = {"prompts": len(prompts), "methods": {}}
        for method in methods:
            row = {"tokens_per_second": rates[method.label],
                   "over_target_only": _rate(rates[method.label], rates[TARGET_ONLY])}
            if method.kind == SPECULATIVE:
                run_traces = traces[method.label]
                metrics, theory = summarize(run_traces), speedup_theory(run_traces, plain_step)
                row |= {
                    "alpha": metrics.alpha,
                    "acceptance_rate": metrics.acceptance_rate,
                    "tokens_per_pass": metrics.tokens_per_pass,
                    "drafted_per_round": metrics.mean_drafted,
                    "cost_ratio": theory.cost_ratio,
                    "verify_cost": theory.verify_cost,
                    "theoretical_speedup": theory.paper,
                    "theoretical_speedup_here": theory.on_this_machine,
                    "rounds": metrics.rounds,
                    "tree_rounds": metrics.tree_rounds,
                }
                if method.hf_label() in rates:
                    row["over_hf_assisted"] = _rate(rates[method.label], rates[method.hf_label()])
            entry["methods"][method.label] = row
        report["sets"][set_name] = entry
    return report


def parse_batch_sizes(text: str) -> list[int]:
    """"1,2,4,8,16" -> [1, 2, 4, 8, 16]; SpecDecError on anything else."""
    try:
        sizes = [int(word) for word in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes) or len(set(sizes)) < len(sizes):
        raise SpecDecError(f"batch-sizes must be distinct whole numbers >= 1 separated by commas, "
                           f"got {text!r}")
    return sizes


def run_batch_bench(pair: ModelPair, prompt_sets: dict[str, list[str]], settings: Settings, chat: bool,
                    batch_sizes: list[int], log: TextIO | None = None) -> dict:
    """Each set decoded in batches of each B, target-only and speculative with the pair's drafter
    (measure.batching): total and per-row tokens/s, their ratio, and one target pass's cost per row.
    At B = 1 the single-sequence loop runs on the same rows too (`single_sequence`)."""
    from specdec.measure.batching import batch_sweep
    from specdec.models.batch_runs import check_batchable

    check_batchable(pair)
    report = {
        "target": pair.target.describe(),
        "target_pass_costs": [round(c, 3) for c in pair.target.pass_costs],  # how drafts were priced
        "drafter": _describe_drafter(pair),
        "gamma": settings.gamma, "adaptive": settings.adaptive, "draft_threshold": settings.draft_threshold,
        "temperature": settings.sampling.temperature, "top_k": settings.sampling.top_k,
        "top_p": settings.sampling.top_p, "max_new_tokens": settings.max_new_tokens, "chat": chat,
        "sets": {},
    }
    for set_name, prompts in prompt_sets.items():
        prompt_ids = [pair.encode_prompt(prompt, chat, settings.max_new_tokens) for prompt in prompts]
        entry = {"prompts": len(prompts), "batch_sizes": {}}
        for point in batch_sweep(pair, prompt_ids, settings, batch_sizes, single=True):
            entry["batch_sizes"][str(point.batch_size)] = point.bench_fields()
            if point.single_sequence_seconds is not None:
                entry["single_sequence"] = {
                    "speculative_tokens_per_second": _rate(point.speculative_tokens,
                                                           point.single_sequence_seconds),
                    "batched_over_single": _rate(point.single_sequence_seconds, point.speculative_seconds),
                }
            if log:
                print(f"  {set_name}: B={point.batch_size} done ({point.rows} rows)", file=log)
        report["sets"][set_name] = entry
    return report
