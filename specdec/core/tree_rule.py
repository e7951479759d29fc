"""Several candidates at one position: how a tree's siblings are drawn and judged, exactly.

A tree of drafts offers several candidates x_1..x_k for the same position, all children of the same
node. At most one survives. The rule (recursive rejection sampling without replacement: Jeon et al.
2024; SpecInfer's multi-step rule, Miao et al. 2024, is the same with replacement):

    draw    x_1..x_k from q without replacement (Gumbel-top-k: distinct candidates)
    judge   in turn: keep x_i with probability min(1, p_i(x_i) / q_i(x_i)), and stop there
    reject  p_{i+1} = norm(max(0, p_i − q_i))     the target mass the draft has not yet covered
            q_{i+1} = q_i with x_i removed, renormalised   what the next candidate was drawn from
    none    if every candidate is rejected, emit a draw from the last residual p_{k+1}

with p_1 = p, q_1 = q. Each step is the single-draft rule (core.acceptance) applied to what is left,
so the emitted token is distributed exactly as p. At temperature 0 (p one-hot on its top token t) it
reduces to "keep the child that is t; if none is, emit t" (`greedy_siblings`).

Three more rules have the same shape, for the rule trial and as negative controls (`TREE_RULES`):
- with replacement (SpecInfer): x_i drawn i.i.d. from q, judged against q itself (never shrunk).
  Exact, but a repeated candidate is sure to be rejected again: a wasted place in the tree.
- without replacement, judged against q with x left in: the draw changed, the judge did not. Lossy.
- q's top k, judged as if they had been drawn without replacement. Lossy: nothing random was drawn.

The judging (`judged_in_turn`) uses plain arithmetic only, so the same lines run on exact fractions
(tests/unit/test_tree_rule_exact.py enumerates every draw and coin with them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec.config import (
    Q_KEPT,
    TOP_K_AS_SAMPLED,
    TREE_RULE_NAMES,
    WITH_REPLACEMENT,
    WITHOUT_REPLACEMENT,
)

# Below this a float distribution's mass counts as none (rounding of a mass that is exactly zero).
NO_MASS = 1e-12


# -- drawing the candidates -------------------------------------------------------------------------


def gumbel_top_k(draft_probs: torch.Tensor, width: int, generator: torch.Generator) -> list[int]:
    """`width` distinct tokens from q (vocab,), as drawing one, removing it, renormalising and drawing
    again would give them: the top keys of log q + Gumbel noise (the Gumbel-top-k trick). Never more
    than q has tokens with q > 0; a q with fewer offers fewer candidates."""
    support = draft_probs > 0
    count = min(width, int(support.sum()))
    uniforms = torch.rand(draft_probs.shape, generator=generator, dtype=torch.float64)
    keys = draft_probs.double().log() - (-uniforms.clamp_min(1e-300).log()).log()
    keys = keys.masked_fill(~support, float("-inf"))
    return keys.topk(count).indices.tolist()


def iid_draws(draft_probs: torch.Tensor, width: int, generator: torch.Generator) -> list[int]:
    """`width` independent draws from q: repeats allowed."""
    return torch.multinomial(draft_probs, width, replacement=True, generator=generator).tolist()


def top_of(draft_probs: torch.Tensor, width: int, generator: torch.Generator | None = None) -> list[int]:
    """q's `width` likeliest tokens (no draw at all), never one with q = 0."""
    count = min(width, int((draft_probs > 0).sum()))
    return draft_probs.topk(count).indices.tolist()


# -- judging them in turn ---------------------------------------------------------------------------


def residual(target_probs, draft_probs):
    """norm(max(0, p − q)): where the target has mass the draft did not cover. All zeros only if
    p ≤ q everywhere, that is p = q; nothing is then rejected, and p stands in for it."""
    left = target_probs - draft_probs
    left = left * (left > 0) + 0  # max(0, ·) by arithmetic alone (+ 0 turns −0.0 into 0.0)
    mass = left.sum()
    return left / mass if mass > NO_MASS else target_probs


def without(draft_probs, token: int):
    """q with `token` removed, renormalised: what the next candidate is drawn from. All zeros when q
    had mass on `token` alone: no candidate is left to draw (the last residual is then p_i itself)."""
    rest = draft_probs * 1  # a copy, for tensors and arrays alike
    rest[token] = 0
    mass = rest.sum()
    return rest / mass if mass > NO_MASS else rest


def keep_chance(target_probs, draft_probs, token: int):
    """min(1, p(x) / q(x)), written so that q(x) = 0 never divides."""
    p, q = target_probs[token], draft_probs[token]
    return 1 if p >= q else p / q


@dataclass(frozen=True)
class Step:
    """One candidate's test, as the rule sees it before the coin: what it is judged against."""

    token: int
    target_probs: object  # p_i (vocab,): p, or the residual the earlier rejections left
    draft_probs: object  # q_i (vocab,): q, or q with the earlier candidates removed
    keep_chance: object  # min(1, p_i(x_i) / q_i(x_i))


def judged_in_turn(candidates: Sequence[int], draft_probs, target_probs,
                   shrink_draft: bool = True) -> tuple[list[Step], object]:
    """Each candidate's test, assuming every one before it was rejected, and the last residual p_{k+1}
    (where the token comes from if all are rejected). `shrink_draft`: q_{i+1} is q_i with x_i removed
    (draws without replacement); else q stays q (draws with replacement, or the lossy judge)."""
    p, q, steps = target_probs, draft_probs, []
    for token in candidates:
        token = int(token)
        steps.append(Step(token, p, q, keep_chance(p, q, token)))
        p = residual(p, q)
        if shrink_draft:
            q = without(q, token)
    return steps, p


