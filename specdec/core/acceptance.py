"""The acceptance rule of speculative sampling, as pure functions over tensors.

Notation. The papers (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023) write p for the target
and q for the draft. Here they are `target_probs` and `draft_probs`:

    draft_tokens  x_1..x_k      (k,)          drafted by the draft model
    draft_probs   q_1..q_k      (k, vocab)    the draft's distribution at each drafted position
    target_probs  p_1..p_{k+1}  (k+1, vocab)  the target's distribution at each position, from one pass

Rule: accept x_i with probability min(1, p_i(x_i) / q_i(x_i)), in order. At the first rejection i,
discard x_i.. and draw a token from the residual norm(max(0, p_i - q_i)). If all k are accepted,
draw a bonus token from p_{k+1}. Each emitted token is then distributed exactly as p.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Verdict:
    """Everything a teacher shows about one round's acceptance test (positions are 0-based)."""

    draft_token_probs: torch.Tensor  # (k,) q_i(x_i)
    target_token_probs: torch.Tensor  # (k,) p_i(x_i)
    accept_probs: torch.Tensor  # (k,) min(1, p/q); for greedy 1 if x_i is p's argmax else 0
    uniforms: torch.Tensor | None  # (k,) the coin flips u_i ~ U[0, 1); None in greedy mode
    num_accepted: int  # drafted tokens kept = index of the first rejection (k if none)
    residual: torch.Tensor | None  # (vocab,) norm(max(0, p - q)) at the first rejection, else None
    next_token: int  # the token emitted after the accepted ones: resampled, or the bonus
    is_bonus: bool  # True when every draft was accepted and next_token came from p_{k+1}

    @property
    def accepted(self) -> list[bool]:
        """Per drafted position: kept or not (positions after the first rejection are not kept)."""
        k = len(self.accept_probs)
        return [i < self.num_accepted for i in range(k)]


def residual_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last axis.

    If p == q the residual is all zeros, but then no drafted token can be rejected (the ratio is 1
    everywhere q > 0), so the value is never sampled; we return p so the result is still a
    distribution rather than a division by zero.
    """
    residual = (target_probs - draft_probs).clamp_min(0.0)
    mass = residual.sum(dim=-1, keepdim=True)
    return torch.where(mass > 1e-12, residual / mass.clamp_min(1e-12), target_probs)


def speculative_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """Leviathan et al. 2023, Algorithm 1: judge k drafted tokens against one target pass."""
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    draft_token_probs = draft_probs[positions, draft_tokens]  # q_i(x_i)
    target_token_probs = target_probs[positions, draft_tokens]  # p_i(x_i)
    # q_i(x_i) > 0 for any token the draft could have sampled; the clamp only guards the division.
    accept_probs = (target_token_probs / draft_token_probs.clamp_min(1e-20)).clamp(max=1.0)
    # All k coins are flipped up front so a run consumes the generator the same way every round.
    uniforms = torch.rand(k, generator=generator)
    rejected = (uniforms >= accept_probs).nonzero()
    num_accepted = int(rejected[0]) if len(rejected) else k

    if num_accepted < k:
        residual = residual_distribution(target_probs[num_accepted], draft_probs[num_accepted])
        next_token = int(torch.multinomial(residual, 1, generator=generator))
        is_bonus = False
    else:
        residual = None
        next_token = int(torch.multinomial(target_probs[k], 1, generator=generator))
        is_bonus = True
    return Verdict(
        draft_token_probs=draft_token_probs,
        target_token_probs=target_token_probs,
        accept_probs=accept_probs,
        uniforms=uniforms,
        num_accepted=num_accepted,
        residual=residual,
        next_token=next_token,
        is_bonus=is_bonus,
    )


def greedy_accept(
    draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor
) -> Verdict:
    """Temperature 0: keep drafts while they equal the target's argmax, then emit the target's argmax.

    The output is then exactly what greedy decoding with the target alone would produce.
    """
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    target_argmax = target_probs.argmax(dim=-1)  # (k+1,)
    matches = (draft_tokens == target_argmax[:k]).float()
    mismatches = (matches == 0).nonzero()
    num_accepted = int(mismatches[0]) if len(mismatches) else k
    return Verdict(
        draft_token_probs=draft_probs[positions, draft_tokens],
        target_token_probs=target_probs[positions, draft_tokens],
        accept_probs=matches,
        uniforms=None,
        num_accepted=num_accepted,
        residual=None,
        next_token=int(target_argmax[num_accepted]),
        is_bonus=num_accepted == k,
    )
