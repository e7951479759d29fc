"""One batch = one pair, B prompts, one settings object: the batched API the CLI, bench and app use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from specdec.clock import now
from specdec.config import Settings
from specdec.core.batch_cache import BatchCachedModel
from specdec.core.batch_drafters import BatchDrafter
from specdec.core.batch_rounds import BatchRound, BatchStep, batch_speculative_rounds, batch_target_only_steps
from specdec.core.drafters import NgramDrafter
from specdec.core.metrics import summarize
from specdec.core.records import RoundTrace
from specdec.errors import SpecDecError
from specdec.models.pair import ModelPair


def check_batchable(pair: ModelPair) -> None:
    """SpecDecError unless the pair's drafter has a batched form (all but a feature head and an early
    exit)."""
    if pair.exit is not None:
        raise SpecDecError("batched decoding drafts with n-gram lookup or a draft model; an early exit "
                           "has no batched form here: pick another drafter")
    if pair.head is not None:
        raise SpecDecError("batched decoding drafts with n-gram lookup or a draft model; a feature head "
                           "has no batched form here: pick another drafter")


def new_batch_drafter(pair: ModelPair, rows: int) -> BatchDrafter:
    """The pair's drafter for a batch of `rows`, with fresh caches."""
    check_batchable(pair)
    lookup = NgramDrafter(pair.target.vocab_size) if pair.draft is None or pair.lookup_first else None
    if pair.draft is None:
        return BatchDrafter(rows, pair.target.vocab_size, lookup, name=lookup.name)
    name = f"n-gram lookup, then {pair.draft.name}" if lookup else pair.draft.name
    return BatchDrafter(rows, pair.target.vocab_size, lookup, pair.draft.model, pair.draft.reduced_head, name)


def _generators(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def batch_rounds(pair: ModelPair, prompts: list[list[int]], settings: Settings,
                 seeds: list[int] | None = None, detail: bool = False) -> Iterator[BatchRound]:
    """Speculative decoding of every prompt together. Row r samples with its own generator, seeded
    `seeds[r]` (default: every row settings.seed, so each row replays its prompt's single run)."""
    seeds = seeds or [settings.seed] * len(prompts)
    target = BatchCachedModel(pair.target.model, pair.target.vocab_size, len(prompts),
                              pass_costs=pair.target.pass_costs)
    return batch_speculative_rounds(target, new_batch_drafter(pair, len(prompts)), prompts, settings,
                                    _generators(seeds), pair.stop_token_ids, detail)


def batch_target_steps(pair: ModelPair, prompts: list[list[int]], settings: Settings,
                       seeds: list[int] | None = None) -> Iterator[BatchStep]:
    """Plain decoding of every prompt together with the target alone, one record per pass."""
    seeds = seeds or [settings.seed] * len(prompts)
    target = BatchCachedModel(pair.target.model, pair.target.vocab_size, len(prompts))
    return batch_target_only_steps(target, prompts, settings.sampling, _generators(seeds),
                                   settings.max_new_tokens, pair.stop_token_ids)


@dataclass
class BatchResult:
    """A batch run to the end: per row its tokens and traces, and the passes the batch made."""

    token_ids: list[list[int]]
    rounds: list[list[RoundTrace]]  # per row; empty lists for target-only decoding
    pass_seconds: list[float]  # every target pass (verification, or a plain step), in order
    pass_rows: list[int]  # how many rows each of those passes served
    pass_tokens: list[int]  # how many tokens each of them read
    draft_seconds: float  # the drafting calls, all together
    wall_seconds: float

    @property
    def tokens(self) -> int:
        return sum(len(row) for row in self.token_ids)

    def row_metrics(self, row: int) -> dict:
        if not self.rounds[row]:
            return {"tokens_emitted": len(self.token_ids[row]), "tokens_per_pass": 1.0}
        return summarize(self.rounds[row]).to_dict()


def batch_generate(pair: ModelPair, prompts: list[list[int]], settings: Settings, speculative: bool = True,
                   seeds: list[int] | None = None, on_tokens: Callable[[int], None] | None = None,
                   detail: bool = False) -> BatchResult:
    """Run a batch to the end. `on_tokens(n)` hears how many tokens each pass produced, all rows."""
    start = now()
    token_ids = [[] for _ in prompts]
    traces = [[] for _ in prompts]
    passes, rows, fed, drafting = [], [], [], 0.0
    if speculative:
        for batch_round in batch_rounds(pair, prompts, settings, seeds, detail):
            for row, trace in zip(batch_round.rows, batch_round.traces, strict=True):
                token_ids[row] += trace.emitted_tokens
                traces[row].append(trace)
            passes.append(batch_round.verify_seconds)
            rows.append(len(batch_round.rows))
            fed.append(batch_round.pass_tokens)
            drafting += batch_round.draft_seconds
            if on_tokens:
                on_tokens(sum(len(t.emitted_tokens) for t in batch_round.traces))
    else:
        for step in batch_target_steps(pair, prompts, settings, seeds):
            for row, token in zip(step.rows, step.tokens, strict=True):
                token_ids[row].append(token)
            passes.append(step.seconds)
            rows.append(len(step.rows))
            fed.append(len(step.rows))
            if on_tokens:
                on_tokens(len(step.tokens))
    return BatchResult(token_ids, traces, passes, rows, fed, drafting, now() - start)