# -- the verdict ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Test:
    """One sibling tested: the step, and the coin that decided it (None where there is none: greedy)."""

    step: Step
    uniform: float | None
    kept: bool


@dataclass(frozen=True)
class SiblingVerdict:
    """The outcome at one node of a tree: which child survived and the token the node emits."""

    kept: int | None  # index of the surviving candidate, None if every one was rejected
    token: int  # the kept candidate, or a draw from `residual`
    tests: tuple[Test, ...]  # the candidates tested, in order, up to the kept one
    residual: torch.Tensor | None  # with kept None: the last residual the token was drawn from
    rule: str = WITHOUT_REPLACEMENT


def judge_in_turn(candidates: Sequence[int], draft_probs: torch.Tensor, target_probs: torch.Tensor,
                  generator: torch.Generator, shrink_draft: bool = True,
                  rule: str = WITHOUT_REPLACEMENT) -> SiblingVerdict:
    """Judge `candidates` (drawn from q, (vocab,)) against p (vocab,): keep the first whose coin
    falls under its keep chance, else draw from the last residual. One coin per candidate, all flipped
    up front, so a run uses its generator the same way whatever the outcome."""
    steps, last = judged_in_turn(candidates, draft_probs, target_probs, shrink_draft)
    uniforms = torch.rand(len(steps), generator=generator).tolist()
    tests = []
    for index, (step, uniform) in enumerate(zip(steps, uniforms, strict=True)):
        kept = uniform < float(step.keep_chance)
        tests.append(Test(step, uniform, kept))
        if kept:
            return SiblingVerdict(index, step.token, tuple(tests), None, rule)
    token = int(torch.multinomial(last, 1, generator=generator))
    return SiblingVerdict(None, token, tuple(tests), last, rule)


def without_replacement(candidates, draft_probs, target_probs, generator) -> SiblingVerdict:
    """The engine's rule: candidates drawn without replacement, q shrunk after each rejection."""
    return judge_in_turn(candidates, draft_probs, target_probs, generator, True, WITHOUT_REPLACEMENT)


def with_replacement(candidates, draft_probs, target_probs, generator) -> SiblingVerdict:
    """SpecInfer's multi-step rule: candidates drawn i.i.d. from q, each judged against q."""
    return judge_in_turn(candidates, draft_probs, target_probs, generator, False, WITH_REPLACEMENT)


def q_kept(candidates, draft_probs, target_probs, generator) -> SiblingVerdict:
    """Lossy: distinct candidates judged as if drawn i.i.d. (q not shrunk)."""
    return judge_in_turn(candidates, draft_probs, target_probs, generator, False, Q_KEPT)


def top_k_as_sampled(candidates, draft_probs, target_probs, generator) -> SiblingVerdict:
    """Lossy: q's top k judged as if drawn without replacement."""
    return judge_in_turn(candidates, draft_probs, target_probs, generator, True, TOP_K_AS_SAMPLED)


def greedy_siblings(candidates: Sequence[int], target_probs: torch.Tensor) -> SiblingVerdict:
    """Temperature 0: keep the candidate that is p's top token t, if one is; the node emits t."""
    top = int(target_probs.argmax())
    tests = []
    for index, token in enumerate(int(c) for c in candidates):
        kept = token == top
        tests.append(Test(Step(token, target_probs, None, 1 if kept else 0), None, kept))
        if kept:
            return SiblingVerdict(index, top, tuple(tests), None)
    return SiblingVerdict(None, top, tuple(tests), None)


# -- the rules side by side -------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeRule:
    """A multi-candidate rule: how its candidates are drawn and how they are judged."""

    name: str  # config.TREE_RULE_NAMES
    title: str
    lossless: bool  # the node's token distributed exactly as p, at any temperature
    draw_words: str  # how the candidates are chosen, in one line
    test_words: str  # what the i-th candidate faces, in one line
    draw: Callable[[torch.Tensor, int, torch.Generator], list[int]]  # (q, width, generator) -> candidates
    accept: Callable[[Sequence[int], torch.Tensor, torch.Tensor, torch.Generator], SiblingVerdict]
    shrink_draft: bool  # judged_in_turn's: q_{i+1} is q_i without x_i


TREE_RULES = {
    WITHOUT_REPLACEMENT: TreeRule(
        WITHOUT_REPLACEMENT, "without replacement (recursive rejection)", True,
        "k distinct tokens from q (Gumbel-top-k)",
        "u < min(1, pᵢ(x)/qᵢ(x)); then pᵢ₊₁ = norm(max(0, pᵢ − qᵢ)), qᵢ₊₁ = qᵢ without x",
        gumbel_top_k, without_replacement, True),
    WITH_REPLACEMENT: TreeRule(
        WITH_REPLACEMENT, "with replacement (SpecInfer)", True, "k independent draws from q",
        "u < min(1, pᵢ(x)/q(x)); then pᵢ₊₁ = norm(max(0, pᵢ − q))",
        iid_draws, with_replacement, False),
    Q_KEPT: TreeRule(
        Q_KEPT, "without replacement, q left whole", False, "k distinct tokens from q (Gumbel-top-k)",
        "u < min(1, pᵢ(x)/q(x)); then pᵢ₊₁ = norm(max(0, pᵢ − q))",
        gumbel_top_k, q_kept, False),
    TOP_K_AS_SAMPLED: TreeRule(
        TOP_K_AS_SAMPLED, "q's top k, judged as if drawn", False, "q's k likeliest tokens",
        "u < min(1, pᵢ(x)/qᵢ(x)); then pᵢ₊₁ = norm(max(0, pᵢ − qᵢ)), qᵢ₊₁ = qᵢ without x",
        top_of, top_k_as_sampled, True),
}
assert tuple(TREE_RULES) == TREE_RULE_NAMES
