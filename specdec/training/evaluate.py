"""Figures for a draft model: its cost next to the target's, and how closely it matches p."""

from __future__ import annotations

import json

from specdec.clock import now
from specdec.core.cached_model import CachedModel
from specdec.models.pair import ModelPair
from specdec.paths import HELD_OUT_PROMPT_SETS
from specdec.training.train_draft import evaluate, make_eval_set


def one_token_step_costs(pair: ModelPair, context_ids: list[int], repeats: int = 30) -> dict[str, float]:
    """Seconds per one-token forward with a warm cache, target and draft alternating, same device.

    The draft runs exactly as it drafts (with its reduced head, if it has one).
    """
    cached = {"target": CachedModel(pair.target.model, pair.target.vocab_size),
              "draft": pair.new_drafter().cached}
    for model in cached.values():
        model.extend(context_ids[:-1])
    seconds = dict.fromkeys(cached, 0.0)
    for _ in range(repeats):
        for name, model in cached.items():  # alternate, so machine noise hits both alike
            start = now()
            model.extend(context_ids[-1:])
            seconds[name] += now() - start
            model.rollback(len(context_ids) - 1)
    per_token = {name: s / repeats for name, s in seconds.items()}
    return {
        "target_ms": per_token["target"] * 1000,
        "draft_ms": per_token["draft"] * 1000,
        "cost_ratio": per_token["draft"] / per_token["target"],
    }


def draft_figures(pair: ModelPair, eval_tokens: int = 96, sampled: bool = False) -> dict:
    """Cost ratio, and Σ min(p, q) at T=1 and greedy agreement on the held-out prompt sets.

    The held-out prompts (assets/prompts/) are never used for training; the target answers them
    greedily (`sampled`: at T = 1, the text T = 1 drafting meets) and p is its distribution along that
    answer. Σ min(p, q) is the chance a draft is accepted at T = 1; the agreement, at T = 0.
    """
    context = pair.encode_prompt("Write a Python function that adds two numbers.", chat=True)
    figures = {"cost": one_token_step_costs(pair, context), "answers": "sampled" if sampled else "greedy"}
    for name, path in HELD_OUT_PROMPT_SETS.items():
        prompts = json.loads(path.read_text(encoding="utf-8"))["prompts"]
        eval_set = make_eval_set(pair.target, prompts, eval_tokens, sampled)
        figures[name] = evaluate(pair.draft.model, eval_set, pair.target.vocab_size,
                                 pair.draft.head_token_ids)
    return figures


def format_figures(figures: dict) -> str:
    cost = figures["cost"]
    lines = [
        f"forward, 1 token with cache: target {cost['target_ms']:.1f} ms, draft {cost['draft_ms']:.1f} ms"
        f" -> cost ratio c = {cost['cost_ratio']:.3f} (1/{1 / cost['cost_ratio']:.1f})",
    ]
    lines.append(f"along the target's {figures['answers']} answers to the held-out prompts:")
    for name in HELD_OUT_PROMPT_SETS:
        scores = figures[name]
        lines.append(f"{name:<6} held-out: mean Σ min(p, q) at T=1 = {scores['sum_min_pq']:.3f}, "
                     f"greedy agreement = {scores['greedy_agreement']:.3f}")
    return "\n".join(lines)

