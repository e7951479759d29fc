"""The rule on trial: every acceptance rule sampled on one prompt, against the target alone; and the
exact rule's acceptance over a range of temperatures. No Streamlit here.

A trial draws many short samples of each kind, each with its own seeds: the target alone (twice, in
two independent halves: how far apart they fall, over re-splits of their outcomes, is the noise
floor) and each rule. The prompt is read once; after every sample both caches roll back to it.

A speculative sample is one round from the prompt: the draft proposes up to γ tokens and the target
scores them in one pass, then every rule judges those same drafts with a generator of its own
(core.rounds.judge, the round loop's own step). A rule's samples stay independent of each other, and
the rules are compared on the same drafts; each rule's acceptance, tokens per pass and speed-up count
that shared round's time. Where a rule's round emitted fewer tokens than are compared, it goes on
alone through the round loop. Every sample starts at the same first position, where each rule's
expected acceptance is one number.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from statistics import median

import torch

from specdec.clock import now
from specdec.config import RULE_NAMES, SPECULATIVE, Settings
from specdec.core.acceptance import RULES
from specdec.core.rounds import draft_thresholds, judge, target_only_steps
from specdec.core.sampling import warp_probs
from specdec.errors import SpecDecError
from specdec.measure.exact import (
    YOURS,
    CustomRule,
    Position,
    exact_laws,
    lossless_everywhere,
    position_of,
    rule_named,
)
from specdec.measure.stats import chi_square_two_sample, tv_distance, tv_noise_band, tv_noise_floor
from specdec.measure.timing import timed_run
from specdec.models.pair import ModelPair
from specdec.models.runs import RunModels, rounds
from specdec.paths import ASSETS
from specdec.serving.lock import MODEL_LOCK, locked_steps

SWEEP_TEMPERATURES = (0.0, 0.3, 0.6, 1.0, 1.5)
SWEEP_SETS = (ASSETS / "prompts" / "code.json", ASSETS / "prompts" / "prose.json")


@dataclass
class RuleTally:
    """One rule's samples: outcomes (the first tokens), and what its rounds did."""

    rule: str
    outcomes: Counter = field(default_factory=Counter)
    samples: int = 0
    rounds: int = 0  # target passes
    emitted: int = 0
    drafted: int = 0
    tested: int = 0
    accepted: int = 0
    expected_accepted: float = 0.0  # Σ of the rule's expected acceptance over the tested positions
    first_tested: int = 0  # samples that drafted at least one token (always, with a model drafter)
    first_kept: int = 0  # ... whose first draft was kept
    first_expected: float = 0.0  # the rule's expected acceptance at the first position (one p, one q)
    seconds: float = 0.0  # compute time of its rounds (the prompt is read once, before any sample)

    @property
    def alpha(self) -> float:
        return self.accepted / self.tested if self.tested else 0.0

    @property
    def expected_alpha(self) -> float:
        return self.expected_accepted / self.tested if self.tested else 0.0

    @property
    def first_acceptance(self) -> float:
        return self.first_kept / self.first_tested if self.first_tested else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.emitted / self.seconds if self.seconds else 0.0


@dataclass
class TargetTally:
    """Target-only samples, in two halves drawn with seeds of their own."""

    halves: tuple[Counter, Counter] = field(default_factory=lambda: (Counter(), Counter()))
    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


@dataclass
class Trial:
    num_tokens: int
    settings: Settings
    target: TargetTally = field(default_factory=TargetTally)
    rules: dict[str, RuleTally] = field(default_factory=dict)
    custom: CustomRule | None = None  # the student's rule, named YOURS in `rules`
    first: Position | None = None  # p and q at the first position, where the exact laws are computed

    @property
    def samples(self) -> int:
        return min((t.samples for t in self.rules.values()), default=0)


