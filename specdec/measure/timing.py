"""Timed runs for the instructor pages, with no Streamlit: races, γ sweeps, prompt sets, pass costs.

Every function that runs the models advances them one pass at a time under `lock` (the process-wide
model lock by default) and releases it in between, so other sessions interleave; long work is a
generator the caller can stop between steps. Times are measured inside the lock: waiting for
another session is never counted as compute.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from statistics import median

import torch

from specdec.clock import now
from specdec.config import Settings
from specdec.core import stopwatch
from specdec.core.cached_model import CachedModel
from specdec.core.metrics import RunMetrics, SpeedupTheory, speedup_theory, summarize
from specdec.core.records import RoundTrace
from specdec.core.rounds import PREFILL
from specdec.errors import SpecDecError
from specdec.models.pair import ModelPair
from specdec.models.runs import rounds, target_steps
from specdec.serving.lock import MODEL_LOCK, locked_steps

SPECULATIVE, TARGET = "speculative", "target only"


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
    # Lean traces: a race shows rates and acceptance, never the per-position top-token tables.
    source = (rounds(pair, prompt_ids, settings, detail=False) if speculative
              else target_steps(pair, prompt_ids, settings))

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


def race_lanes(lanes: dict[str, tuple[ModelPair, Settings, bool]], prompt_ids: list[int],
               lock=MODEL_LOCK) -> Iterator[dict[str, TimedRun]]:
    """Several decoders on one prompt, interleaved by their own clocks: the lane that has spent the
    least compute so far takes the next pass, so on screen all advance as if side by side on identical
    machines. `lanes`: label -> (pair, settings, speculative). Yields every lane's run after each pass."""
    runs, passes = {}, {}
    for label, (pair, settings, speculative) in lanes.items():
        runs[label], passes[label] = lane(pair, prompt_ids, settings, speculative, lock)
        runs[label].label = label
    while not all(run.finished for run in runs.values()):
        running = [label for label, run in runs.items() if not run.finished]
        behind = min(running, key=lambda label: runs[label].seconds)
        next(passes[behind], None)
        yield runs


def race(pair, prompt_ids, settings, lock=MODEL_LOCK) -> Iterator[tuple[TimedRun, TimedRun]]:
    """Speculative vs target-only on one prompt (race_lanes with two lanes): yields (speculative,
    target) after every pass."""
    lanes = {SPECULATIVE: (pair, settings, True), TARGET: (pair, settings, False)}
    for runs in race_lanes(lanes, prompt_ids, lock):
        yield runs[SPECULATIVE], runs[TARGET]


def race_points(run: TimedRun) -> list[tuple[float, int]]:
    """(compute seconds, tokens) after each pass of a run, from (0, 0)."""
    points, seconds, tokens = [(0.0, 0)], 0.0, 0
    per_pass = [len(t.emitted_tokens) for t in run.traces] if run.traces else [1] * len(run.pass_seconds)
    for pass_seconds, count in zip(run.pass_seconds, per_pass, strict=False):
        seconds += pass_seconds
        tokens += count
        points.append((seconds, tokens))
    return points


def cumulative_speedup(spec: TimedRun, plain: TimedRun) -> list[tuple[int, float]]:
    """After each speculative round: (its tokens so far, its tokens/s so far over target-only's tokens/s
    in the same compute time)."""
    points, spec_tokens, spec_time = [], 0, 0.0
    for trace, seconds in zip(spec.traces, spec.pass_seconds, strict=False):
        spec_tokens += len(trace.emitted_tokens)
        spec_time += seconds
        elapsed, count = 0.0, 0
        for step in plain.pass_seconds:  # target-only tokens produced within the same compute time
            if elapsed + step > spec_time:
                break
            elapsed += step
            count += 1
        plain_rate = count / elapsed if count else plain.tokens_per_second
        if plain_rate:
            points.append((spec_tokens, (spec_tokens / spec_time) / plain_rate))
    return points


@dataclass(frozen=True)
class SpeedupReport:
    measured: float  # speculative tokens/s over target-only tokens/s, on the same clock
    tokens_per_pass: float
    theory: SpeedupTheory  # α, c, v and the expected speed-ups, in units of one plain step


def speedup_report(spec: TimedRun, plain: TimedRun) -> SpeedupReport | None:
    """The race's measured speed-up next to the formula's, everything relative to one plain step."""
    m = spec.metrics()
    if m is None or not plain.token_ids or not spec.token_ids:
        return None
    plain_step = plain.seconds / len(plain.pass_seconds)
    return SpeedupReport(
        measured=spec.tokens_per_second / plain.tokens_per_second if plain.tokens_per_second else 0.0,
        tokens_per_pass=m.tokens_per_pass,
        theory=speedup_theory(spec.traces, plain_step, spent_seconds=spec.seconds),
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
            "theory": report.theory.on_this_machine if report else 0.0,
            "alpha": report.theory.alpha if report else 0.0,
            "tokens_per_pass": report.tokens_per_pass if report else 0.0,
            "tokens_per_second": spec.tokens_per_second,
            "target_tokens_per_second": plain.tokens_per_second,
        }


# -- 2. prompt sets ---------------------------------------------------------------------------


def prompt_set_runs(pair, prompt_sets: dict[str, list[str]], settings, chat: bool,
                    lock=MODEL_LOCK) -> Iterator[dict]:
    """Every prompt of every set, speculative and target-only (who goes first alternates): one row each.
    Round robin, the first prompt of every set before any second one, so that a page drawing the rows
    as they come shows every kind early (code and prose within the first few runs)."""
    number = 0
    rounds = max((len(prompts) for prompts in prompt_sets.values()), default=0)
    for index in range(rounds):
        for category, prompts in prompt_sets.items():
            if index >= len(prompts):
                continue
            prompt = prompts[index]
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
            }


