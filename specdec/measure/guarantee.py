"""The guarantee, measured: the rule on toy distributions, sampled outcomes of both ways, greedy equality.

No Streamlit here; the models run one pass at a time under the model lock (see timing.locked_steps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from specdec.config import SPECULATIVE
from specdec.core.rounds import prefill
from specdec.core.sampling import warp_probs
from specdec.errors import SpecDecError
from specdec.measure.stats import chi_square_two_sample, tv_distance, tv_noise_band
from specdec.measure.timing import race, timed_run
from specdec.serving.lock import MODEL_LOCK

# The page's prompt: it ends in a repeat (" red,"), so an n-gram drafter proposes what followed it, and
# the next colour is open.
SAMPLE_PROMPT = "red, green, blue, red, yellow, blue, red,"
# The page's default (quick) run: a first answer well within 20 s on the 2-core machine (docs/LOG.md,
# "No dead air"); the full run, one click more, takes the page's sample count.
QUICK_SAMPLES = 20


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
    """Outcomes (the first few tokens) of many short runs of both kinds, and what the rule did.

    The negative control is the draft alone: the tokens the speculative run drafted first, as if
    every draft were accepted. It is not the target's distribution (unless the draft is the target),
    and how far it is from it at the first token is known exactly: 1 − Σ min(p, q), the chance the
    rule rejects the first draft (`draft_tv`)."""

    num_tokens: int
    speculative: Counter = field(default_factory=Counter)
    target: Counter = field(default_factory=Counter)
    control: Counter = field(default_factory=Counter)  # the first num_tokens drafts, where drafted
    drafted: int = 0
    rejected: int = 0
    draft_tv: float | None = None  # TV(p, q) at the first token, exact: 1 − Σ min(p, q)

    @property
    def samples(self) -> int:
        return min(sum(self.speculative.values()), sum(self.target.values()))


def sample_outcomes(pair, prompt_ids, settings, num_samples: int, num_tokens: int = 1,
                    lock=MODEL_LOCK) -> Iterator[SampleTally]:
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
        first = spec.traces[0] if spec.traces else None
        if first is not None and len(first.drafted_tokens) >= num_tokens:
            tally.control[tuple(first.drafted_tokens[:num_tokens])] += 1
        if first is not None and first.expected_accept and first.rule == SPECULATIVE:
            tally.draft_tv = max(0.0, 1.0 - first.expected_accept[0])
        tally.drafted += sum(t.num_drafted for t in spec.traces)
        tally.rejected += sum(t.num_tested - t.num_accepted for t in spec.traces)
        yield tally


def exact_outcomes(pair, prompt_ids: list[int], settings, num_tokens: int = 1,
                   lock=MODEL_LOCK) -> dict[tuple[int, ...], float]:
    """The target's own law of what the samples count, exactly: {first num_tokens tokens: probability}
    under the section's warp. p itself for one token; p(x)·p(y | x) for two (one target pass per x
    that p can emit; a stop token x ends the outcome at (x,), as it ends a sample)."""
    target = pair.new_target()
    with lock:
        for _ in prefill(target, prompt_ids):
            pass
        first = warp_probs(target.extend(prompt_ids[-1:]), settings.sampling)[0].cpu().double()
    law = {}
    read = target.cache_length  # the prompt and its last token
    for x in first.nonzero().flatten().tolist():
        p_x = float(first[x])
        if num_tokens == 1 or x in pair.stop_token_ids:
            law[(x,)] = p_x
            continue
        with lock:
            target.rollback(read)
            second = warp_probs(target.extend([x]), settings.sampling)[0].cpu().double()
        for y in second.nonzero().flatten().tolist():
            law[(x, y)] = p_x * float(second[y])
    return law


@dataclass(frozen=True)
class Comparison:
    """One sample against the target-only sample: their TV, the noise band of two samples of these
    sizes from one distribution (95 % of re-splits fall inside it), and the χ² test's p-value."""

    tv: float
    band: float
    p_value: float

    @property
    def inside(self) -> bool:
        return self.tv <= self.band


def compare(sample: Counter, target: Counter) -> Comparison | None:
    """`sample` against `target`; None while either is empty."""
    if not sum(sample.values()) or not sum(target.values()):
        return None
    return Comparison(tv_distance(sample, target), tv_noise_band(sample, target),
                      chi_square_two_sample(sample, target).p_value)