@dataclass(frozen=True)
class RuleResult:
    """One rule's row: what the page shows, the chart plots and `python -m specdec rules` prints."""

    rule: str
    title: str
    lossless: bool
    temperature: float
    samples: int
    alpha: float  # accepted / tested drafts, all positions
    expected_alpha: float  # the rule's expected acceptance, averaged over the same tested positions
    first_acceptance: float  # the first draft kept, measured
    first_expected: float  # ... and expected from p and q there (Σ min(p, q), Σ p·q, ...)
    tokens_per_pass: float
    speedup: float  # its tokens/s over the target alone's, on the same clock
    tv: float  # its first tokens' distance from the target's (first half)
    # What sampling alone gives: the target halves' TV, averaged over re-splits of their outcomes
    tv_noise_floor: float
    chi2_p: float  # χ² test of its first tokens against the target's first half
    # Exact, from p and q at the first position (measure.exact): the first token's law's TV from p, and
    # P(the first draft is kept). None where the trial has no first round yet.
    tv_exact: float | None = None
    acceptance_exact: float | None = None
    # The noise floor as an interval [0, band]: the re-split TVs' 95th percentile. A lossless rule's TV
    # falls inside it about 19 times in 20 (measure.stats.tv_noise_band)
    tv_noise_band: float = 0.0

    def to_json(self) -> dict:
        keys = ("rule", "lossless", "temperature", "alpha", "tokens_per_pass", "speedup", "tv",
                "tv_noise_floor", "chi2_p", "tv_exact", "acceptance_exact")
        return {key: getattr(self, key) for key in keys}


def _first_tokens(tokens: list[int], num_tokens: int) -> tuple[int, ...]:
    return tuple(tokens[:num_tokens])


def _target_sample(models: RunModels, pair, prompt_ids, sampling, generator, num_tokens,
                   lock) -> tuple[list[int], float]:
    steps = target_only_steps(models.target, prompt_ids, sampling, generator, num_tokens, pair.stop_token_ids)
    tokens, seconds = [], 0.0
    for step, step_seconds in locked_steps(steps, lock):
        tokens.append(step.token)
        seconds += step_seconds
    return tokens, seconds


def _count_round(tally: RuleTally, drafted: int, accepted: int, expected: list[float], emitted: int,
                 seconds: float, first: bool) -> None:
    tested = min(accepted + 1, drafted)
    tally.rounds += 1
    tally.seconds += seconds
    tally.emitted += emitted
    tally.drafted += drafted
    tally.tested += tested
    tally.accepted += accepted
    tally.expected_accepted += sum(expected[:tested])
    if first and drafted:
        tally.first_tested += 1
        tally.first_kept += accepted > 0
        tally.first_expected = expected[0]


def _shared_round(models: RunModels, prompt_ids, settings: Settings, generator, lock):
    """Steps 1 and 2 of the round loop (core.rounds), once for every rule: up to γ drafts, one target
    pass over them. -> (draft, p at the k + 1 positions, seconds)."""
    thresholds = draft_thresholds(settings, models.target.pass_costs)
    with lock:
        start = now()
        draft = models.drafter.propose(prompt_ids, settings.gamma, settings.sampling, generator, thresholds)
        logits = models.target.extend([prompt_ids[-1], *draft.tokens.tolist()])  # (k + 1, vocab)
        target_probs = warp_probs(logits, settings.sampling)
        return draft, target_probs, now() - start


def _go_on(models: RunModels, pair, tokens: list[int], settings: Settings, needed: int, tally: RuleTally,
           lock) -> list[int]:
    """A rule's run after its first round, through the round loop, until `needed` more tokens."""
    emitted = []
    more = replace(settings, max_new_tokens=max(settings.gamma, needed) + 1)
    for trace, seconds in locked_steps(rounds(pair, tokens, more, models=models, detail=False), lock):
        _count_round(tally, trace.num_drafted, trace.num_accepted, trace.expected_accept,
                     len(trace.emitted_tokens), seconds, first=False)
        emitted += trace.emitted_tokens
        if len(emitted) >= needed:
            break
    return emitted


