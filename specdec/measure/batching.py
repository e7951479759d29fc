"""A class is a batch: target-only and speculative decoding of B rows at once, timed side by side.

For each batch size B the same rows (a prompt set's prompts, repeated to fill the batch) are decoded
target-only and speculatively in one process, alternating which goes first. Speculation spends the
arithmetic a one-row pass leaves idle; a batch spends the same arithmetic, so as B grows the
verification pass over B × (k + 1) tokens stops being nearly free and the ratio falls.

Bench (`python -m specdec bench --batch-sizes ...`) and the page "A class is a batch" both read this.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from itertools import pairwise

import torch

from specdec.clock import now
from specdec.config import Settings
from specdec.core.batch_cache import NONE, BatchCachedModel
from specdec.core.metrics import summarize
from specdec.models.batch_runs import batch_generate
from specdec.models.pair import ModelPair
from specdec.models.runs import generate
from specdec.paths import HELD_OUT_PROMPT_SETS

BATCH_SIZES = (1, 2, 4, 8, 16)
# The page's default (quick) run: a first answer well within 20 s on the 2-core machine with the
# crossover still in view (docs/LOG.md, "No dead air"). The full run: the page's sliders, BATCH_SIZES
# and the cost curve.
QUICK_RUN = {"tokens": 16, "prompts": 2, "sizes": (1, 4, 16), "cost": False}
COST_CONTEXT = 64  # cached tokens per row before a timed pass (a prompt's worth)


@dataclass(frozen=True)
class BatchPoint:
    """One batch size, both ways, over the same rows."""

    batch_size: int
    rows: int  # rows decoded in all (batches of batch_size)
    target_only_tokens: int
    target_only_seconds: float
    speculative_tokens: int
    speculative_seconds: float
    target_pass_seconds: float  # mean target-only pass (B rows, one token each)
    verify_pass_seconds: float  # mean verification pass (B rows, k + 1 tokens each)
    verify_pass_tokens: float  # mean tokens in a verification pass
    draft_seconds_per_round: float  # mean batched drafting call
    tokens_per_pass: float  # per row and round: accepted drafts + 1 (summarize over all rows' traces)
    alpha: float
    single_sequence_seconds: float | None = None  # B = 1 only: the single-sequence loop, same rows
    # Mean rows a pass served: below B once rows have finished (0: not measured, read as B).
    target_pass_rows: float = 0.0
    verify_pass_rows: float = 0.0

    @property
    def target_only_tokens_per_second(self) -> float:
        return _rate(self.target_only_tokens, self.target_only_seconds)

    @property
    def speculative_tokens_per_second(self) -> float:
        return _rate(self.speculative_tokens, self.speculative_seconds)

    @property
    def ratio(self) -> float:
        return _rate(self.speculative_tokens_per_second, self.target_only_tokens_per_second)

    @property
    def per_row_target_only(self) -> float:
        """Tokens/s one row sees: the batch's total over its B rows."""
        return self.target_only_tokens_per_second / self.batch_size

    @property
    def per_row_speculative(self) -> float:
        return self.speculative_tokens_per_second / self.batch_size

    @property
    def pass_seconds_per_row(self) -> float:
        """What one target pass cost per row: a target-only pass over B rows, divided by B."""
        return self.target_pass_seconds / self.batch_size

    def bench_fields(self) -> dict:
        """The figures bench's JSON carries for this B (its `batch_sizes` entry)."""
        return {
            "target_only_tokens_per_second": self.target_only_tokens_per_second,
            "speculative_tokens_per_second": self.speculative_tokens_per_second,
            "ratio": self.ratio,
            "per_row_tokens_per_second": self.per_row_speculative,
            "pass_seconds_per_row": self.pass_seconds_per_row,
        }

    def to_dict(self) -> dict:
        return asdict(self) | self.bench_fields() | {"per_row_target_only_tokens_per_second":
                                                     self.per_row_target_only}


def held_out_prompts(name: str = "code") -> list[str]:
    """A bundled held-out prompt set (assets/prompts/<name>.json): what bench decodes by default."""
    return json.loads(HELD_OUT_PROMPT_SETS[name].read_text(encoding="utf-8"))["prompts"]


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds else 0.0


def fill_rows(prompts: list[list[int]], batch_size: int) -> list[list[int]]:
    """The prompts, repeated in order, to fill whole batches: at least every prompt once."""
    count = batch_size * math.ceil(len(prompts) / batch_size)
    return [prompts[i % len(prompts)] for i in range(count)]


