"""One token's law under an acceptance rule, exactly and sampled: the first emitted token's law from a
rule's own numbers (enumerating every draft), hand-built p and q to try the rules on, and a chi-square
goodness of fit for sampled counts."""

import torch
from scipy.stats import chisquare

from specdec.core.acceptance import residual_distribution, speculative_accept


def first_token_law(rule, target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """P(first emitted token = y) with one draft x ~ q, from the rule's own numbers."""
    total = torch.zeros_like(target_probs)
    for x in range(target_probs.shape[0]):
        if draft_probs[x] == 0:
            continue
        verdict = rule.accept(torch.tensor([x]), draft_probs[None], torch.stack([target_probs] * 2),
                              torch.Generator().manual_seed(0))
        accept = float(verdict.accept_probs[0])
        total[x] += draft_probs[x] * accept
        total += draft_probs[x] * (1 - accept) * rule.replacement(target_probs, draft_probs, x)
    return total


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


P = torch.tensor([0.6, 0.3, 0.05, 0.05], dtype=torch.float64)
Q = torch.tensor([0.1, 0.2, 0.4, 0.3], dtype=torch.float64)
RANDOM = torch.Generator().manual_seed(3)
CASES = {
    "hand": (P, Q),
    "random": tuple((w := torch.rand(6, generator=RANDOM, dtype=torch.float64)) / w.sum() for _ in range(2)),
    "draft equals target": (P, P.clone()),
    "one-hot draft": (P, torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=torch.float64)),
}


def emitted_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """P(first emitted token = y), enumerating the drafted token x ~ q and the coin, from the rule.

    For each x the rule reports its acceptance probability; on rejection the token comes from the
    residual it reports. Nothing here restates the paper's formula.
    """
    vocab = target_probs.shape[0]
    total = torch.zeros(vocab, dtype=torch.float64)
    for x in range(vocab):
        if draft_probs[x] == 0:
            continue  # the draft can never propose x
        verdict = speculative_accept(
            torch.tensor([x]), draft_probs[None], torch.stack([target_probs, target_probs]),
            torch.Generator().manual_seed(0),
        )
        accept = float(verdict.accept_probs[0])
        residual = residual_distribution(target_probs, draft_probs).double()
        total[x] += draft_probs[x] * accept
        total += draft_probs[x] * (1 - accept) * residual
    return total


SAMPLED_ROUNDS = 4000  # seeded rounds a rule: enough that the chi-square test catches the lossy rules


def sampled_first_tokens(rule, target_probs, draft_probs, gamma=3, seed=0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(target_probs.shape[0])
    for _ in range(SAMPLED_ROUNDS):
        drafted = torch.multinomial(draft_probs, gamma, replacement=True, generator=generator)
        verdict = rule.accept(drafted, draft_probs.repeat(gamma, 1), target_probs.repeat(gamma + 1, 1),
                              generator)
        counts[int(drafted[0]) if verdict.num_accepted else verdict.next_token] += 1
    return counts


def goodness_of_fit(counts: torch.Tensor, law: torch.Tensor) -> float:
    counts, law = counts.double(), law.double()
    support = law > 1e-12
    if counts[~support].sum() > 0:
        return 0.0  # a token the law never emits
    expected = law[support] / law[support].sum() * counts.sum()
    return chisquare(counts[support].numpy(), expected.numpy()).pvalue
