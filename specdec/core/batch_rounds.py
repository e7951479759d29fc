"""Decoding a batch: B prompts together, target-only or speculative. A loop of its own beside the
single-sequence loop (core.rounds), with the same acceptance rules and the same per-row records.

Each speculative round:
1. the drafter proposes for every row in one batched call (core.batch_drafters: n-gram lookup per
   row, a draft model for all rows that need it at once);
2. the target verifies every row's [last token, x_1..x_k] in one pass: Σ (k_r + 1) tokens (chains
   only: no trees, core.tree_rounds, which Settings.tree asks of the single loop);
3. each row's drafts are judged by the same rule as in core.rounds, with that row's own generator,
   and each row keeps its own number of them;
4. both caches roll back per row. Rows now differ in length: core.batch_cache keeps the caches
   rectangular with attention masks and per-row positions (its docstring says why).
A row that finishes (stop token or budget) leaves the batch; the others go on.

Every row's trace is the RoundTrace the single-sequence loop writes, so metrics and charts read it
unchanged. Its draft_seconds and verify_seconds are the batch's: the row waited that long for them.
A batch of one runs exactly the single loop's steps with chains, and a row's tokens never depend on
the other rows (up to floating-point summation order in a wider pass, ~1e-6 of a logit).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from specdec import clock
from specdec.config import SamplingConfig, Settings
from specdec.core.acceptance import RULES
from specdec.core.batch_cache import NONE, BatchCachedModel
from specdec.core.batch_drafters import BatchDrafter
from specdec.core.records import STOP_BUDGET, STOP_CAP, CacheLengths, RoundTrace
from specdec.core.rounds import cut_after_stop, draft_thresholds, judge, next_draft_cap, round_trace
from specdec.core.sampling import sample, warp_probs


@dataclass(frozen=True)
class BatchRound:
    """One speculative round of the batch: one drafting call, one target pass, a trace per row."""

    index: int
    rows: list[int]  # the rows (prompt numbers) in the batch this round
    traces: list[RoundTrace]  # one per row of `rows`, in that order
    draft_seconds: float
    verify_seconds: float  # the target's one pass over every row's tokens, and the rows' verdicts
    pass_tokens: int  # tokens that pass read: Σ over rows of (drafts + 1)
    finished: list[int]  # rows that left the batch after this round


@dataclass(frozen=True)
class BatchStep:
    """One step of plain batched decoding: one target pass, one token per row."""

    index: int
    rows: list[int]
    tokens: list[int]  # one per row of `rows`
    seconds: float
    finished: list[int]


def _prefill(target: BatchCachedModel, rows_tokens: list[list[int]]) -> None:
    """Every prompt but its last token, all rows in one pass (each round feeds the last token itself)."""
    target.extend([tokens[:-1] for tokens in rows_tokens], keep=NONE)


def _leave(rows: list[int], finished: set[int], *caches) -> list[int]:
    """Drop the finished rows from the batch and from every cache -> the rows that go on."""
    staying = [position for position, row in enumerate(rows) if row not in finished]
    for cache in caches:
        cache.keep(staying)
    return [rows[position] for position in staying]


def batch_speculative_rounds(
    target: BatchCachedModel,
    drafter: BatchDrafter,
    prompts: list[list[int]],
    settings: Settings,
    generators: list[torch.Generator],
    stop_token_ids: set[int] = frozenset(),
    detail: bool = False,
) -> Iterator[BatchRound]:
    """core.rounds.speculative_rounds for every prompt at once: one batched draft call and one target
    pass per round. `generators[r]` is row r's own (give each row the seed a single run would use,
    and the row replays that run). `detail` as in speculative_rounds."""
    gamma, sampling, max_new_tokens = settings.gamma, settings.sampling, settings.max_new_tokens
    rule = RULES[settings.rule]
    # Drafts are priced as a single run prices them (the target's one-row pass costs), so each row
    # drafts what its single run would, though a batched pass costs otherwise.
    thresholds = draft_thresholds(settings, target.pass_costs)
    tokens = [list(prompt) for prompt in prompts]
    # Invariant at the start of every round: the target has seen all of a row's tokens but the last.
    _prefill(target, tokens)
    rows = list(range(len(prompts)))
    num_new, caps = [0] * len(prompts), [gamma] * len(prompts)
    index = 0
    while rows:
        # Leave room for the one token the target always adds, so no row overshoots its budget.
        ks = [min(caps[row], max_new_tokens - num_new[row] - 1) for row in rows]

        # 1. Draft: every row at once, each with its own generator.
        start = clock.now()
        target_before, draft_before = target.lengths, drafter.cache_lengths
        drafts = drafter.propose([tokens[row] for row in rows], ks, sampling,
                                 [generators[row] for row in rows], thresholds)
        draft_drafted = drafter.cache_lengths
        drafted = clock.now()

        # 2. Verify: one target pass over every row's [last token, x_1..x_k].
        fed = [[tokens[row][-1], *draft.tokens.tolist()] for row, draft in zip(rows, drafts, strict=True)]
        logits = target.extend(fed)  # per row (k_r + 1, vocab)
        target_verified = target.lengths

        # 3. Each row's verdict: one warp over every row's positions (it works position by position),
        #    then the single loop's step 3 (core.rounds.judge) with the row's own generator.
        target_probs = warp_probs(torch.cat(logits), sampling).split([len(tokens_fed) for tokens_fed in fed])
        judged = [judge(rule, sampling.greedy, draft, probs, generators[row])
                  for row, draft, probs in zip(rows, drafts, target_probs, strict=True)]
        verdicts, expected = [v for v, _ in judged], [e for _, e in judged]
        verified = clock.now()

        # 4. Emit, then roll both caches back per row to the context and its accepted drafts.
        surviving, contexts, emitted, finished = [], [], [], set()
        for row, draft, verdict in zip(rows, drafts, verdicts, strict=True):
            accepted = draft.tokens[: verdict.num_accepted].tolist()
            row_emitted, stopped = cut_after_stop([*accepted, verdict.next_token], stop_token_ids)
            contexts.append(len(tokens[row]))
            surviving.append(len(tokens[row]) + verdict.num_accepted)
            tokens[row] += row_emitted
            num_new[row] += len(row_emitted)
            emitted.append(row_emitted)
            if stopped or num_new[row] >= max_new_tokens:
                finished.add(row)
        target.rollback(surviving)
        drafter.rollback(surviving)
        target_kept, draft_kept = target.lengths, drafter.cache_lengths

        traces = []
        for i, (row, draft, verdict) in enumerate(zip(rows, drafts, verdicts, strict=True)):
            drafter_lengths = (None, None, None) if draft_kept is None else \
                (draft_before[i], draft_drafted[i], draft_kept[i])
            caches = CacheLengths(target_before[i], target_verified[i], target_kept[i], *drafter_lengths)
            stop = STOP_BUDGET if draft.stop == STOP_CAP and ks[i] < caps[row] else draft.stop
            shown_probs = target_probs[i] if detail else None
            traces.append(round_trace(index, contexts[i], draft, shown_probs, verdict, emitted[i],
                                      drafted - start, verified - drafted, caches, caps[row], stop,
                                      expected[i]))
            if settings.adaptive:
                caps[row] = next_draft_cap(caps[row], draft, verdict.num_accepted, gamma)
        yield BatchRound(index, list(rows), traces, drafted - start, verified - drafted,
                         sum(len(tokens_fed) for tokens_fed in fed), [r for r in rows if r in finished])
        rows = _leave(rows, finished, target, drafter)
        index += 1


def batch_target_only_steps(
    target: BatchCachedModel,
    prompts: list[list[int]],
    sampling: SamplingConfig,
    generators: list[torch.Generator],
    max_new_tokens: int,
    stop_token_ids: set[int] = frozenset(),
) -> Iterator[BatchStep]:
    """Plain decoding of every prompt at once, the baseline: one target pass per token of every row."""
    tokens = [list(prompt) for prompt in prompts]
    _prefill(target, tokens)
    rows = list(range(len(prompts)))
    index = 0
    while rows:
        start = clock.now()
        logits = target.extend([[tokens[row][-1]] for row in rows])  # per row (1, vocab)
        probs = warp_probs(torch.cat(logits), sampling)  # (rows, vocab): the warp works row by row
        new = [int(sample(probs[i : i + 1], sampling, generators[row])) for i, row in enumerate(rows)]
        finished = set()
        for row, token in zip(rows, new, strict=True):
            tokens[row].append(token)
            if token in stop_token_ids or len(tokens[row]) - len(prompts[row]) >= max_new_tokens:
                finished.add(row)
        yield BatchStep(index, list(rows), new, clock.now() - start,
                        [r for r in rows if r in finished])
        rows = _leave(rows, finished, target)
        index += 1
