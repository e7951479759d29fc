"""Side-by-side speed: speculative vs target-only vs Hugging Face assisted generation.

All three run in one process on the same pair, prompts and settings, in rotating order per prompt,
so machine noise hits each method alike. Only ratios measured in the same run are reported.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

import torch

from specdec.config import Settings
from specdec.core.metrics import speedup_theory, summarize
from specdec.errors import SpecDecError
from specdec.models.pair import ModelPair
from specdec.models.runs import generate
from specdec.paths import HELD_OUT_PROMPT_SETS

DEFAULT_PROMPT_SETS = list(HELD_OUT_PROMPT_SETS.values())
METHODS = ("speculative", "target_only", "hf_assisted")


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
    """transformers' own assisted generation with the same pair, γ and sampling -> (tokens, seconds)."""
    model = pair.target.model
    sampling = settings.sampling
    options = {"max_new_tokens": settings.max_new_tokens, "do_sample": not sampling.greedy}
    if not sampling.greedy:
        options.update(temperature=sampling.temperature, top_k=sampling.top_k or None,
                       top_p=sampling.top_p)
    if pair.draft is None:
        options.update(prompt_lookup_num_tokens=settings.gamma, max_matching_ngram_size=3)
    else:
        # A fixed γ, like ours (transformers otherwise adapts the number of drafted tokens).
        pair.draft.model.generation_config.num_assistant_tokens = settings.gamma
        pair.draft.model.generation_config.num_assistant_tokens_schedule = "constant"
        pair.draft.model.generation_config.assistant_confidence_threshold = 0.0
        options["assistant_model"] = pair.draft.model
    input_ids = torch.tensor([prompt_ids], device=model.device)
    torch.manual_seed(settings.seed)  # transformers samples from the global generator
    start = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                pad_token_id=pair.target.tokenizer.eos_token_id, **options)
    seconds = time.perf_counter() - start
    return output.shape[1] - input_ids.shape[1], seconds


def _run_method(method: str, pair: ModelPair, prompt_ids: list[int], settings: Settings):
    """-> (tokens, seconds, traces, plain decoding seconds: target-only's steps without the prefill)"""
    if method == "hf_assisted":
        tokens, seconds = hf_assisted_generate(pair, prompt_ids, settings)
        return tokens, seconds, [], 0.0
    result = generate(pair, prompt_ids, settings, speculative=method == "speculative")
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
) -> dict:
    methods = METHODS if with_hf else METHODS[:2]
    warmup_ids = pair.encode_prompt("Hello", chat, 8)
    for method in methods:  # first calls pay for lazy initialisation; keep that out of the numbers
        _run_method(method, pair, warmup_ids, Settings(settings.gamma, settings.sampling, 8))
    report = {
        "target": pair.target.describe(),
        "drafter": pair.draft.describe() if pair.draft else "n-gram prompt lookup",
        "gamma": settings.gamma,
        "temperature": settings.sampling.temperature,
        "top_k": settings.sampling.top_k,
        "top_p": settings.sampling.top_p,
        "max_new_tokens": settings.max_new_tokens,
        "chat": chat,
        "repeats": repeats,
        "sets": {},
    }
    for set_name, prompts in prompt_sets.items():
        tokens = dict.fromkeys(methods, 0)
        seconds = dict.fromkeys(methods, 0.0)
        traces, plain_step_seconds = [], 0.0
        for prompt_index, prompt in enumerate(prompts):
            prompt_ids = pair.encode_prompt(prompt, chat, settings.max_new_tokens)
            for repeat in range(repeats):
                shift = (prompt_index + repeat) % len(methods)  # rotate who runs first
                for method in methods[shift:] + methods[:shift]:
                    n, s, t, steps = _run_method(method, pair, prompt_ids, settings)
                    tokens[method] += n
                    seconds[method] += s
                    traces += t
                    plain_step_seconds += steps
            if log:
                print(f"  {set_name}: prompt {prompt_index + 1}/{len(prompts)} done", file=log)
        rates = {m: _rate(tokens[m], seconds[m]) for m in methods}
        metrics = summarize(traces)
        plain_step = plain_step_seconds / tokens["target_only"] if tokens["target_only"] else 0.0
        theory = speedup_theory(traces, plain_step)
        entry = {
            "prompts": len(prompts),
            "tokens_per_second": rates,
            "speculative_over_target_only": _rate(rates["speculative"], rates["target_only"]),
            "alpha": metrics.alpha,
            "acceptance_rate": metrics.acceptance_rate,
            "tokens_per_pass": metrics.tokens_per_pass,
            "drafted_per_round": metrics.mean_drafted,
            "cost_ratio": theory.cost_ratio,
            "verify_cost": theory.verify_cost,
            "theoretical_speedup": theory.paper,
            "theoretical_speedup_here": theory.on_this_machine,
        }
        if with_hf:
            entry["speculative_over_hf_assisted"] = _rate(rates["speculative"], rates["hf_assisted"])
        report["sets"][set_name] = entry
    return report


def format_bench_table(report: dict) -> str:
    lines = [
        f"target: {report['target']}",
        f"drafter: {report['drafter']}",
        f"gamma={report['gamma']} temperature={report['temperature']} top_k={report['top_k']} "
        f"top_p={report['top_p']} max_new_tokens={report['max_new_tokens']} chat={report['chat']} "
        f"repeats={report['repeats']}",
        "",
        f"{'set':<10} {'spec tok/s':>10} {'target tok/s':>12} {'HF tok/s':>9} "
        f"{'spec/target':>11} {'spec/HF':>8} {'alpha':>6} {'drafts/rnd':>10} {'tok/pass':>8} "
        f"{'theory':>7} {'here':>6}",
    ]
    for name, entry in report["sets"].items():
        rates = entry["tokens_per_second"]
        hf_rate = f"{rates['hf_assisted']:.1f}" if "hf_assisted" in rates else "-"
        hf_ratio = f"{entry['speculative_over_hf_assisted']:.2f}x" if "hf_assisted" in rates else "-"
        lines.append(
            f"{name:<10} {rates['speculative']:>10.1f} {rates['target_only']:>12.1f} {hf_rate:>9} "
            f"{entry['speculative_over_target_only']:>10.2f}x {hf_ratio:>8} {entry['alpha']:>6.2f} "
            f"{entry['drafted_per_round']:>10.2f} {entry['tokens_per_pass']:>8.2f} "
            f"{entry['theoretical_speedup']:>6.2f}x {entry['theoretical_speedup_here']:>5.2f}x"
        )
    lines.append(
        "theory: the expected speed-up E[tokens/pass] / (k̄c + v) from the measured alpha, drafts per "
        "round and cost ratio c (one drafted token / one plain step), with v = 1 as in the paper; "
        "here: with v measured (the rounds' verify time / one plain step; on a CPU v > 1)."
    )
    return "\n".join(lines)
