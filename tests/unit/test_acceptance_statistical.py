"""Statistical: thousands of seeded rounds; the emitted tokens' frequencies match the target.

Threshold: a chi-square goodness-of-fit p-value above 0.001. Seeds are fixed, so the tests are
deterministic; the negative controls show the same test does reject a subtly wrong rule.
"""

import pytest
import torch
from scipy.stats import chisquare

from specdec.config import SamplingConfig
from specdec.core.acceptance import speculative_accept
from specdec.core.sampling import warp_probs

ROUNDS = 4000
P_VALUE_FLOOR = 1e-3


def first_token_counts(target_probs, draft_probs, gamma, rule=speculative_accept, seed=0):
    """Run `rounds` of the rule with context-free toy models; count the first emitted token."""
    generator = torch.Generator().manual_seed(seed)
    vocab = target_probs.shape[-1]
    counts = torch.zeros(vocab)
    for _ in range(ROUNDS):
        drafted = torch.multinomial(draft_probs, gamma, replacement=True, generator=generator)
        verdict = rule(drafted, draft_probs.repeat(gamma, 1), target_probs.repeat(gamma + 1, 1), generator)
        first = int(drafted[0]) if verdict.num_accepted > 0 else verdict.next_token
        counts[first] += 1
    return counts


def p_value(counts, probs):
    support = probs > 0
    assert counts[~support].sum() == 0, "emitted a token the target gives no mass"
    expected = probs[support].double() / probs[support].double().sum() * counts.sum()
    return chisquare(counts[support].double().numpy(), expected.numpy()).pvalue


LOGITS = {
    "peaked": (torch.tensor([3.0, 1.0, 0.5, 0.0, -1.0, -2.0]), torch.tensor([0.0, 2.5, 0.5, 1.0, -1.0, 0.0])),
    "flat draft": (torch.tensor([2.0, 0.0, 1.0, -1.0, 0.5, 0.0]), torch.zeros(6)),
}
WARPS = [
    SamplingConfig(),
    SamplingConfig(temperature=0.7),
    SamplingConfig(temperature=1.5, top_k=4),
    SamplingConfig(temperature=1.0, top_p=0.8),
    SamplingConfig(temperature=0.8, top_k=5, top_p=0.9),
]


@pytest.mark.slow  # 10 × 4,000 sampled rounds, ~1.6 s each; the fast loop keeps test_acceptance_exact's
# enumeration (any p and q: a warp only changes them) and one sampled law (whole rounds, below)
@pytest.mark.parametrize("warp", WARPS, ids=str)
@pytest.mark.parametrize("pair", LOGITS)
def test_emitted_tokens_follow_the_warped_target(pair, warp):
    target_logits, draft_logits = LOGITS[pair]
    target_probs = warp_probs(target_logits[None], warp)[0]
    draft_probs = warp_probs(draft_logits[None], warp)[0]
    counts = first_token_counts(target_probs, draft_probs, gamma=3)
    assert p_value(counts, target_probs) > P_VALUE_FLOOR


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_bonus_and_later_tokens_follow_the_target_too():
    """Whole rounds: every emitted token, at every position of the round, is ~ p (context-free)."""
    generator = torch.Generator().manual_seed(1)
    target_probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    draft_probs = torch.tensor([0.25, 0.25, 0.25, 0.25])
    counts = torch.zeros(4)
    for _ in range(ROUNDS):
        drafted = torch.multinomial(draft_probs, 3, replacement=True, generator=generator)
        verdict = speculative_accept(drafted, draft_probs.repeat(3, 1), target_probs.repeat(4, 1), generator)
        for token in [*drafted[: verdict.num_accepted].tolist(), verdict.next_token]:
            counts[token] += 1
    assert p_value(counts, target_probs) > P_VALUE_FLOOR


@pytest.mark.slow  # 4,000 sampled rounds, ~1.9 s
def test_negative_control_resampling_from_target_is_detected():
    """A classic bug: on rejection, sample from p instead of the residual. The test must catch it."""

    def wrong_rule(drafted, draft_probs, target_probs, generator):
        verdict = speculative_accept(drafted, draft_probs, target_probs, generator)
        if verdict.num_accepted == 0:
            token = int(torch.multinomial(target_probs[0], 1, generator=generator))
            return type(verdict)(**{**verdict.__dict__, "next_token": token})
        return verdict

    target_logits, draft_logits = LOGITS["peaked"]
    target_probs = warp_probs(target_logits[None], SamplingConfig())[0]
    draft_probs = warp_probs(draft_logits[None], SamplingConfig())[0]
    counts = first_token_counts(target_probs, draft_probs, gamma=3, rule=wrong_rule)
    assert p_value(counts, target_probs) < P_VALUE_FLOOR


@pytest.mark.slow  # 4,000 sampled rounds, ~1.7 s
def test_negative_control_unwarped_draft_is_detected():
    """Judging a warped target against an *unwarped* draft breaks exactness; the test sees it."""
    target_logits, draft_logits = LOGITS["peaked"]
    warp = SamplingConfig(temperature=0.5)
    target_probs = warp_probs(target_logits[None], warp)[0]
    draft_unwarped = warp_probs(draft_logits[None], SamplingConfig())[0]
    draft_claimed = warp_probs(draft_logits[None], warp)[0]  # the rule is told the warped q ...
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(6)
    for _ in range(ROUNDS):  # ... but tokens are drawn from the unwarped one
        drafted = torch.multinomial(draft_unwarped, 1, generator=generator)
        verdict = speculative_accept(drafted, draft_claimed[None], target_probs.repeat(2, 1), generator)
        counts[int(drafted[0]) if verdict.num_accepted else verdict.next_token] += 1
    assert p_value(counts, target_probs) < P_VALUE_FLOOR
