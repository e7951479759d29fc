"""What a rule emits, exactly: the law of the token emitted at a drafted position, from p and q alone.

The draft proposes x ~ q. The rule keeps x with probability a(x); otherwise it emits a draw from its
replacement distribution r_x. So the emitted token y has the law

    P(y) = q(y)·a(y) + Σ_x q(x)·(1 − a(x))·r_x(y)

Speculative sampling (a = min(1, p/q), r = norm(max(0, p − q))) gives P = p: the rule is lossless.
Any other pair (a, r) gives some law, and its total-variation distance from p is how lossy it is.
The acceptance is Σ q·a. Notation as in core.acceptance: p = `target_probs`, q = `draft_probs`,
both (vocab,) at one position, after the same warp.

The replacements a rule may draw from on a rejection (`REPLACEMENTS`):
    residual       norm(max(0, p − q)), speculative sampling's. It is all zeros only when p = q; then
                   min(1, p/q) = 1 wherever q > 0, so nothing is rejected and it is never drawn. Another
                   rule may reject there: it then gets p, as the sampler does (residual_distribution).
    target         a fresh draw from p (the top-choice rule's).
    draft          a fresh draw from q.
    target-other   a draw from p other than the rejected x, renormalised: what sample-and-compare emits
                   (its y ~ p, given y ≠ x); p itself where p(x) = 1.
    typical        p cut to its typical tokens (Medusa's; core.acceptance.typical_replacement).
"""

from __future__ import annotations

import torch

from specdec.core.acceptance import residual_distribution, typical_replacement

RESIDUAL, TARGET, DRAFT, TARGET_OTHER, TYPICAL_CUT = "residual", "target", "draft", "target-other", "typical"
REPLACEMENTS = (RESIDUAL, TARGET, DRAFT, TARGET_OTHER, TYPICAL_CUT)
REPLACEMENT_WORDS = {  # what the pages call each replacement, as "emit ..." reads it
    RESIDUAL: "the residual norm(max(0, p − q))",
    TARGET: "a draw from p",
    DRAFT: "a draw from q",
    TARGET_OTHER: "a draw from p other than x",
    TYPICAL_CUT: "p cut to its typical tokens (Medusa)",
}


def rejected_law(target_probs: torch.Tensor, draft_probs: torch.Tensor, rejected: torch.Tensor,
                 on_reject: str) -> torch.Tensor:
    """Σ_x rejected(x)·r_x: where the mass of rejected drafts goes. `rejected` (vocab,) is q·(1 − a)."""
    mass = rejected.sum()
    if on_reject == RESIDUAL:
        return mass * residual_distribution(target_probs, draft_probs)
    if on_reject == TARGET:
        return mass * target_probs
    if on_reject == DRAFT:
        return mass * draft_probs
    if on_reject == TYPICAL_CUT:
        return mass * typical_replacement(target_probs, None, -1)
    if on_reject == TARGET_OTHER:
        # r_x = (p − p(x)·e_x) / (1 − p(x)), or p where p(x) = 1: every x's share of p, less its own token.
        sure = target_probs > 1 - 1e-12
        scale = torch.where(sure, torch.ones_like(target_probs), 1 / (1 - target_probs).clamp_min(1e-12))
        own = torch.where(sure, torch.zeros_like(target_probs), rejected * scale * target_probs)
        return target_probs * (rejected * scale).sum() - own
    raise ValueError(f"on_reject must be one of {', '.join(REPLACEMENTS)}, got {on_reject!r}")


def output_law(target_probs: torch.Tensor, draft_probs: torch.Tensor, accept_probs: torch.Tensor,
               on_reject: str) -> torch.Tensor:
    """P(emitted token = y) for every y, given a(x) = `accept_probs` (vocab,) in [0, 1]."""
    kept = draft_probs * accept_probs  # (vocab,) drafted and kept
    return kept + rejected_law(target_probs, draft_probs, draft_probs - kept, on_reject)


def acceptance(draft_probs: torch.Tensor, accept_probs: torch.Tensor) -> float:
    """P(the draft is kept) = Σ q·a."""
    return float((draft_probs * accept_probs).sum())


def tv_from(law: torch.Tensor, target_probs: torch.Tensor) -> float:
    """½ Σ |law − p|: 0 for a lossless rule (to float precision), at most 1."""
    return 0.5 * float((law.double() - target_probs.double()).abs().sum())


def replacement(on_reject: str, target_probs: torch.Tensor, draft_probs: torch.Tensor,
                token: int) -> torch.Tensor:
    """The distribution a rejected draft `token` is replaced from (one position): what `rejected_law`
    sums, for a sampler to draw from."""
    if on_reject == RESIDUAL:
        return residual_distribution(target_probs, draft_probs)
    if on_reject == TARGET:
        return target_probs
    if on_reject == DRAFT:
        return draft_probs
    if on_reject == TYPICAL_CUT:
        return typical_replacement(target_probs, None, -1)
    if on_reject == TARGET_OTHER:
        rest = target_probs.clone()
        rest[token] = 0.0
        mass = rest.sum()
        return rest / mass if mass > 1e-12 else target_probs
    raise ValueError(f"on_reject must be one of {', '.join(REPLACEMENTS)}, got {on_reject!r}")
