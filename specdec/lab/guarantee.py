"""The guarantee, measured: the rule on toy distributions, sampled outcomes of both ways, greedy equality.

No Streamlit here; the models run one pass at a time under the model lock (see timing.locked_steps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from specdec.errors import SpecDecError
from specdec.lab.lock import MODEL_LOCK
from specdec.lab.timing import timed_run


@dataclass(frozen=True)
class ToyRule:
    """The rule on hand-made p (target) and q (draft) over a few tokens, computed exactly."""

    target_probs: list[float]
    draft_probs: list[float]
    accepted_mass: list[float]  # q(x)·min(1, p(x)/q(x)) = min(p(x), q(x)): drafted x and kept
    accept_probability: float  # β = Σ min(p, q)
    residual: list[float]  # norm(max(0, p − q)); p itself when p = q (never used then)
    output: list[float]  # min(p, q) + (1 − β)·residual: what one round emits first; equals p


def _normalise(weights: list[float], name: str) -> list[float]:
    if any(not w >= 0 for w in weights):
        raise SpecDecError(f"{name}: weights must be non-negative numbers")
    total = sum(weights)
    if total <= 0:
        raise SpecDecError(f"{name}: give at least one token a weight above zero")
    return [w / total for w in weights]


def toy_rule(target_weights: list[float], draft_weights: list[float]) -> ToyRule:
    if len(target_weights) != len(draft_weights) or not target_weights:
        raise SpecDecError("p and q need one weight per token, the same tokens")
    p, q = _normalise(target_weights, "p (target)"), _normalise(draft_weights, "q (draft)")
    kept = [min(a, b) for a, b in zip(p, q, strict=True)]
    beta = sum(kept)
    excess = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    mass = sum(excess)
    residual = [e / mass for e in excess] if mass > 1e-12 else list(p)
    output = [k + (1.0 - beta) * r for k, r in zip(kept, residual, strict=True)]
    return ToyRule(p, q, kept, beta, residual, output)


@dataclass
class SampleTally:
    """Outcomes (the first few tokens) of many short runs of both kinds, and what the rule did."""

    num_tokens: int
    speculative: Counter = field(default_factory=Counter)
    target: Counter = field(default_factory=Counter)
    drafted: int = 0
    rejected: int = 0

    @property
    def samples(self) -> int:
        return min(sum(self.speculative.values()), sum(self.target.values()))


def sample_outcomes(pair, prompt_ids, settings, num_samples: int, num_tokens: int = 1,
                    lock=MODEL_LOCK) -> Iterator[SampleTally]:  # fmt: skip
    """num_samples runs of each kind (seeds seed, seed+1, ...), alternating; yields after each pair."""
    tally = SampleTally(num_tokens)
    for i in range(num_samples):
        # One token more than kept: a round always leaves room for its own token, so with room for
        # just num_tokens the first round would draft num_tokens − 1 and never test the last.
        short = replace(settings, max_new_tokens=num_tokens + 1, seed=settings.seed + i)
        spec = timed_run(pair, prompt_ids, short, True, lock)
        plain = timed_run(pair, prompt_ids, short, False, lock)
        tally.speculative[tuple(spec.token_ids[:num_tokens])] += 1
        tally.target[tuple(plain.token_ids[:num_tokens])] += 1
        tally.drafted += sum(t.num_drafted for t in spec.traces)
        tally.rejected += sum(t.num_tested - t.num_accepted for t in spec.traces)
        yield tally


@dataclass(frozen=True)
class GreedyCheck:
    speculative: list[int]
    target: list[int]
    first_difference: int | None  # index of the first differing token, None if equal throughout


def greedy_check(pair, prompt_ids, settings, lock=MODEL_LOCK) -> GreedyCheck:
    greedy = replace(settings, sampling=replace(settings.sampling, temperature=0.0))
    spec = timed_run(pair, prompt_ids, greedy, True, lock).token_ids
    plain = timed_run(pair, prompt_ids, greedy, False, lock).token_ids
    first = next((i for i, (a, b) in enumerate(zip(spec, plain, strict=False)) if a != b), None)
    if first is None and len(spec) != len(plain):
        first = min(len(spec), len(plain))
    return GreedyCheck(spec, plain, first)