PROMPT_SET_NUMBERS = ("acceptance_rate", "tokens_per_pass", "speedup")


def saved_results(pair: ModelPair, settings: Settings, chat: bool, rows: list[dict]) -> dict:
    """A prompt-set run as the page saves it (JSON), to be reloaded and checked by check_saved_results."""
    sampling = settings.sampling
    return {"target": pair.target.name, "drafter": pair.drafter_name,
            "settings": {"gamma": settings.gamma, "temperature": sampling.temperature,
                         "top_k": sampling.top_k, "top_p": sampling.top_p,
                         "max_new_tokens": settings.max_new_tokens, "chat": chat},
            "rows": rows}


def check_saved_results(data: object) -> dict:
    """Saved prompt-set results (the page's JSON download), checked for keys and types, or SpecDecError."""
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise SpecDecError("that file is not saved results from this page (expected JSON with a 'rows' list)")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not {"category", "prompt", *PROMPT_SET_NUMBERS} <= row.keys():
            raise SpecDecError(f"row {number} of the file lacks category, prompt, acceptance_rate, "
                               "tokens_per_pass or speedup")
        for key in PROMPT_SET_NUMBERS:
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SpecDecError(f"row {number} of the file: {key} must be a number, got {value!r}")
    return data


def category_summary(rows: list[dict]) -> list[dict]:
    """Per category: medians of the per-prompt numbers (robust to one odd prompt)."""
    out = []
    for category in dict.fromkeys(r["category"] for r in rows):
        mine = [r for r in rows if r["category"] == category]
        out.append({"category": category, "prompts": len(mine)} | {
            key: median(r[key] for r in mine)
            for key in PROMPT_SET_NUMBERS
        })
    return out


# -- 3. the idle machine ----------------------------------------------------------------------


def forward_cost_by_size(pair, prompt_ids, sizes=(1, 2, 4, 8, 16, 32), repeats: int = 5,
                  lock=MODEL_LOCK) -> Iterator[dict]:
    """The target's cached forward pass over n new tokens (after the prompt), median of `repeats`.
    Its logits stay on the model's device, as a verification pass's do: nothing of them is copied to
    the host inside the timing (the clock waits for a GPU's queued work itself: specdec.clock)."""
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
                start = now()
                target.extend(filler[:n])
                times.append(now() - start)
                target.rollback(len(prompt_ids))
        yield {"tokens": n, "seconds": median(times), "min_seconds": min(times), "max_seconds": max(times)}


def round_breakdown(pair: ModelPair, prompt_ids: list[int], settings: Settings, detail: bool,
                    repeats: int = 3, lock=MODEL_LOCK) -> dict[str, float]:
    """Where a round's time goes: milliseconds per round in each stage of the loop (core.rounds),
    plus "other" (the loop itself), over `repeats` whole runs. `detail`: with the top-token tables
    the round view shows (its trace stage), or lean as bench and races run."""
    return per_round(list(breakdown_runs(pair, prompt_ids, settings, detail, repeats, lock)))


def breakdown_runs(pair: ModelPair, prompt_ids: list[int], settings: Settings, detail: bool,
                   repeats: int = 3, lock=MODEL_LOCK) -> Iterator[tuple[int, float, dict[str, float]]]:
    """round_breakdown's runs one by one, as (rounds, seconds in all, seconds per stage of the loop),
    so a page can show progress between them."""
    for _ in range(repeats):
        rounds_run, wall = 0, 0.0
        with stopwatch.measuring() as seconds:
            for _trace, step_seconds in locked_steps(rounds(pair, prompt_ids, settings, detail=detail), lock):
                rounds_run += 1
                wall += step_seconds
        yield rounds_run, wall, dict(seconds)


def per_round(runs: list[tuple[int, float, dict[str, float]]]) -> dict[str, float]:
    """Milliseconds per round in each stage, and "other", over the runs of breakdown_runs."""
    totals: dict[str, float] = {}
    rounds_run = sum(count for count, _, _ in runs)
    wall = sum(seconds for _, seconds, _ in runs)
    for _, _, stages in runs:
        for name, value in stages.items():
            totals[name] = totals.get(name, 0.0) + value
    wall -= totals.pop(PREFILL, 0.0)  # once per run, not per round
    rounds_run = max(rounds_run, 1)
    per_stage = {name: 1000 * value / rounds_run for name, value in totals.items()}
    per_stage["other"] = max(0.0, 1000 * wall / rounds_run - sum(per_stage.values()))
    return per_stage


def device_name(pair: ModelPair) -> str:
    device = pair.target.device
    if device.type == "cuda":
        return f"GPU ({torch.cuda.get_device_name(device)})"
    return f"CPU ({torch.get_num_threads()} thread(s) for torch)"


# -- 4. drafters side by side -----------------------------------------------------------------


def drafter_row(run: TimedRun, plain: TimedRun, pair: ModelPair) -> dict:
    """One lane of a drafter race as a row: its rate, speed-up over the target-only lane, acceptance."""
    m = run.metrics()
    row = {
        "drafter": run.label,
        "tokens_per_second": run.tokens_per_second,
        "speedup": run.tokens_per_second / plain.tokens_per_second if plain.tokens_per_second else 0.0,
        "acceptance_rate": m.acceptance_rate if m else None,
        "tokens_per_pass": m.tokens_per_pass if m else 1.0,
        "drafted_per_round": m.mean_drafted if m else 0.0,
        "text": pair.decode(run.token_ids),
    }
    if run.traces:
        row["origins"] = [(t.emitted_tokens, t.num_accepted, t.is_bonus, t.num_drafted) for t in run.traces]
    return row