def rule_trial(pair: ModelPair, prompt_ids: list[int], settings: Settings, num_samples: int,
               num_tokens: int = 1, rules: tuple[str, ...] = RULE_NAMES, lock=MODEL_LOCK,
               custom: CustomRule | None = None) -> Iterator[Trial]:
    """`num_samples` samples of each rule and of each target half, seeds from settings.seed on, all
    disjoint; yields the trial after every round of samples (one of each kind), so a stop keeps a
    balanced part. `custom`: a student's rule, tried as YOURS (named in `rules`, or added to them)."""
    if num_samples < 2:
        raise SpecDecError(f"samples must be at least 2, got {num_samples}")
    if not 1 <= num_tokens <= 4:
        raise SpecDecError(f"tokens per sample must be 1 to 4, got {num_tokens}")
    if custom is not None and YOURS not in rules:
        rules = (*rules, YOURS)
    unknown = [r for r in rules if r not in RULES and not (r == YOURS and custom is not None)]
    if unknown:
        raise SpecDecError(f"unknown rule {unknown[0]!r}: use {', '.join(RULE_NAMES)}")
    if custom is not None and num_tokens > 1:
        raise SpecDecError("your own rule is compared on the first token only: use 1 token per sample")
    # Room for a first round of γ drafts and the target's own token (core.rounds leaves that room).
    short = replace(settings, max_new_tokens=settings.gamma + 1)
    trial = Trial(num_tokens, settings, rules={rule: RuleTally(rule) for rule in rules}, custom=custom)
    judges = {rule: rule_named(rule, custom) for rule in rules}
    models = RunModels.of(pair)
    with lock:
        for _ in models.prefill(prompt_ids, chunk_size=0):
            pass
    read = len(prompt_ids) - 1  # what both caches hold before every sample

    def reset() -> None:
        models.target.rollback(read)
        models.drafter.rollback(read)

    def seed_of(stream: int, i: int) -> int:
        """Sample i's seed in a stream of its own: 0 and 1 the target halves, 2 the drafts, then one per
        rule for its verdicts, then one per rule for rounds after the first."""
        return settings.seed + stream * num_samples + i

    def seeded(stream: int, i: int) -> torch.Generator:
        return torch.Generator().manual_seed(seed_of(stream, i))

    greedy, stops = settings.sampling.greedy, pair.stop_token_ids
    for i in range(num_samples):
        for half in (0, 1):
            tokens, seconds = _target_sample(models, pair, prompt_ids, short.sampling, seeded(half, i),
                                             num_tokens, lock)
            reset()
            trial.target.halves[half][_first_tokens(tokens, num_tokens)] += 1
            trial.target.tokens += len(tokens)
            trial.target.seconds += seconds
        draft, target_probs, seconds = _shared_round(models, prompt_ids, short, seeded(2, i), lock)
        if trial.first is None:  # the same p and q in every sample (whether it drafts depends on q alone)
            trial.first = position_of(0, prompt_ids, target_probs[0], draft, len(draft.tokens) > 0, greedy)
        kept = {}
        for number, rule in enumerate(rules):
            verdict, expected = judge(judges[rule], greedy, draft, target_probs, seeded(3 + number, i))
            emitted = [*draft.tokens[: verdict.num_accepted].tolist(), verdict.next_token]
            stop = next((j for j, token in enumerate(emitted) if token in stops), None)
            kept[rule] = (emitted if stop is None else emitted[: stop + 1], stop is not None)
            _count_round(trial.rules[rule], len(draft.tokens), verdict.num_accepted, expected.tolist(),
                         len(kept[rule][0]), seconds, first=True)
        for number, (rule, (emitted, stopped)) in enumerate(kept.items()):
            if len(emitted) < num_tokens and not stopped:  # compared tokens the first round did not give
                reset()
                alone = replace(short, rule=rule, seed=seed_of(3 + len(rules) + number, i))
                emitted += _go_on(models, pair, prompt_ids + emitted, alone, num_tokens - len(emitted),
                                  trial.rules[rule], lock)
            tally = trial.rules[rule]
            tally.outcomes[_first_tokens(emitted, num_tokens)] += 1
            tally.samples += 1
        reset()
        yield trial


