"""Each rule's exact answer at one position, beside the sampled one; and where along a target sample
of the prompt a lossy rule's loss is largest. No Streamlit here.

At a position the target gives p and the draft q (after the same warp). Every rule, the four built-in
ones as their `PRESETS` expressions and a student's own, then has an exact law (core.output_law),
an exact TV from p and an exact acceptance. Samples can only see a TV well above their noise floor,
which shrinks as 1/√samples; `unseen` says, in the position's own numbers, when they cannot.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from specdec.config import SPECULATIVE, TOP_CHOICE, Settings
from specdec.core.acceptance import RULES, Rule, Verdict
from specdec.core.drafters import Draft, worth_drafting
from specdec.core.output_law import REPLACEMENT_WORDS, acceptance, output_law, replacement, tv_from
from specdec.core.rounds import draft_thresholds
from specdec.core.sampling import sample, warp_probs
from specdec.errors import SpecDecError
from specdec.measure.rule_expression import PRESETS, RuleExpression, check_replacement, parse_rule
from specdec.models.runs import RunModels
from specdec.serving.lock import MODEL_LOCK

YOURS = "yours"  # the name a student's rule goes by in a trial
LOSSLESS_TV = 1e-9  # an exact TV below this is float rounding: the law is p
RESOLVED = 2.0  # an exact TV at least this many noise floors above zero is one the samples can see
SCAN_TOKENS = 48  # positions of a target sample that --position auto and the page's offer look at
_PRESET_EXPRESSIONS = {name: parse_rule(text) for name, (text, _) in PRESETS.items()}


@dataclass(frozen=True)
class Position:
    """p and q where the trial's first token is drawn. `index`: tokens of a target sample of the prompt
    before it (0: the prompt's own next token); `context` the token ids read."""

    index: int
    context: tuple[int, ...]
    target_probs: torch.Tensor  # (vocab,) float64, summing to 1
    draft_probs: torch.Tensor | None  # (vocab,) float64; None where the drafter proposes nothing
    drafts: bool  # whether a round drafts here (an adaptive draft length may decline to)
    greedy: bool  # temperature 0: every rule is the greedy rule


def _normalised(probs: torch.Tensor) -> torch.Tensor:
    """On the host in float64 (the model may have left `probs` on a GPU), summing to 1."""
    probs = probs.cpu().double()
    return probs / probs.sum()


def position_of(index: int, context, target_probs: torch.Tensor, draft: Draft, drafts: bool,
                greedy: bool) -> Position:
    """From the first drafted position of a round: p there, and the draft's q (if it drafted at all)."""
    draft_probs = _normalised(draft.probs[0]) if len(draft.tokens) else None
    return Position(index, tuple(context), _normalised(target_probs), draft_probs,
                    drafts and draft_probs is not None, greedy)


@dataclass(frozen=True)
class CustomRule:
    """A student's rule: keep x with probability `expression`, else draw from `on_reject`."""

    text: str
    on_reject: str
    expression: RuleExpression = field(compare=False, repr=False)

    @classmethod
    def of(cls, text: str, on_reject: str) -> CustomRule:
        """Checked: a bad expression or replacement raises SpecDecError with one line."""
        return cls(text.strip(), check_replacement(on_reject), parse_rule(text))


@dataclass(frozen=True)
class ExactLaw:
    law: torch.Tensor  # (vocab,) what the rule emits here
    tv: float  # from p
    acceptance: float  # P(the draft is kept)


def entropy(target_probs: torch.Tensor) -> torch.Tensor:
    """H as Medusa computes it (core.acceptance.typical_thresholds), over the last axis."""
    return -(target_probs * torch.log(target_probs + 1e-5)).sum(dim=-1)


def accept_everywhere(expression: RuleExpression, target_probs: torch.Tensor,
                      draft_probs: torch.Tensor) -> torch.Tensor:
    """a(x) for every x the draft can propose (q > 0), 0 elsewhere: (vocab,)."""
    support = draft_probs > 0
    accept = torch.zeros_like(target_probs, dtype=torch.float64)
    accept[support] = expression.accept_probs(target_probs[support], draft_probs[support],
                                              target_probs.max(), entropy(target_probs))
    return accept


def law_of(position: Position, expression: RuleExpression, on_reject: str) -> ExactLaw:
    p = position.target_probs
    if position.greedy:  # the greedy rule emits the target's argmax, whatever the rule
        target = torch.zeros_like(p)
        target[p.argmax()] = 1.0
        q = position.draft_probs
        kept = position.drafts and q is not None and int(q.argmax()) == int(p.argmax())
        return ExactLaw(target, 0.0, float(kept))
    if not position.drafts:  # no draft to judge: the target's own token
        return ExactLaw(p, 0.0, 0.0)
    q = position.draft_probs
    accept = accept_everywhere(expression, p, q)
    law = output_law(p, q, accept, on_reject)
    return ExactLaw(law, tv_from(law, p), acceptance(q, accept))


def exact_laws(position: Position, custom: CustomRule | None = None,
               names: tuple[str, ...] = tuple(PRESETS)) -> dict[str, ExactLaw]:
    """{rule name: its exact law here}: the built-in rules named, and the student's as YOURS."""
    laws = {name: law_of(position, _PRESET_EXPRESSIONS[name], PRESETS[name][1]) for name in names}
    if custom is not None:
        laws[YOURS] = law_of(position, custom.expression, custom.on_reject)
    return laws


def _toy(p: list[float], q: list[float]) -> Position:
    return Position(0, (), _normalised(torch.tensor(p)), _normalised(torch.tensor(q)), True, False)


# Hand-built pairs a lossless rule must be exact on too: one with disagreement, its mirror, a one-hot
# draft (as a lookup drafts), a draft that covers tokens the target never emits, and draft = target.
TOY_POSITIONS = (_toy([0.6, 0.3, 0.05, 0.05], [0.1, 0.2, 0.4, 0.3]),
                 _toy([0.1, 0.2, 0.4, 0.3], [0.6, 0.3, 0.05, 0.05]),
                 _toy([0.5, 0.25, 0.25, 0.0], [0.0, 0.0, 1.0, 0.0]),
                 _toy([0.7, 0.3, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]),
                 _toy([0.4, 0.4, 0.2, 0.0], [0.4, 0.4, 0.2, 0.0]))


def lossless_everywhere(custom: CustomRule, position: Position | None = None) -> bool:
    """Whether the student's rule emits exactly p at `position` and on every TOY_POSITIONS pair."""
    found = (*TOY_POSITIONS, *((position,) if position is not None else ()))
    return all(law_of(at, custom.expression, custom.on_reject).tv < LOSSLESS_TV for at in found)


# -- what samples can see ---------------------------------------------------------------------------


def expected_noise_floor(target_probs: torch.Tensor, samples: int) -> float:
    """The TV two samples of `samples` first tokens from p fall apart by on average (each token's share
    differs by a normal of variance 2·p(1 − p)/n, whose mean absolute value is that σ·√(2/π))."""
    p = target_probs.double()
    return 0.5 * float(torch.sqrt(4 * p * (1 - p) / (math.pi * samples)).sum())


def resolved(tv: float, floor: float) -> bool:
    return tv >= RESOLVED * floor


def samples_to_see(tv: float, floor: float, samples: int) -> int | None:
    """Samples at which the floor falls to tv / RESOLVED (it shrinks as 1/√n); None for a TV of 0."""
    if tv < LOSSLESS_TV:
        return None
    return math.ceil(samples * (RESOLVED * floor / tv) ** 2)


def _small(value: float) -> str:
    """0.234, or 2.1e-05 where three decimals would say 0.000; 0 for float rounding."""
    if value < LOSSLESS_TV:
        return "0"  # float rounding
    return f"{value:.3f}" if value >= 1e-3 else f"{value:.1e}"


def unseen(name: str, position: Position, law: ExactLaw, floor: float, samples: int, token_text) -> str:
    """Why a lossy rule's exact TV here is too small for `samples` samples to show, in this position's
    numbers (`token_text`: token id -> text)."""
    p = position.target_probs
    if position.greedy:
        return "at temperature 0 every rule is the greedy rule and emits the target's own token"
    if not position.drafts:
        return "the drafter proposes nothing at this position, so no rule has a draft to judge"
    q, top = position.draft_probs, int(p.argmax())
    needed = samples_to_see(law.tv, floor, samples)
    scale = (f"its exact TV here is {_small(law.tv)}, under {RESOLVED:g}× the noise floor of {floor:.3f}"
             + (f": it would take about {needed:,} samples to see" if needed else ""))
    if name == TOP_CHOICE:
        shown, q_top, p_top = repr(token_text(top)), float(q[top]), float(p[top])
        if q_top <= 1 - p_top:  # the smaller factor of q·(1 − p) is the reason
            often = "almost never" if q_top < 0.05 else "seldom"
            why = (f"the draft gives the target's top token {shown} q = {_small(q_top)}, so this rule "
                   f"{often} keeps a draft here and draws from p instead")
        else:
            why = (f"the target is nearly sure of its top token {shown} (p = {p_top:.3f}), so keeping it "
                   f"whenever the draft proposes it (q = {_small(q_top)}) barely moves p")
        return f"{why}; {scale} (= q·(1 − p) = {_small(q_top)}·{1 - p_top:.3f})"
    return f"it keeps a draft with probability {law.acceptance:.3f} here; {scale}"


# -- positions along a target sample ------------------------------------------------------------------


def positions(pair, prompt_ids: list[int], settings: Settings, count: int = SCAN_TOKENS,
              lock=None) -> Iterator[Position]:
    """p and q at the prompt's next token, then at each token of a target sample of the prompt
    (seeded with settings.seed), up to `count` positions or a stop token: one target pass and one
    drafting step per position, each under `lock` (default: the app's model lock)."""
    lock = lock or MODEL_LOCK
    models = RunModels.of(pair)
    with lock:
        for _ in models.prefill(prompt_ids, chunk_size=0):
            pass
    thresholds = draft_thresholds(settings, models.target.pass_costs)[: settings.gamma]
    drafts_seed, sample_seed = (torch.Generator().manual_seed(settings.seed + i) for i in (0, 1))
    context, sampling = list(prompt_ids), settings.sampling
    for index in range(count):
        with lock:
            draft = models.drafter.propose(context, 1, sampling, drafts_seed)  # q, whether or not it drafts
            target_probs = warp_probs(models.target.extend([context[-1]]), sampling)  # (1, vocab)
        chance = float(draft.probs[0].max()) if len(draft.tokens) else 0.0
        drafts = bool(len(draft.tokens)) and (not thresholds or worth_drafting(chance, chance, thresholds))
        yield position_of(index, context, target_probs[0], draft, drafts, sampling.greedy)
        token = int(sample(target_probs, sampling, sample_seed)[0])
        if token in pair.stop_token_ids:
            return
        context.append(token)


def best_position(found: list[Position], name: str,
                  custom: CustomRule | None = None) -> tuple[Position, float]:
    """The position where rule `name` (or YOURS) loses most: (position, its exact TV there)."""
    names = () if name == YOURS else (name,)
    scored = [(exact_laws(at, custom if name == YOURS else None, names)[name].tv, at) for at in found]
    tv, at = max(scored, key=lambda pair: (pair[0], -pair[1].index))
    return at, tv


# -- a student's rule, sampled -------------------------------------------------------------------------


def sampled_rule(custom: CustomRule) -> Rule:
    """The student's rule as one the trial can sample (core.acceptance.Rule): a coin with the
    expression's probability per draft, in order; at the first rejection a draw from its replacement."""
    expression = custom.expression

    def accept(draft_tokens, draft_probs, target_probs, generator) -> Verdict:
        k = draft_tokens.shape[0]
        at = torch.arange(k)
        q_x, p_x = draft_probs[at, draft_tokens], target_probs[at, draft_tokens]
        judged = target_probs[:k].double()
        top, spread = judged.max(dim=-1).values, entropy(judged)
        accept_probs = expression.accept_probs(p_x, q_x, top, spread).float()
        uniforms = torch.rand(k, generator=generator)
        rejected = (uniforms >= accept_probs).nonzero()
        num_accepted = int(rejected[0]) if len(rejected) else k
        if num_accepted < k:
            where = replacement(custom.on_reject, target_probs[num_accepted], draft_probs[num_accepted],
                                int(draft_tokens[num_accepted]))
        else:
            where = target_probs[k]
        next_token = int(torch.multinomial(where.float(), 1, generator=generator))
        return Verdict(q_x, p_x, accept_probs, uniforms, num_accepted, where if num_accepted < k else None,
                       next_token, num_accepted == k, rule=YOURS)

    def expected(draft_probs, target_probs):
        return torch.stack([(q.double() * accept_everywhere(expression, p.double(), q.double())).sum()
                            for q, p in zip(draft_probs, target_probs, strict=True)]).float()

    title = f"your rule: {custom.text} (on a rejection: {custom.on_reject})"
    where = REPLACEMENT_WORDS[custom.on_reject]
    return Rule(YOURS, title, False, custom.text, "Σ q·a", accept, expected,
                lambda p, q, x: replacement(custom.on_reject, p, q, x), menu_title=title,
                test_words=f"Each draft x is kept with probability **{custom.text}** (clamped to [0, 1]): "
                "draw **u ~ Uniform(0, 1)**, keep x if u is below it. The first rejection ends the round.",
                replaced_by="a replacement {nxt} is drawn from " + where, replacement_name=where)


def rule_named(name: str, custom: CustomRule | None = None) -> Rule:
    return sampled_rule(custom) if name == YOURS else RULES[name]


MAX_POSITION = 255  # --position N: the N-th token of a target sample, 0 to this


def parse_position(text: str | None) -> str | int:
    """'auto' or N (0 .. MAX_POSITION) -> 'auto' or N; anything else: one line."""
    if text is None or text == "auto":
        return text or 0
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= MAX_POSITION:
        raise SpecDecError(f"position must be auto or a token number from 0 to {MAX_POSITION}, got {text!r}")
    return number


def watched_rule(custom: CustomRule | None) -> str:
    """The rule `auto` looks for: the student's, else the top-choice rule (the lesson's sharpest claim)."""
    return YOURS if custom is not None else TOP_CHOICE


def choose_position(pair, prompt_ids: list[int], settings: Settings, position: str | int,
                    custom: CustomRule | None = None, lock=None) -> tuple[Position, float]:
    """The position a trial runs at: N (the N-th token of a target sample of the prompt, seeded with
    settings.seed), or 'auto': of the first SCAN_TOKENS, where the watched rule's exact TV is largest.
    -> (that position, the watched rule's exact TV there)."""
    count = SCAN_TOKENS if position == "auto" else int(position) + 1
    found = list(positions(pair, prompt_ids, settings, count, lock))
    if position != "auto" and len(found) < count:
        raise SpecDecError(f"the target's sample of this prompt ends after {len(found) - 1} tokens: "
                           f"use a position from 0 to {len(found) - 1}")
    name = watched_rule(custom)
    if position == "auto":
        return best_position(found, name, custom)
    chosen = found[-1]
    return chosen, exact_laws(chosen, custom, () if name == YOURS else (name,))[name].tv


# -- what the page shows: plain data ---------------------------------------------------------------


def law_rows(position: Position, laws: dict[str, ExactLaw], token_text, top: int = 8) -> list[dict]:
    """The tokens that matter here (largest by p or by any rule's law, at most `top`, p's order first),
    each with its text, p and every rule's exact probability: a chart's rows."""
    p = position.target_probs
    weight = torch.stack([p, *(law.law for law in laws.values())]).amax(dim=0)
    ids = weight.topk(min(top, int((weight > 1e-9).sum()))).indices.tolist()
    ids.sort(key=lambda i: (-float(p[i]), -float(weight[i])))
    return [{"id": i, "token": token_text(i), "p": float(p[i]),
             **{name: float(law.law[i]) for name, law in laws.items()}} for i in ids]


def is_lossy(name: str, custom: CustomRule | None) -> bool:
    return not lossless_everywhere(custom) if name == YOURS else not RULES[name].lossless


CAUGHT_P = 1e-3  # a χ² p-value under this, with the TV outside the noise band, catches a rule


def caught(row: dict) -> bool:
    """Whether a trial's samples catch a rule (a RuleResult as a dict): its χ² p-value under CAUGHT_P
    *and* its TV outside the noise band, so the table's two columns beside it agree."""
    return row["chi2_p"] < CAUGHT_P and row["tv"] > row["tv_noise_band"]


def trial_verdict(rows: list[dict], greedy: bool) -> tuple[str, str]:
    """The trial's one verdict, from its samples alone -> (kind, words), kind one of "greedy",
    "caught" (lossy rules the samples catch), "chance" (only a lossless rule tripped: 1 time in 1,000)
    or "none". trial_view explains "cannot be seen here" only for lossy rules this does not catch."""
    if greedy:
        return "greedy", ("At temperature 0 every rule is the greedy rule: all four give the target's "
                          "greedy token.")
    tripped = [row for row in rows if caught(row)]
    lossy = [row["title"] for row in tripped if not row["lossless"]]
    if lossy:
        return "caught", (f"Caught in the act (χ² p < {CAUGHT_P:g}, TV outside the noise band): "
                          f"{', '.join(lossy)}. Their first tokens are not the target's, however high "
                          "their acceptance.")
    if tripped:
        return "chance", (f"{', '.join(row['title'] for row in tripped)} fell outside the noise band with χ² "
                          f"p < {CAUGHT_P:g}: a lossless rule does that about 1 time in 1,000 by chance "
                          "alone. Run again.")
    return "none", ("No rule is caught at this sample size (none has χ² p < 0.001 with its TV outside "
                    "the noise band); more samples, or a position where the draft and target disagree, "
                    "show more.")


def trial_view(trial, token_text, rows: list[dict]) -> dict:
    """From a trial and its result rows (RuleResult as dicts): the exact laws over the top tokens, and
    for each lossy rule the samples did not catch and whose exact TV they cannot resolve, why, in this
    position's numbers (a rule the samples caught is never also 'cannot be seen')."""
    if trial.first is None:
        return {"laws": [], "unseen": {}}
    laws = {name: law for name, law in exact_laws(trial.first, trial.custom).items() if name in trial.rules}
    hidden = {}
    for row in rows:
        name, floor = row["rule"], row["tv_noise_floor"]
        if is_lossy(name, trial.custom) and not caught(row) and not resolved(laws[name].tv, floor):
            hidden[name] = unseen(name, trial.first, laws[name], floor, row["samples"], token_text)
    return {"laws": law_rows(trial.first, laws, token_text), "unseen": hidden}


def offer(pair, prompt_ids: list[int], settings: Settings, samples: int, custom: CustomRule | None = None,
          lock=None) -> dict:
    """Where along a target sample of the prompt the watched rule's exact TV is largest, and whether
    `samples` samples can see it there (its TV at least RESOLVED expected noise floors)."""
    chosen, tv = choose_position(pair, prompt_ids, settings, "auto", custom, lock)
    floor = expected_noise_floor(chosen.target_probs, samples)
    return {"rule": watched_rule(custom), "index": chosen.index, "tv": tv, "floor": floor,
            "resolved": resolved(tv, floor), "context": list(chosen.context),
            "text": pair.decode(list(chosen.context[len(prompt_ids):])), "scanned": SCAN_TOKENS}


def judge_position(pair, context: list[int], settings: Settings, custom: CustomRule, lock=None) -> dict:
    """A student's rule at the trial's position, exactly, with speculative sampling beside it: its TV
    and acceptance, lossless or not (here and on hand-built pairs), and the chart's rows."""
    at = next(positions(pair, context, settings, 1, lock))
    laws = exact_laws(at, custom, (SPECULATIVE,))
    mine = laws[YOURS]
    return {"tv": mine.tv, "acceptance": mine.acceptance, "lossless": lossless_everywhere(custom, at),
            "speculative_acceptance": laws[SPECULATIVE].acceptance, "drafts": at.drafts, "greedy": at.greedy,
            "laws": law_rows(at, laws, pair.token_text)}
