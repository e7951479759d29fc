"""One run = one pair, one prompt, one settings object, one seed: the API the CLI and the app use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from specdec.clock import now
from specdec.config import Settings
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import Drafter
from specdec.core.metrics import summarize
from specdec.core.records import RoundTrace, TargetStep
from specdec.core.rounds import prefill, speculative_rounds, target_only_steps
from specdec.models.pair import ModelPair


def _generator(seed: int) -> torch.Generator:
    """Each run owns its generator: runs never share random state, and a seed replays exactly."""
    return torch.Generator().manual_seed(seed)


@dataclass
class RunModels:
    """One run's view of the pair: the target with a fresh KV cache, and a fresh drafter."""

    target: CachedModel
    drafter: Drafter

    @classmethod
    def of(cls, pair: ModelPair) -> RunModels:
        target = pair.new_target()
        return cls(target, pair.new_drafter(target))

    def prefill(self, prompt_ids: list[int], chunk_size: int) -> Iterator[float]:
        """Both caches fed the prompt in chunks (see core.rounds.prefill); after every pass, yields
        the fraction of the work done (the target's share counts like the draft's, token for token)."""
        draft_cache = getattr(self.drafter, "cached", None)  # a drafter with a model has one
        caches = [self.target] + ([draft_cache] if draft_cache is not None else [])
        per_cache = max(len(prompt_ids) - 1, 1)
        for number, cache in enumerate(caches):
            for fed in prefill(cache, prompt_ids, chunk_size):
                yield (number * per_cache + fed) / (len(caches) * per_cache)


def rounds(
    pair: ModelPair,
    prompt_ids: list[int],
    settings: Settings,
    models: RunModels | None = None,
    detail: bool = True,
) -> Iterator[RoundTrace]:
    """Speculative decoding, one trace per round, with fresh caches (or `models`, maybe prefilled)
    and a fresh generator for this run. `detail` = False: lean traces, for runs nobody steps through."""
    models = models or RunModels.of(pair)
    return speculative_rounds(models.target, models.drafter, prompt_ids, settings,
                              _generator(settings.seed), pair.stop_token_ids, detail)


def target_steps(pair: ModelPair, prompt_ids: list[int], settings: Settings) -> Iterator[TargetStep]:
    """Plain decoding with the target alone, one record per token."""
    target = CachedModel(pair.target.model, pair.target.vocab_size)
    return target_only_steps(
        target, prompt_ids, settings.sampling, _generator(settings.seed),
        settings.max_new_tokens, pair.stop_token_ids,
    )


@dataclass
class GenerationResult:
    token_ids: list[int]
    text: str
    rounds: list[RoundTrace]  # empty for target-only decoding
    metrics: dict
    wall_seconds: float

    def to_dict(self) -> dict:
        return {
            "token_ids": self.token_ids,
            "text": self.text,
            "rounds": [r.to_dict() for r in self.rounds],
            "metrics": self.metrics,
            "wall_seconds": self.wall_seconds,
        }


def generate(
    pair: ModelPair,
    prompt_ids: list[int],
    settings: Settings,
    speculative: bool = True,
    on_tokens: Callable[[int], None] | None = None,
    detail: bool = True,
) -> GenerationResult:
    """Run to the end. `on_tokens(n)` is told how many tokens each pass produced (progress bars);
    `detail` = False keeps lean traces (no top-token tables: see speculative_rounds)."""
    start = now()
    if speculative:
        traces = []
        for trace in rounds(pair, prompt_ids, settings, detail=detail):
            traces.append(trace)
            if on_tokens:
                on_tokens(len(trace.emitted_tokens))
        token_ids = [t for trace in traces for t in trace.emitted_tokens]
        wall = now() - start
        metrics = summarize(traces, wall).to_dict()
    else:
        traces, token_ids, step_seconds = [], [], 0.0
        for step in target_steps(pair, prompt_ids, settings):
            token_ids.append(step.token)
            step_seconds += step.seconds
            if on_tokens:
                on_tokens(1)
        wall = now() - start
        metrics = {
            "tokens_emitted": len(token_ids),
            "tokens_per_pass": 1.0,
            "tokens_per_second": len(token_ids) / wall if wall else 0.0,
            "step_seconds": step_seconds,  # the decoding steps alone, prefill left out
        }
    return GenerationResult(token_ids, pair.decode(token_ids), traces, metrics, wall)