def trial_results(trial: Trial) -> list[RuleResult]:
    """Each rule's row: acceptance, speed and distance from the target, beside the noise floor."""
    first_half, second_half = trial.target.halves
    if not sum(first_half.values()) or not sum(second_half.values()):
        return []
    floor = tv_noise_floor(first_half, second_half)
    band = tv_noise_band(first_half, second_half)
    plain = trial.target.tokens_per_second
    exact = exact_laws(trial.first, trial.custom) if trial.first is not None else {}
    results = []
    for tally in trial.rules.values():
        if not tally.samples:
            continue
        rule = rule_named(tally.rule, trial.custom)
        law = exact.get(tally.rule)
        lossless = rule.lossless if tally.rule != YOURS else lossless_everywhere(trial.custom, trial.first)
        results.append(RuleResult(
            rule=tally.rule, title=rule.title, lossless=lossless,
            temperature=trial.settings.sampling.temperature, samples=tally.samples,
            alpha=tally.alpha, expected_alpha=tally.expected_alpha,
            first_acceptance=tally.first_acceptance, first_expected=tally.first_expected,
            tokens_per_pass=tally.tokens_per_pass,
            speedup=tally.tokens_per_second / plain if plain else 0.0,
            tv=tv_distance(tally.outcomes, first_half), tv_noise_floor=floor, tv_noise_band=band,
            chi2_p=chi_square_two_sample(tally.outcomes, first_half).p_value,
            tv_exact=law.tv if law else None, acceptance_exact=law.acceptance if law else None,
        ))
    return results


# -- the temperature sweep -------------------------------------------------------------------------


def sweep_prompt_sets(paths=SWEEP_SETS, per_set: int | None = None) -> dict[str, list[str]]:
    """{set name: prompts} from the held-out sets (the first `per_set` of each, or all)."""
    sets = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        sets[data["name"]] = data["prompts"][:per_set] if per_set else data["prompts"]
    return sets


def temperature_sweep(pair: ModelPair, prompt_sets: dict[str, list[str]], settings: Settings, chat: bool,
                      temperatures=SWEEP_TEMPERATURES, lock=MODEL_LOCK) -> Iterator[dict]:
    """The exact rule on every prompt at every temperature, with target-only beside it (who goes first
    alternates): one row per prompt and temperature, yielded as it is measured."""
    exact = replace(settings, rule=SPECULATIVE)
    number = 0
    for temperature in temperatures:
        at = replace(exact, sampling=replace(exact.sampling, temperature=temperature))
        for category, prompts in prompt_sets.items():
            for index, prompt in enumerate(prompts):
                prompt_ids = pair.encode_prompt(prompt, chat, at.max_new_tokens)
                order = (True, False) if number % 2 == 0 else (False, True)
                runs = {speculative: timed_run(pair, prompt_ids, at, speculative, lock)
                        for speculative in order}
                number += 1
                traces = runs[True].traces
                tested = sum(t.num_tested for t in traces)
                expected = sum(sum(t.expected_accept[: t.num_tested]) for t in traces)
                m = runs[True].metrics()
                plain = runs[False].tokens_per_second
                yield {
                    "temperature": temperature, "category": category, "prompt": index + 1,
                    "alpha": m.alpha if m else 0.0,
                    "expected_alpha": expected / tested if tested else 0.0,
                    "tested": tested,
                    "tokens_per_pass": m.tokens_per_pass if m else 0.0,
                    "speedup": runs[True].tokens_per_second / plain if plain else 0.0,
                }


def sweep_summary(rows: list[dict]) -> list[dict]:
    """Per temperature and set: acceptance pooled over the prompts' tested drafts; tokens per pass
    and speed-up as medians over the prompts (robust to one odd prompt)."""
    out = []
    for key in dict.fromkeys((r["temperature"], r["category"]) for r in rows):
        mine = [r for r in rows if (r["temperature"], r["category"]) == key]
        tested = sum(r["tested"] for r in mine)

        def pooled(key: str, rows=mine, tested=tested) -> float:
            return sum(r[key] * r["tested"] for r in rows) / tested if tested else 0.0

        out.append({
            "temperature": key[0], "category": key[1], "prompts": len(mine),
            "alpha": pooled("alpha"), "expected_alpha": pooled("expected_alpha"),
            "tokens_per_pass": median(r["tokens_per_pass"] for r in mine),
            "speedup": median(r["speedup"] for r in mine),
        })
    return out
