"""Drafting for a batch: every row's drafts in one batched call (core.batch_rounds uses it).

The same drafters as core.drafters, row by row in what they propose: n-gram lookup runs per row (it
reads only that row's text), a draft model runs once per drafted position for all rows that still
draft, through a BatchCachedModel. Each row's Draft is exactly what the single-sequence drafter
would propose for that row with that row's generator: same tokens, same q, same stop reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from specdec.config import SamplingConfig
from specdec.core.batch_cache import LAST, BatchCachedModel
from specdec.core.cached_model import ReducedHead
from specdec.core.drafters import Draft, NgramDrafter, empty_draft, worth_drafting
from specdec.core.records import STOP_CAP, STOP_CONFIDENCE
from specdec.core.sampling import sample, warp_probs


def draft_rows_one_by_one(
    first_logits: dict[int, torch.Tensor],
    feed: Callable[[dict[int, int]], dict[int, torch.Tensor]],
    num_tokens: dict[int, int],
    sampling: SamplingConfig,
    generators: list[torch.Generator],
    thresholds: Sequence[float] = (),
) -> dict[int, Draft]:
    """core.drafters.draft_one_by_one for several rows at once: `first_logits[row]` (1, vocab) starts
    each row; `feed({row: token})` gives every still-drafting row's next logits in one batched pass.

    Per row the steps are draft_one_by_one's (draft i + 1 made while worth_drafting with
    `thresholds[i:]`; the last draft never fed), so a row's draft does not depend on the other rows.
    """
    logits = dict(first_logits)
    tokens = {row: [] for row in logits}
    probs = {row: [] for row in logits}
    confidence = dict.fromkeys(logits, 1.0)
    stopped_at: dict[int, tuple[float, float]] = {}  # row -> (its product, the threshold it fell below)
    drafting = [row for row in logits if num_tokens[row] > 0]
    step = 0
    while drafting:
        to_feed = {}
        # One warp for every drafting row (it works row by row), then each row on its own.
        warped = warp_probs(torch.cat([logits[row] for row in drafting]), sampling)  # (rows, vocab)
        for i, row in enumerate(drafting):
            step_probs = warped[i : i + 1]  # (1, vocab)
            chance = float(step_probs.max())
            confidence[row] *= chance
            ahead = thresholds[step : num_tokens[row]]
            if step < len(thresholds) and not worth_drafting(confidence[row], chance, ahead):
                stopped_at[row] = confidence[row], thresholds[step]
                continue
            token = int(sample(step_probs, sampling, generators[row]))
            tokens[row].append(token)
            probs[row].append(step_probs)
            if step + 1 < num_tokens[row]:  # the last draft need not be fed: nothing is drafted after it
                to_feed[row] = token
        if to_feed:
            logits.update(feed(to_feed))
        drafting = list(to_feed)
        step += 1
    drafts = {}
    for row in logits:
        stop = STOP_CONFIDENCE if row in stopped_at else STOP_CAP
        why = stopped_at.get(row, (None, None))
        if not tokens[row]:
            drafts[row] = empty_draft(logits[row].shape[-1], stop, *why)
        else:
            drafts[row] = Draft(torch.tensor(tokens[row]), torch.cat(probs[row]), stop, *why)
    return drafts


class BatchDrafter:
    """n-gram lookup, a draft model, or lookup first and the model where it finds nothing, for a
    batch of rows. (A feature head reads the target's per-position features; it has no batched form.)"""

    def __init__(self, rows: int, vocab_size: int, lookup: NgramDrafter | None = None,
                 model=None, head: ReducedHead | None = None, name: str = ""):
        if lookup is None and model is None:
            raise ValueError("a batch drafter needs a lookup, a draft model or both")
        self.lookup = lookup
        self.cached = None if model is None else BatchCachedModel(model, vocab_size, rows, head)
        self.vocab_size = vocab_size
        self.name = name

    def propose(self, rows_token_ids: list[list[int]], num_tokens: list[int], sampling: SamplingConfig,
                generators: list[torch.Generator], thresholds: Sequence[float] = ()) -> list[Draft]:
        """One draft per row (`num_tokens[row]` at most), the model's rows drafted together."""
        drafts: dict[int, Draft] = {}
        if self.lookup is not None:
            for row, (token_ids, count) in enumerate(zip(rows_token_ids, num_tokens, strict=True)):
                copied = self.lookup.propose(token_ids, count, sampling, generators[row])
                if len(copied.tokens) or self.cached is None:
                    drafts[row] = copied
        if self.cached is None:
            return [drafts[row] for row in range(len(rows_token_ids))]
        asking = [row for row in range(len(rows_token_ids)) if row not in drafts and num_tokens[row] > 0]
        for row in range(len(rows_token_ids)):
            if row not in drafts and num_tokens[row] == 0:
                drafts[row] = empty_draft(self.vocab_size)  # as ModelDrafter: no room, no pass
        if asking:
            # Feed what each asking row has not seen yet: usually its last token; after a round where
            # every draft was accepted also its last draft; after copied rounds, everything since.
            lengths = self.cached.lengths
            unseen = [rows_token_ids[row][lengths[row]:] if row in asking else []
                      for row in range(self.cached.rows)]
            logits = self.cached.extend(unseen, keep=LAST)
            first = {row: logits[row] for row in asking}

            def feed(tokens: dict[int, int]) -> dict[int, torch.Tensor]:
                out = self.cached.extend([[tokens[row]] if row in tokens else []
                                          for row in range(self.cached.rows)])
                return {row: out[row] for row in tokens}

            counts = {row: num_tokens[row] for row in asking}
            for row, draft in draft_rows_one_by_one(first, feed, counts, sampling, generators,
                                                    thresholds).items():
                drafts[row] = draft
        return [drafts[row] for row in range(len(rows_token_ids))]

    def rollback(self, lengths: list[int]) -> None:
        """Row r keeps only the first `lengths[r]` tokens (a lookup has nothing to forget)."""
        if self.cached is not None:
            self.cached.rollback(lengths)  # a row whose cache fell behind (copied rounds) keeps what it has

    def keep(self, rows: list[int]) -> None:
        if self.cached is not None:
            self.cached.keep(rows)

    @property
    def cache_lengths(self) -> list[int] | None:
        return None if self.cached is None else self.cached.lengths