def measure_batch_size(pair: ModelPair, prompts: list[list[int]], settings: Settings, batch_size: int,
                       single: bool = False) -> BatchPoint:
    """Every row of fill_rows(prompts, B) decoded in batches of B, target-only and speculatively
    (alternating which goes first); `single`: the single-sequence loop too, row by row, between them."""
    rows = fill_rows(prompts, batch_size)
    totals = {"target": [0, 0.0], "spec": [0, 0.0], "single": [0, 0.0]}
    target_passes, verify_passes, verify_tokens, draft_calls, traces = [], [], [], [], []
    target_rows, verify_rows = [], []
    for number, start in enumerate(range(0, len(rows), batch_size)):
        batch = rows[start : start + batch_size]
        order = ["target", "spec"] + (["single"] if single else [])
        order = order[number % len(order):] + order[: number % len(order)]  # rotate who runs first
        for kind in order:
            if kind == "single":
                begin = now()
                tokens = sum(len(generate(pair, row, settings, detail=False).token_ids) for row in batch)
                totals[kind][0] += tokens
                totals[kind][1] += now() - begin
                continue
            result = batch_generate(pair, batch, settings, speculative=kind == "spec")
            totals[kind][0] += result.tokens
            totals[kind][1] += result.wall_seconds
            if kind == "target":
                target_passes += result.pass_seconds
                target_rows += result.pass_rows
            else:
                verify_passes += result.pass_seconds
                verify_rows += result.pass_rows
                verify_tokens += result.pass_tokens
                draft_calls.append((result.draft_seconds, len(result.pass_seconds)))
                traces += [trace for row_traces in result.rounds for trace in row_traces]
    metrics = summarize(traces)
    return BatchPoint(
        batch_size=batch_size, rows=len(rows),
        target_only_tokens=totals["target"][0], target_only_seconds=totals["target"][1],
        speculative_tokens=totals["spec"][0], speculative_seconds=totals["spec"][1],
        target_pass_seconds=sum(target_passes) / max(len(target_passes), 1),
        verify_pass_seconds=sum(verify_passes) / max(len(verify_passes), 1),
        verify_pass_tokens=sum(verify_tokens) / max(len(verify_tokens), 1),
        draft_seconds_per_round=sum(s for s, _ in draft_calls) / max(sum(n for _, n in draft_calls), 1),
        tokens_per_pass=metrics.tokens_per_pass, alpha=metrics.alpha,
        single_sequence_seconds=totals["single"][1] if single else None,
        target_pass_rows=sum(target_rows) / max(len(target_rows), 1),
        verify_pass_rows=sum(verify_rows) / max(len(verify_rows), 1),
    )


def batch_sweep(pair: ModelPair, prompts: list[list[int]], settings: Settings,
                batch_sizes=BATCH_SIZES, single: bool = False) -> Iterator[BatchPoint]:
    """measure_batch_size for each B in turn (a page shows progress and may stop between them);
    `single`: at B = 1, the single-sequence loop too."""
    warmup = [prompts[0][:8] or prompts[0]]
    for speculative in (False, True):  # first calls pay for lazy initialisation; keep that out
        batch_generate(pair, warmup * 2, replace(settings, max_new_tokens=4), speculative)
    for batch_size in batch_sizes:
        yield measure_batch_size(pair, prompts, settings, batch_size, single and batch_size == 1)


@torch.inference_mode()
def pass_cost(pair: ModelPair, rows: int, tokens_per_row: int, repeats: int = 3) -> float:
    """Seconds of one target pass over `rows` rows of `tokens_per_row` new tokens each, after
    COST_CONTEXT cached tokens per row (the fastest of `repeats`, after one warm-up). The logits stay
    on the model's device, as a verification pass's do (the clock waits for a GPU: specdec.clock)."""
    target = BatchCachedModel(pair.target.model, pair.target.vocab_size, rows)
    target.extend([list(range(100, 100 + COST_CONTEXT))] * rows, keep=NONE)
    times = []
    for _ in range(repeats + 1):
        start = now()
        target.extend([list(range(200, 200 + tokens_per_row))] * rows)
        times.append(now() - start)
        target.rollback([COST_CONTEXT] * rows)
    return min(times[1:])


def cost_curve(pair: ModelPair, batch_sizes, tokens_per_row: tuple[int, ...],
               stop: Callable[[], bool] = lambda: False) -> Iterator[dict]:
    """One target pass per (B, tokens per row): {rows, tokens_per_row, tokens, seconds}."""
    for batch_size in batch_sizes:
        for count in tokens_per_row:
            if stop():
                return
            yield {"rows": batch_size, "tokens_per_row": count, "tokens": batch_size * count,
                   "seconds": pass_cost(pair, batch_size, count)}


