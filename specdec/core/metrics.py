"""Metrics over round traces, and the theory they are compared with (Leviathan et al. 2023, §3).

Definitions used throughout the project:
- acceptance rate: accepted drafts / drafted tokens (what fraction of the draft's work was kept).
- alpha (α): accepted drafts / drafts *tested* (positions up to and including the first rejection).
  This estimates the per-token acceptance probability of the paper, E[min(1, p/q)], which the
  paper's formulas take as input; positions after a rejection were never tested, so they are left out.
- tokens per pass: tokens emitted / target forward passes (plain decoding gets exactly 1).
- cost ratio c: one drafted token's time / one plain decoding step of the target (the paper's c).
- verify cost v: what a round costs besides drafting (the verification pass over k + 1 tokens and
  the round's bookkeeping) / one plain decoding step. The paper takes v = 1, nearly true on a GPU
  that waits on memory; on a small CPU a pass over 5 tokens costs more than one over 1.
- k: the tokens drafted in one round; γ: the cap on k (the settings' `gamma`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from specdec.core.records import RoundTrace


def expected_tokens_per_pass(alpha: float, num_drafted: int) -> float:
    """E[tokens per target pass] for a round drafting k tokens = (1 - α^(k+1)) / (1 - α)   (eq. 1)."""
    if alpha >= 1.0:
        return num_drafted + 1.0
    return (1.0 - alpha ** (num_drafted + 1)) / (1.0 - alpha)


def expected_speedup(
    alpha: float, draft_lengths: Sequence[int] | int, cost_ratio: float, verify_cost: float = 1.0
) -> float:
    """The one speed-up formula: E[tokens per pass] / (k̄·c + v). With v = 1 it is Theorem 3.8.

    The paper drafts γ tokens every round; `draft_lengths` takes each round's real k (an n-gram
    drafter often proposes fewer), and E is averaged over them. An int means that k every round.
    """
    lengths = [draft_lengths] if isinstance(draft_lengths, int) else list(draft_lengths)
    if not lengths:
        return 0.0
    expected = sum(expected_tokens_per_pass(alpha, k) for k in lengths) / len(lengths)
    mean_drafted = sum(lengths) / len(lengths)
    return _ratio(expected, mean_drafted * cost_ratio + verify_cost)


@dataclass(frozen=True)
class RunMetrics:
    rounds: int
    tokens_emitted: int
    drafted: int
    accepted: int
    tested: int
    acceptance_rate: float  # accepted / drafted
    alpha: float  # accepted / tested
    tokens_per_pass: float
    accepted_length_histogram: list[int]  # rounds that kept 0, 1, ..., max_drafted drafts
    per_position_acceptance: list[float | None]  # P(accept position i | position i was tested)
    draft_seconds: float
    verify_seconds: float
    tokens_per_second: float
    max_drafted: int  # the most tokens drafted in one round (at most γ)
    mean_drafted: float  # tokens drafted per round (an n-gram drafter often proposes fewer than γ)
    tree_rounds: int = 0  # rounds that verified a tree of drafts (core.tree_rounds)

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def summarize(traces: Sequence[RoundTrace], wall_seconds: float | None = None) -> RunMetrics:
    """All metrics of one run. `wall_seconds` (whole run, prefill included) sets tokens/s if given."""
    max_drafted = max((t.num_drafted for t in traces), default=0)
    drafted = sum(t.num_drafted for t in traces)
    accepted = sum(t.num_accepted for t in traces)
    tested = sum(t.num_tested for t in traces)
    emitted = sum(len(t.emitted_tokens) for t in traces)
    draft_seconds = sum(t.draft_seconds for t in traces)
    verify_seconds = sum(t.verify_seconds for t in traces)
    histogram = [0] * (max_drafted + 1)
    for t in traces:
        histogram[t.num_accepted] += 1
    per_position = []
    for i in range(max_drafted):
        reached = [t for t in traces if t.num_drafted > i and t.num_accepted >= i]
        kept = sum(t.num_accepted > i for t in reached)
        per_position.append(kept / len(reached) if reached else None)
    return RunMetrics(
        rounds=len(traces),
        tokens_emitted=emitted,
        drafted=drafted,
        accepted=accepted,
        tested=tested,
        acceptance_rate=_ratio(accepted, drafted),
        alpha=_ratio(accepted, tested),
        tokens_per_pass=_ratio(emitted, len(traces)),
        accepted_length_histogram=histogram,
        per_position_acceptance=per_position,
        draft_seconds=draft_seconds,
        verify_seconds=verify_seconds,
        tokens_per_second=_ratio(emitted, wall_seconds or (draft_seconds + verify_seconds)),
        max_drafted=max_drafted,
        mean_drafted=_ratio(drafted, len(traces)),
        tree_rounds=sum(t.tree is not None for t in traces),
    )


@dataclass(frozen=True)
class SpeedupTheory:
    """A speculative run's measured α, c and v, and what the formula expects from them."""

    alpha: float
    mean_drafted: float  # k̄: tokens drafted per round, on average
    cost_ratio: float  # c
    verify_cost: float  # v
    paper: float  # E[tokens per pass] / (k̄c + 1)
    on_this_machine: float  # E[tokens per pass] / (k̄c + v)
    draft_lengths: list[int]  # each round's k, for drawing the curve over α


def speedup_theory(
    traces: Sequence[RoundTrace], plain_step_seconds: float, spent_seconds: float | None = None
) -> SpeedupTheory:
    """c and v of a run, in units of one plain decoding step, and the expected speed-ups.

    `spent_seconds` is the speculative run's time after its prefill, measured on the same clock as
    the plain steps; by default the rounds' own draft and verify times (bookkeeping left out).
    """
    m = summarize(traces)
    spent = m.draft_seconds + m.verify_seconds if spent_seconds is None else spent_seconds
    cost_ratio = _ratio(_ratio(m.draft_seconds, m.drafted), plain_step_seconds)
    verify_cost = _ratio(_ratio(spent - m.draft_seconds, m.rounds), plain_step_seconds)
    lengths = [t.num_drafted for t in traces]
    return SpeedupTheory(
        alpha=m.alpha,
        mean_drafted=m.mean_drafted,
        cost_ratio=cost_ratio,
        verify_cost=verify_cost,
        paper=expected_speedup(m.alpha, lengths, cost_ratio),
        on_this_machine=expected_speedup(m.alpha, lengths, cost_ratio, verify_cost),
        draft_lengths=lengths,
    )