def verdict_words(tally: SampleTally, full_samples: int) -> tuple[str, str]:
    """The page's claim read against this run's numbers: (speculative against the target, the draft
    alone against the target), each a sentence with its figures. Says plainly when the run is too
    small to resolve the draft from the target, and roughly what `full_samples` would resolve."""
    spec, control = compare(tally.speculative, tally.target), compare(tally.control, tally.target)
    n = tally.samples
    if spec is None:
        return "No samples yet.", ""
    if spec.inside:
        first = (f"Speculative sampling lands inside the noise band: TV {spec.tv:.3f} ≤ {spec.band:.3f}, "
                 f"what two samples of {n} from one distribution differ by 19 times in 20 "
                 f"(χ² p = {spec.p_value:.2f}).")
    else:
        first = (f"Speculative sampling lands outside the noise band this time: TV {spec.tv:.3f} > "
                 f"{spec.band:.3f} (χ² p = {spec.p_value:.2f}). Samples from one distribution do that 1 time "
                 "in 20 by chance alone: run again, or run the full run.")
    if control is None:
        return first, "The drafter proposed nothing here, so there is no draft-alone control."
    exact = ("" if tally.draft_tv is None
             else f" (exactly {tally.draft_tv:.3f} at the first token: 1 − Σ min(p, q))")
    if not control.inside:
        second = (f"The negative control, the draft alone (every draft accepted), is caught: TV "
                  f"{control.tv:.3f} from the target, outside its band {control.band:.3f}{exact}.")
    elif tally.draft_tv is not None and tally.draft_tv < control.band:
        resolves = control.band * (n / full_samples) ** 0.5 if full_samples > n else control.band
        second = (f"This run cannot resolve the negative control: the draft alone differs from the target by "
                  f"TV {tally.draft_tv:.3f} at the first token, less than the {control.band:.3f} that {n} "
                  f"samples a side can tell from noise (measured: TV {control.tv:.3f}). The full run "
                  f"({full_samples} a side) resolves about {resolves:.3f}.")
    else:
        second = (f"The negative control, the draft alone, was not caught this time: TV {control.tv:.3f}, "
                  f"inside its band {control.band:.3f}{exact}; at {n} samples a side a difference this "
                  "size is near the edge of what the noise lets through: run the full run.")
    return first, second


@dataclass(frozen=True)
class GreedyCheck:
    speculative: list[int]
    target: list[int]
    first_difference: int | None  # index of the first differing token, None if equal throughout
    finished: bool = True  # False: a check under way, over the tokens made so far


def _greedy_check(spec: list[int], plain: list[int], finished: bool) -> GreedyCheck:
    first = next((i for i, (a, b) in enumerate(zip(spec, plain, strict=False)) if a != b), None)
    if first is None and finished and len(spec) != len(plain):
        first = min(len(spec), len(plain))
    return GreedyCheck(list(spec), list(plain), first, finished)


def greedy_steps(pair, prompt_ids, settings, lock=MODEL_LOCK) -> Iterator[GreedyCheck]:
    """Speculative and target-only decoding at temperature 0, side by side (timing.race: pass by pass,
    the one behind on compute next); yields the check so far once per token made, either side's, so a
    page can show both texts growing and count the time left in tokens (2 × max_new_tokens at most)."""
    greedy = replace(settings, sampling=replace(settings.sampling, temperature=0.0))
    made, last, spec, plain = 0, None, [], []
    for spec_run, plain_run in race(pair, prompt_ids, greedy, lock):
        spec, plain = spec_run.token_ids, plain_run.token_ids
        check = _greedy_check(spec, plain, spec_run.finished and plain_run.finished)
        for _ in range(len(spec) + len(plain) - made):
            yield check
            last = check
        made = len(spec) + len(plain)
    if last is None or not last.finished:  # the race ends on a pass that makes no token: the verdict
        yield _greedy_check(spec, plain, True)


def greedy_check(pair, prompt_ids, settings, lock=MODEL_LOCK) -> GreedyCheck:
    *_, last = greedy_steps(pair, prompt_ids, settings, lock)
    return last
