"""The measurements behind the instructor pages, with no Streamlit: races, sweeps, samples, timings.

Every function that runs the models advances them one pass at a time under `lock` (the process-wide
model lock by default) and releases it in between, so other sessions interleave; long work is a
generator the caller can stop between steps. Times are measured inside the lock: waiting for
another session is never counted as compute.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from statistics import median

import torch

from specdec.cached_model import CachedModel
from specdec.errors import SpecDecError
from specdec.generation import Settings, rounds, target_steps
from specdec.metrics import RunMetrics, expected_tokens_per_pass, summarize
from specdec.pair import ModelPair
from specdec.rounds import RoundTrace
from specdec.stepper import MODEL_LOCK

SPECULATIVE, TARGET = "speculative", "target only"


def locked_steps(iterator: Iterator, lock) -> Iterator[tuple[object, float]]:
    """(item, seconds) per item; each item is computed under `lock`, timed inside it."""
    while True:
        with lock:
            start = time.perf_counter()
            item = next(iterator, None)
            seconds = time.perf_counter() - start
        if item is None:
            return
        yield item, seconds


# -- one run, timed ---------------------------------------------------------------------------


@dataclass
class TimedRun:
    """One decoding run: its tokens, the compute seconds it took, its rounds (none for target-only)."""

    label: str
    token_ids: list[int] = field(default_factory=list)
    seconds: float = 0.0
    traces: list[RoundTrace] = field(default_factory=list)
    pass_seconds: list[float] = field(default_factory=list)  # one entry per target pass
    finished: bool = False

    @property
    def tokens_per_second(self) -> float:
        return len(self.token_ids) / self.seconds if self.seconds else 0.0

    def metrics(self) -> RunMetrics | None:
        return summarize(self.traces, self.seconds) if self.traces else None


def lane(pair: ModelPair, prompt_ids: list[int], settings: Settings, speculative: bool, lock=MODEL_LOCK):
    """-> (TimedRun, generator of the run's passes) - each step updates the TimedRun and yields it."""
    run = TimedRun(SPECULATIVE if speculative else TARGET)
    source = rounds(pair, prompt_ids, settings) if speculative else target_steps(pair, prompt_ids, settings)

    def passes() -> Iterator[TimedRun]:
        for item, seconds in locked_steps(source, lock):
            run.seconds += seconds
            run.pass_seconds.append(seconds)
            if speculative:
                run.traces.append(item)
                run.token_ids += item.emitted_tokens
            else:
                run.token_ids.append(item.token)
            yield run
        run.finished = True

    return run, passes()


def timed_run(pair, prompt_ids, settings, speculative: bool, lock=MODEL_LOCK) -> TimedRun:
    run, passes = lane(pair, prompt_ids, settings, speculative, lock)
    for _ in passes:
        pass
    return run


def warm_up(pair: ModelPair, prompt_ids: list[int], lock=MODEL_LOCK) -> None:
    """First calls pay for lazy initialisation (kernels, allocator): keep that out of any number."""
    short = Settings(gamma=2, max_new_tokens=4)
    for speculative in (True, False):
        timed_run(pair, prompt_ids, short, speculative, lock)


# -- 1. the live race -------------------------------------------------------------------------


def race(pair, prompt_ids, settings, lock=MODEL_LOCK) -> Iterator[tuple[TimedRun, TimedRun]]:
    """Speculative vs target-only on one prompt, interleaved by their own clocks: the lane that has
    spent less compute so far takes the next pass, so on screen both advance as if side by side on
    two identical machines. Yields (speculative, target) after every pass."""
    spec, spec_passes = lane(pair, prompt_ids, settings, True, lock)
    plain, plain_passes = lane(pair, prompt_ids, settings, False, lock)
    while not (spec.finished and plain.finished):
        behind = spec_passes if not spec.finished and (plain.finished or spec.seconds <= plain.seconds) else (
            plain_passes
        )  # fmt: skip
        next(behind, None)
        yield spec, plain


@dataclass(frozen=True)
class SpeedupReport:
    measured: float  # speculative tokens/s over target-only tokens/s
    alpha: float
    gamma: float  # tokens drafted per round, on average
    cost_ratio: float  # c: one drafted token's time / one plain decoding step
    verify_overhead: float  # v: a round's cost besides drafting / one plain step (1 in the paper)
    theoretical: float  # the paper: E[tokens per pass] / (γc + 1)
    theoretical_on_hardware: float  # the same with this machine's verification cost: / (γc + v)
    tokens_per_pass: float


def speedup_model(alpha: float, gamma: float, cost_ratio: float, verify_overhead: float = 1.0) -> float:
    """Expected speed-up: E[tokens per pass] / (γc + v). v = 1 is the paper's Theorem 3.8."""
    g = max(int(round(gamma)), 0)
    return expected_tokens_per_pass(alpha, g) / (gamma * cost_ratio + verify_overhead)


def speedup_report(spec: TimedRun, plain: TimedRun) -> SpeedupReport | None:
    m = spec.metrics()
    if m is None or not plain.token_ids or not spec.token_ids:
        return None
    # Everything relative to one plain decoding step, as the paper does.
    step = plain.seconds / len(plain.pass_seconds)
    cost_ratio = (m.draft_seconds / m.drafted) / step if m.drafted else 0.0
    # v: what a round costs besides drafting (the verification pass and the round's bookkeeping),
    # measured from the same clock as the speed-up, in plain steps.
    overhead = (spec.seconds - m.draft_seconds) / m.rounds / step
    # E[tokens per pass] averaged over the rounds' real draft lengths (an n-gram drafter often
    # proposes fewer than γ).
    expected = sum(expected_tokens_per_pass(m.alpha, t.gamma) for t in spec.traces) / m.rounds
    return SpeedupReport(
        measured=spec.tokens_per_second / plain.tokens_per_second if plain.tokens_per_second else 0.0,
        alpha=m.alpha,
        gamma=m.mean_drafted,
        cost_ratio=cost_ratio,
        verify_overhead=overhead,
        theoretical=expected / (m.mean_drafted * cost_ratio + 1.0),
        theoretical_on_hardware=expected / (m.mean_drafted * cost_ratio + overhead),
        tokens_per_pass=m.tokens_per_pass,
    )


def gamma_sweep(pair, prompt_ids, settings, gammas=range(1, 9), lock=MODEL_LOCK) -> Iterator[dict]:
    """Target-only once, then speculative at each γ: one row per γ, yielded as it is measured."""
    plain = timed_run(pair, prompt_ids, settings, False, lock)
    for gamma in gammas:
        spec = timed_run(pair, prompt_ids, replace(settings, gamma=gamma), True, lock)
        report = speedup_report(spec, plain)
        yield {
            "gamma": gamma,
            "speedup": report.measured if report else 0.0,
            "theory": report.theoretical_on_hardware if report else 0.0,
            "alpha": report.alpha if report else 0.0,
            "tokens_per_pass": report.tokens_per_pass if report else 0.0,
            "tokens_per_second": spec.tokens_per_second,
            "target_tokens_per_second": plain.tokens_per_second,
        }


# -- 2. prompt sets ---------------------------------------------------------------------------


def prompt_set_runs(pair, prompt_sets: dict[str, list[str]], settings, chat: bool,
                    lock=MODEL_LOCK) -> Iterator[dict]:  # fmt: skip
    """Every prompt of every set, speculative and target-only (who goes first alternates): one row each."""
    number = 0
    for category, prompts in prompt_sets.items():
        for index, prompt in enumerate(prompts):
            prompt_ids = pair.encode_prompt(prompt, chat, settings.max_new_tokens)
            order = (True, False) if number % 2 == 0 else (False, True)
            runs = {
                speculative: timed_run(pair, prompt_ids, settings, speculative, lock) for speculative in order
            }
            number += 1
            m = runs[True].metrics()
            yield {
                "category": category,
                "prompt": index + 1,
                "text": prompt,
                "acceptance_rate": m.acceptance_rate if m else 0.0,
                "alpha": m.alpha if m else 0.0,
                "tokens_per_pass": m.tokens_per_pass if m else 0.0,
                "drafted_per_round": m.mean_drafted if m else 0.0,
                "speculative_tokens_per_second": runs[True].tokens_per_second,
                "target_tokens_per_second": runs[False].tokens_per_second,
                "speedup": runs[True].tokens_per_second / runs[False].tokens_per_second
                if runs[False].tokens_per_second else 0.0,
            }  # fmt: skip


def category_summary(rows: list[dict]) -> list[dict]:
    """Per category: medians of the per-prompt numbers (robust to one odd prompt)."""
    out = []
    for category in dict.fromkeys(r["category"] for r in rows):
        mine = [r for r in rows if r["category"] == category]
        out.append({"category": category, "prompts": len(mine)} | {
            key: median(r[key] for r in mine)
            for key in ("acceptance_rate", "tokens_per_pass", "speedup")
        })  # fmt: skip
    return out


# -- 3. the guarantee -------------------------------------------------------------------------


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
        tally.drafted += sum(t.gamma for t in spec.traces)
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


# -- 4. the idle machine ----------------------------------------------------------------------


def forward_costs(pair, prompt_ids, sizes=(1, 2, 4, 8, 16, 32), repeats: int = 5,
                  lock=MODEL_LOCK) -> Iterator[dict]:  # fmt: skip
    """The target's cached forward pass over n new tokens (after the prompt), median of `repeats`."""
    target = CachedModel(pair.target.model, pair.target.vocab_size)
    with lock:
        target.extend(prompt_ids, keep_last=1)
    filler = (prompt_ids * (max(sizes) // len(prompt_ids) + 1))[: max(sizes)]
    with lock:  # one untimed pass per size first: allocations and kernel choices
        for n in sizes:
            target.extend(filler[:n])
            target.rollback(len(prompt_ids))
    for n in sizes:
        times = []
        for _ in range(repeats):
            with lock:
                start = time.perf_counter()
                target.extend(filler[:n])  # returns logits on the CPU: the device has finished
                times.append(time.perf_counter() - start)
                target.rollback(len(prompt_ids))
        yield {"tokens": n, "seconds": median(times), "min_seconds": min(times), "max_seconds": max(times)}


def device_name(pair: ModelPair) -> str:
    device = pair.target.device
    if device.type == "cuda":
        return f"GPU ({torch.cuda.get_device_name(device)})"
    return f"CPU ({torch.get_num_threads()} thread(s) for torch)"


# -- 5. drafters side by side -----------------------------------------------------------------


def compare_drafters(pairs: dict[str, ModelPair], prompt_ids, settings, lock=MODEL_LOCK,
                     should_stop: Callable[[], bool] = lambda: False) -> Iterator[dict]:  # fmt: skip
    """Target-only once, then each drafter on the same prompt and settings: one row per drafter."""
    any_pair = next(iter(pairs.values()))
    plain = timed_run(any_pair, prompt_ids, settings, False, lock)
    yield {"drafter": TARGET, "tokens_per_second": plain.tokens_per_second, "speedup": 1.0,
           "acceptance_rate": None, "tokens_per_pass": 1.0, "drafted_per_round": 0.0,
           "text": any_pair.decode(plain.token_ids)}  # fmt: skip
    for name, pair in pairs.items():
        if should_stop():
            return
        spec = timed_run(pair, prompt_ids, settings, True, lock)
        m = spec.metrics()
        yield {
            "drafter": name,
            "tokens_per_second": spec.tokens_per_second,
            "speedup": spec.tokens_per_second / plain.tokens_per_second if plain.tokens_per_second else 0.0,
            "acceptance_rate": m.acceptance_rate if m else 0.0,
            "tokens_per_pass": m.tokens_per_pass if m else 0.0,
            "drafted_per_round": m.mean_drafted if m else 0.0,
            "cost_ratio": m.cost_ratio if m else 0.0,
            "text": pair.decode(spec.token_ids),
            "origins": [(t.emitted_tokens, t.num_accepted, t.is_bonus, t.gamma) for t in spec.traces],
        }


def with_drafter(pair: ModelPair, drafter: str) -> ModelPair:
    """The same loaded target with another drafter ("ngram" or a draft model's name): no second target."""
    from specdec.models import check_tokenizers_match, load_model
    from specdec.pair import NGRAM

    if drafter == NGRAM:
        return ModelPair(pair.target, None)
    if pair.draft is not None and pair.draft.name == drafter:
        return pair
    draft = load_model(drafter, fast=True)
    check_tokenizers_match(pair.target, draft)
    return ModelPair(pair.target, draft)