def linear(points: list[tuple[float, float]], x: float) -> float:
    """y at x, linear between the (x, y) points, clamped at the ends."""
    points = sorted(points)
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def cost_at(curve: list[dict], rows: float, tokens_per_row: float) -> float:
    """A pass's seconds for `rows` rows of `tokens_per_row` tokens: linear in the tokens per row
    within each measured B, then linear in the rows between measured Bs (each clamped)."""
    by_rows = {}
    for row in curve:
        by_rows.setdefault(row["rows"], []).append((row["tokens_per_row"], row["seconds"]))
    return linear([(b, linear(points, tokens_per_row)) for b, points in by_rows.items()], rows)


def expected_ratio(point: BatchPoint, curve: list[dict]) -> float:
    """Speculative over target-only tokens/s from the measured acceptance and the cost curve.

    A target-only pass makes one token for each of its R rows; a round makes `tokens_per_pass` tokens
    for each of its R' rows, for a drafting call d and one pass over k̄ + 1 tokens per row:
        ratio ≈ tokens_per_pass · (R' / R) · cost(R, 1) / (d + cost(R', k̄ + 1)).
    R and R' are the mean rows per pass (B until rows finish: speculative rows finish after different
    numbers of rounds, so the last rounds serve fewer rows for nearly the price of all).
    """
    plain_rows = point.target_pass_rows or point.batch_size
    verify_rows = point.verify_pass_rows or point.batch_size
    plain = cost_at(curve, plain_rows, 1)
    verify = cost_at(curve, verify_rows, point.verify_pass_tokens / verify_rows)
    round_seconds = point.draft_seconds_per_round + verify
    return point.tokens_per_pass * (verify_rows / plain_rows) * plain / round_seconds


def crossover(points: list[BatchPoint]) -> int | None:
    """The smallest measured B at which speculation is slower than the target alone; None if none."""
    return next((p.batch_size for p in points if p.ratio < 1.0), None)


def class_run(pair: ModelPair, prompts: list[list[int]], settings: Settings,
              batch_sizes=BATCH_SIZES, cost: bool = True) -> Iterator[tuple[str, object]]:
    """The page's measurement, step by step: ("batch", BatchPoint) per batch size, then (`cost`)
    ("cost", row) per point of the cost curve: B rows of 1, 2, ... γ + 1 tokens each (class_steps in
    all). Every count is timed, not interpolated: on a CPU the cost is far from smooth in the tokens
    (fewer tokens in a pass can cost more: docs/LOG.md, "A class is a batch: speculation under
    load")."""
    for point in batch_sweep(pair, prompts, settings, batch_sizes):
        yield "batch", point
    if cost:
        for row in cost_curve(pair, batch_sizes, tuple(range(1, settings.gamma + 2))):
            yield "cost", row


def class_steps(settings: Settings, batch_sizes=BATCH_SIZES, cost: bool = True) -> int:
    """How many items class_run yields."""
    return len(batch_sizes) * (1 + (settings.gamma + 1 if cost else 0))


# Tokens in one pass from which it costs about twice a one-token pass, read off a measured cost curve
# (docs/LOG.md, "A class is a batch: speculation under load"). Only the shape of the time-left
# estimate uses it; its pace is measured.
PASS_KNEE = 8


def pass_units(tokens_in_pass: float) -> float:
    """A pass's cost in one-token passes, roughly: flat while memory-bound, then linear."""
    return 1.0 + tokens_in_pass / PASS_KNEE


def class_weights(settings: Settings, prompt_count: int, batch_sizes=BATCH_SIZES,
                  cost: bool = True) -> list[float]:
    """Each class_run step's relative time, in one-token passes, for the time left while it runs:
    a batch size B decodes ceil(P / B) batches of `max_new_tokens` tokens each way, in passes of about
    2B tokens on average (B one-token rows target-only; fewer speculative passes of B rows × (k̄ + 1));
    a cost point is a prefill of B × COST_CONTEXT tokens and four timed passes."""
    weights = []
    for batch_size in batch_sizes:
        batches = math.ceil(prompt_count / batch_size)
        weights.append(batches * settings.max_new_tokens * 2 * pass_units(2 * batch_size))
    if cost:
        for batch_size in batch_sizes:
            weights += [pass_units(batch_size * COST_CONTEXT) + 4 * pass_units(batch_size * count)
                        for count in range(1, settings.gamma + 2)]
    return weights


def class_rows(points: list[BatchPoint], curve: list[dict]) -> list[dict]:
    """Per batch size, the figures the page shows, with the expected ratio where the curve allows."""
    rows = []
    for point in points:
        row = point.to_dict()
        row["expected_ratio"] = expected_ratio(point, curve) if curve else None
        rows.append(row)
    return rows
