"""The acceptance rule of speculative sampling, as pure functions over tensors.

Notation. The papers (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023) write p for the target
and q for the draft. Here they are `target_probs` and `draft_probs`:

    draft_tokens  x_1..x_k      (k,)          drafted by the draft model
    draft_probs   q_1..q_k      (k, vocab)    the draft's distribution at each drafted position
    target_probs  p_1..p_{k+1}  (k+1, vocab)  the target's distribution at each position, from one pass

Rule: accept x_i with probability min(1, p_i(x_i) / q_i(x_i)), in order. At the first rejection i,
discard x_i.. and draw a token from the residual norm(max(0, p_i - q_i)). If all k are accepted,
draw a bonus token from p_{k+1}. Each emitted token is then distributed exactly as p.

Three other rules follow, each a pure function of the same shape returning the same `Verdict`, so the
round view can draw any of them, and `RULES` names them with whether each keeps that guarantee
(config.RULE_NAMES lists them for the settings, without torch):
- "the top choice matches": keep x_i while it is p_i's argmax; at the first mismatch draw from p_i.
  Exact at temperature 0 only.
- "sample and compare": draw y_i ~ p_i; keep x_i if y_i == x_i, else emit y_i. Exact, but accepts
  with probability Σ p·q instead of Σ min(p, q).
- typical acceptance (Medusa): keep x_i while p_i(x_i) > min(ε, δ·exp(-H(p_i))). Not exact.
At temperature 0 every rule is the greedy rule (`greedy_accept`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specdec.config import RULE_NAMES, SAMPLE_COMPARE, SPECULATIVE, TOP_CHOICE, TYPICAL


@dataclass(frozen=True)
class Verdict:
    """Everything a teacher shows about one round's acceptance test (positions are 0-based)."""

    draft_token_probs: torch.Tensor  # (k,) q_i(x_i)
    target_token_probs: torch.Tensor  # (k,) p_i(x_i)
    # (k,) P(keep x_i | x_i was drafted and tested): min(1, p/q); 1 or 0 for the greedy, top-choice and
    # typical rules; p_i(x_i) for sample-and-compare
    accept_probs: torch.Tensor
    uniforms: torch.Tensor | None  # (k,) the coin flips u_i ~ U[0, 1); None for the other rules
    num_accepted: int  # drafted tokens kept = index of the first rejection (k if none)
    # (vocab,) the distribution the replacement was drawn from at the first rejection, else None:
    # norm(max(0, p - q)) for speculative sampling (see each rule for the others)
    residual: torch.Tensor | None
    next_token: int  # the token emitted after the accepted ones: resampled, or the bonus
    is_bonus: bool  # True when every draft was accepted and next_token came from p_{k+1}
    rule: str = SPECULATIVE  # which rule judged (config.RULE_NAMES); greedy mode reports the sidebar's
    target_draws: torch.Tensor | None = None  # (k,) sample-and-compare: y_i ~ p_i, compared with x_i
    thresholds: torch.Tensor | None = None  # (k,) typical acceptance: keep x_i if p_i(x_i) > this

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

    The output is then exactly what greedy decoding with the target alone would produce. p and q may
    stay on the model's device: the argmaxes are taken there and only the k + 1 ids, and p and q at
    the drafts, come to the host.
    """
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    target_argmax = target_probs.argmax(dim=-1).cpu()  # (k+1,)
    matches = (draft_tokens == target_argmax[:k]).float()
    mismatches = (matches == 0).nonzero()
    num_accepted = int(mismatches[0]) if len(mismatches) else k
    return Verdict(
        draft_token_probs=draft_probs[positions, draft_tokens].cpu(),
        target_token_probs=target_probs[positions, draft_tokens].cpu(),
        accept_probs=matches,
        uniforms=None,
        num_accepted=num_accepted,
        residual=None,
        next_token=int(target_argmax[num_accepted]),
        is_bonus=num_accepted == k,
    )


# -- the other rules ------------------------------------------------------------------------------


def _first_rejection(kept: torch.Tensor) -> int:
    """Index of the first False in a (k,) bool tensor, k if none."""
    rejected = (~kept).nonzero()
    return int(rejected[0]) if len(rejected) else kept.shape[0]


def _without(probs: torch.Tensor, token: int) -> torch.Tensor:
    """p with `token` removed, renormalised: what y ~ p is, given y != token (p itself if p(token) = 1)."""
    rest = probs.clone()
    rest[token] = 0.0
    mass = rest.sum()
    return rest / mass if mass > 1e-12 else probs


def top_choice_replacement(target_probs: torch.Tensor, draft_probs, token: int) -> torch.Tensor:
    return target_probs  # a plain draw from p: it may even be the argmax again


def top_choice_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """"The top choice matches": keep x_i while it equals p_i's argmax, at any temperature; at the
    first mismatch emit a draw from p_i, and after k matches a bonus draw from p_{k+1}.

    Not exact at T > 0: the argmax a is emitted with probability q(a) + (1 - q(a))·p(a) instead of p(a),
    so the first token is q(a)·1_a + (1 - q(a))·p, at TV distance q(a)·(1 - p(a)) from p.
    """
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    kept = draft_tokens == target_probs[:k].argmax(dim=-1)
    num_accepted = _first_rejection(kept)
    where = target_probs[num_accepted]
    next_token = int(torch.multinomial(where, 1, generator=generator))
    return Verdict(
        draft_token_probs=draft_probs[positions, draft_tokens],
        target_token_probs=target_probs[positions, draft_tokens],
        accept_probs=kept.float(),
        uniforms=None,
        num_accepted=num_accepted,
        residual=where if num_accepted < k else None,
        next_token=next_token,
        is_bonus=num_accepted == k,
        rule=TOP_CHOICE,
    )


def sample_compare_replacement(target_probs: torch.Tensor, draft_probs, token: int) -> torch.Tensor:
    return _without(target_probs, token)


def sample_compare_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """"Sample and compare": draw y_i ~ p_i at each drafted position; keep x_i if y_i == x_i; at the
    first mismatch emit y_i and stop; after k matches a bonus draw from p_{k+1}.

    Exact: every emitted token is a draw from p (the kept drafts are the y_i themselves). But x_i
    survives with probability p_i(x_i), so a round accepts Σ p·q on average, not Σ min(p, q).
    """
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    # All k draws up front, as speculative_accept flips all its coins: the same use of the generator
    # every round. Draws after the first mismatch are never used.
    draws = torch.empty(0, dtype=torch.long) if k == 0 else torch.cat(
        [torch.multinomial(target_probs[i], 1, generator=generator) for i in range(k)])
    num_accepted = _first_rejection(draws == draft_tokens)
    if num_accepted < k:
        residual = _without(target_probs[num_accepted], int(draft_tokens[num_accepted]))
        next_token, is_bonus = int(draws[num_accepted]), False
    else:
        residual, is_bonus = None, True
        next_token = int(torch.multinomial(target_probs[k], 1, generator=generator))
    target_token_probs = target_probs[positions, draft_tokens]
    return Verdict(
        draft_token_probs=draft_probs[positions, draft_tokens],
        target_token_probs=target_token_probs,
        accept_probs=target_token_probs,
        uniforms=None,
        num_accepted=num_accepted,
        residual=residual,
        next_token=next_token,
        is_bonus=is_bonus,
        rule=SAMPLE_COMPARE,
        target_draws=draws,
    )


# Medusa's defaults (Cai et al. 2024, §2.3.1; FasterDecoding/Medusa, medusa_model.py `medusa_generate`:
# posterior_threshold=0.09, posterior_alpha=0.3, "recommended to be sqrt(posterior_threshold)").
TYPICAL_EPSILON, TYPICAL_DELTA = 0.09, 0.3


def typical_thresholds(target_probs: torch.Tensor, epsilon: float = TYPICAL_EPSILON,
                       delta: float = TYPICAL_DELTA) -> torch.Tensor:
    """min(ε, δ·exp(-H(p))) per row, with H computed as Medusa's `evaluate_posterior` does
    (-Σ p·log(p + 1e-5)): a confident p sets a high bar, a flat one a low bar."""
    entropy = -(target_probs * torch.log(target_probs + 1e-5)).sum(dim=-1)
    return torch.minimum(torch.full_like(entropy, epsilon), delta * torch.exp(-entropy))


def typical_replacement(target_probs: torch.Tensor, draft_probs, token: int) -> torch.Tensor:
    """p cut to its typical tokens (p >= the threshold), renormalised: Medusa's `get_typical_one_token`.
    The argmax always survives the cut (δ·exp(-H) < max p), so the mass is never zero."""
    threshold = typical_thresholds(target_probs[None])[0]
    typical = torch.where(target_probs >= threshold, target_probs, torch.zeros_like(target_probs))
    mass = typical.sum()
    return typical / mass if mass > 1e-12 else target_probs


def typical_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """Typical acceptance (Medusa: Cai et al. 2024, §2.3.1, and its code's `evaluate_posterior`): keep
    x_i while p_i(x_i) > min(ε, δ·exp(-H(p_i))), ε and δ Medusa's (TYPICAL_EPSILON, TYPICAL_DELTA). No
    coin: the test is a threshold.
    The next token (after a rejection, or the bonus) is drawn from p cut to its typical tokens, as
    Medusa's default sampling does (`typical_replacement`).

    Not exact: every token above the bar is kept as often as the draft proposes it (q, not p), and
    tokens below it are never emitted.
    """
    k = draft_tokens.shape[0]
    positions = torch.arange(k)
    thresholds = typical_thresholds(target_probs)  # (k + 1,)
    target_token_probs = target_probs[positions, draft_tokens]
    kept = target_token_probs > thresholds[:k]
    num_accepted = _first_rejection(kept)
    where = typical_replacement(target_probs[num_accepted], None, -1)
    next_token = int(torch.multinomial(where, 1, generator=generator))
    return Verdict(
        draft_token_probs=draft_probs[positions, draft_tokens],
        target_token_probs=target_token_probs,
        accept_probs=kept.float(),
        uniforms=None,
        num_accepted=num_accepted,
        residual=where if num_accepted < k else None,
        next_token=next_token,
        is_bonus=num_accepted == k,
        rule=TYPICAL,
        thresholds=thresholds[:k],
    )


# -- the rules side by side -----------------------------------------------------------------------


def _overlap(draft_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    return torch.minimum(draft_probs, target_probs).sum(dim=-1)


def _top_choice_expected(draft_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    return draft_probs.gather(-1, target_probs.argmax(dim=-1, keepdim=True)).squeeze(-1)


def _typical_expected(draft_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    above = target_probs > typical_thresholds(target_probs)[:, None]
    return (draft_probs * above).sum(dim=-1)


def greedy_expected(draft_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """At temperature 0 the draft proposes its argmax and the target keeps it if it is its own (the
    argmaxes taken wherever p and q are, only the ids compared on the host)."""
    return (draft_probs.argmax(dim=-1).cpu() == target_probs.argmax(dim=-1).cpu()).float()


@dataclass(frozen=True)
class Rule:
    """One acceptance rule: how it judges a round, whether it keeps the target's distribution, what
    acceptance to expect from p and q at a position, and its words, which every page reads from here."""

    name: str  # config.RULE_NAMES
    title: str
    lossless: bool  # every emitted token distributed exactly as the (warped) target's p, at any T
    test: str  # the test a draft faces, in one line
    expected_formula: str
    accept: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator], Verdict]
    # (draft_probs (n, vocab), target_probs (n, vocab)) -> (n,) P(the draft's token is kept) before x is drawn
    expected: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    # (p_i, q_i, x_i) -> the distribution the replacement is drawn from when x_i is rejected
    replacement: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
    menu_title: str  # what the settings call it, exact or lossy said
    test_words: str  # the test a draft faces, as the round view opens its Accept stage (Markdown)
    replaced_by: str  # after a rejection, in a clause: "a replacement {nxt} is drawn from ..."
    replacement_name: str  # the distribution the replacement is drawn from, as a chart's legend names it


RULES = {
    SPECULATIVE: Rule(
        SPECULATIVE, "speculative sampling", True, "u < min(1, p(x)/q(x)), u ~ U[0, 1)", "Σ min(p, q)",
        speculative_accept, _overlap, lambda p, q, x: residual_distribution(p, q),
        menu_title="speculative sampling (exact)",
        test_words="Each draft x faces a test, left to right: draw **u ~ Uniform(0, 1)**, keep x if "
        "**u < min(1, p(x)/q(x))**. The first rejection ends the round; later drafts are never tested.",
        replaced_by="a replacement {nxt} is drawn from the residual norm(max(0, p − q)), which removes "
        "the mass q already had its chance at",
        replacement_name="residual norm(max(0, p−q))",
    ),
    TOP_CHOICE: Rule(
        TOP_CHOICE, "the top choice matches", False, "x = argmax p", "q(argmax p)",
        top_choice_accept, _top_choice_expected, top_choice_replacement,
        menu_title="the top choice matches (lossy)",
        test_words="**The top choice matches** (lossy): a draft x is kept while it equals the target's "
        "most likely token (argmax of p), at any temperature. The first mismatch ends the round.",
        replaced_by="a replacement {nxt} is drawn from p itself (it can even be the argmax again)",
        replacement_name="p (drawn from)",
    ),
    SAMPLE_COMPARE: Rule(
        SAMPLE_COMPARE, "sample and compare", True, "y = x, y ~ p", "Σ p·q",
        sample_compare_accept, lambda q, p: (p * q).sum(dim=-1), sample_compare_replacement,
        menu_title="sample and compare (exact)",
        test_words="**Sample and compare** (exact): at each position the target draws its own token "
        "**y ~ p**; x is kept if **y = x** (chance p(x)). The first mismatch ends the round.",
        replaced_by="the target's own draw y = {nxt} is emitted: given y ≠ x it is a draw from p "
        "without x",
        replacement_name="p without x (y given y ≠ x)",
    ),
    TYPICAL: Rule(
        TYPICAL, "typical acceptance (Medusa)", False,
        f"p(x) > min({TYPICAL_EPSILON}, {TYPICAL_DELTA}·exp(−H(p)))", "Σ q over {p > threshold}",
        typical_accept, _typical_expected, typical_replacement,
        menu_title="typical acceptance, Medusa (lossy)",
        test_words=f"**Typical acceptance** (Medusa, lossy): x is kept while **p(x) > min({TYPICAL_EPSILON}, "
        f"{TYPICAL_DELTA}·exp(−H(p)))**, a bar that is high where p is sure and low where it is flat. No "
        "coin. The first miss ends the round.",
        replaced_by="a replacement {nxt} is drawn from p cut to its typical tokens (p ≥ the bar), as "
        "Medusa samples",
        replacement_name="p cut to typical tokens",
    ),
}
assert tuple(RULES) == RULE_NAMES
