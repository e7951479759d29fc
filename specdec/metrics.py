"""Metrics over round traces, and the theory they are compared with (Leviathan et al. 2023, §3).

Definitions used throughout the project:
- acceptance rate: accepted drafts / drafted tokens (what fraction of the draft's work was kept).
- alpha (α): accepted drafts / drafts *tested* (positions up to and including the first rejection).
  This estimates the per-token acceptance probability of the paper, E[min(1, p/q)], which the
  paper's formulas take as input; positions after a rejection were never tested, so they are left out.
- tokens per pass: tokens emitted / target forward passes (plain decoding gets exactly 1).
- cost ratio c: time of one draft forward (per drafted token) / time of one target verification pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from specdec.rounds import RoundTrace


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """E[tokens per target pass] = (1 - α^(γ+1)) / (1 - α)   (paper, eq. 1)."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def theoretical_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Expected wall-time speed-up over plain decoding: E[tokens per pass] / (γc + 1)  (Theorem 3.8)."""
    return expected_tokens_per_pass(alpha, gamma) / (gamma * cost_ratio + 1.0)


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
    accepted_length_histogram: list[int]  # rounds that kept 0, 1, ..., gamma drafts
    per_position_acceptance: list[float | None]  # P(accept position i | position i was tested)
    draft_seconds: float
    verify_seconds: float
    tokens_per_second: float
    cost_ratio: float
    gamma: int  # the most tokens drafted in a round
    mean_drafted: float  # tokens drafted per round (an n-gram drafter often proposes fewer than γ)
    theoretical_speedup: float  # from the measured alpha, the drafted lengths and the cost ratio

    def to_dict(self) -> dict:
        return asdict(self)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def summarize(traces: Sequence[RoundTrace], wall_seconds: float | None = None) -> RunMetrics:
    """All metrics of one run. `wall_seconds` (whole run, prefill included) sets tokens/s if given."""
    gamma = max((t.gamma for t in traces), default=0)
    drafted = sum(t.gamma for t in traces)
    accepted = sum(t.num_accepted for t in traces)
    tested = sum(t.num_tested for t in traces)
    emitted = sum(len(t.emitted_tokens) for t in traces)
    draft_seconds = sum(t.draft_seconds for t in traces)
    verify_seconds = sum(t.verify_seconds for t in traces)
    histogram = [0] * (gamma + 1)
    for t in traces:
        histogram[t.num_accepted] += 1
    per_position = []
    for i in range(gamma):
        reached = [t for t in traces if t.gamma > i and t.num_accepted >= i]
        kept = sum(t.num_accepted > i for t in reached)
        per_position.append(kept / len(reached) if reached else None)
    alpha = _ratio(accepted, tested)
    cost_ratio = _ratio(_ratio(draft_seconds, drafted), _ratio(verify_seconds, len(traces)))
    mean_drafted = _ratio(drafted, len(traces))
    # The paper assumes γ drafts every round; average its expectation over the rounds' real lengths.
    expected_per_pass = _ratio(sum(expected_tokens_per_pass(alpha, t.gamma) for t in traces), len(traces))
    return RunMetrics(
        rounds=len(traces),
        tokens_emitted=emitted,
        drafted=drafted,
        accepted=accepted,
        tested=tested,
        acceptance_rate=_ratio(accepted, drafted),
        alpha=alpha,
        tokens_per_pass=_ratio(emitted, len(traces)),
        accepted_length_histogram=histogram,
        per_position_acceptance=per_position,
        draft_seconds=draft_seconds,
        verify_seconds=verify_seconds,
        tokens_per_second=_ratio(emitted, wall_seconds or (draft_seconds + verify_seconds)),
        cost_ratio=cost_ratio,
        gamma=gamma,
        mean_drafted=mean_drafted,
        theoretical_speedup=_ratio(expected_per_pass, mean_drafted * cost_ratio + 1.0),
    )
