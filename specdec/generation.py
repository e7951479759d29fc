"""One run = one pair, one prompt, one settings object, one seed: the API the CLI and the app use."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from specdec.cached_model import CachedModel
from specdec.errors import SpecDecError
from specdec.metrics import summarize
from specdec.pair import ModelPair
from specdec.rounds import RoundTrace, TargetStep, speculative_rounds, target_only_steps
from specdec.sampling import SamplingConfig


@dataclass(frozen=True)
class Settings:
    gamma: int = 4  # drafted tokens per round (γ in the paper, k in the app)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    max_new_tokens: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.gamma < 1:
            raise SpecDecError(f"gamma must be >= 1, got {self.gamma}")
        if self.max_new_tokens < 1:
            raise SpecDecError(f"max-new-tokens must be >= 1, got {self.max_new_tokens}")


def _generator(seed: int) -> torch.Generator:
    """Each run owns its generator: runs never share random state, and a seed replays exactly."""
    return torch.Generator().manual_seed(seed)


def rounds(pair: ModelPair, prompt_ids: list[int], settings: Settings) -> Iterator[RoundTrace]:
    """Speculative decoding, one trace per round, with fresh caches and generator for this run."""
    target = CachedModel(pair.target.model, pair.target.vocab_size)
    return speculative_rounds(
        target, pair.new_drafter(), prompt_ids, settings.gamma, settings.sampling,
        _generator(settings.seed), settings.max_new_tokens, pair.stop_token_ids,
    )  # fmt: skip


def target_steps(pair: ModelPair, prompt_ids: list[int], settings: Settings) -> Iterator[TargetStep]:
    """Plain decoding with the target alone, one record per token."""
    target = CachedModel(pair.target.model, pair.target.vocab_size)
    return target_only_steps(
        target, prompt_ids, settings.sampling, _generator(settings.seed),
        settings.max_new_tokens, pair.stop_token_ids,
    )  # fmt: skip


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
) -> GenerationResult:
    """Run to the end. `on_tokens(n)` is told how many tokens each pass produced (progress bars)."""
    start = time.perf_counter()
    if speculative:
        traces = []
        for trace in rounds(pair, prompt_ids, settings):
            traces.append(trace)
            if on_tokens:
                on_tokens(len(trace.emitted_tokens))
        token_ids = [t for trace in traces for t in trace.emitted_tokens]
        wall = time.perf_counter() - start
        metrics = summarize(traces, wall).to_dict()
    else:
        traces, token_ids = [], []
        for step in target_steps(pair, prompt_ids, settings):
            token_ids.append(step.token)
            if on_tokens:
                on_tokens(1)
        wall = time.perf_counter() - start
        metrics = {
            "tokens_emitted": len(token_ids),
            "tokens_per_pass": 1.0,
            "tokens_per_second": len(token_ids) / wall if wall else 0.0,
        }
    return GenerationResult(token_ids, pair.decode(token_ids), traces, metrics, wall)
