"""Exact: enumerate every drafted token and every outcome of the coin; the emitted token is ~ p."""

import itertools

import pytest
import torch
from rule_laws import emitted_distribution

from specdec.core.acceptance import greedy_accept, residual_distribution, speculative_accept


def random_distribution(vocab: int, generator: torch.Generator, zeros: int = 0) -> torch.Tensor:
    weights = torch.rand(vocab, generator=generator, dtype=torch.float64)
    weights[torch.randperm(vocab, generator=generator)[:zeros]] = 0
    return weights / weights.sum()


def one_hot(vocab: int, index: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(index), vocab).double()


CASES = {
    "random": lambda g: (random_distribution(5, g), random_distribution(5, g)),
    "draft equals target": lambda g: (p := random_distribution(4, g), p.clone()),
    "disjoint supports": lambda g: (
        torch.tensor([0.5, 0.5, 0, 0], dtype=torch.float64),
        torch.tensor([0, 0, 0.3, 0.7], dtype=torch.float64),
    ),
    "one-hot draft (n-gram)": lambda g: (random_distribution(5, g), one_hot(5, 2)),
    "one-hot draft on a zero of p": lambda g: (
        torch.tensor([0.2, 0.8, 0, 0], dtype=torch.float64), one_hot(4, 3),
    ),
    "one-hot target": lambda g: (one_hot(3, 1), random_distribution(3, g)),
    "sparse both": lambda g: (random_distribution(6, g, zeros=3), random_distribution(6, g, zeros=2)),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(5))
def test_emitted_token_is_distributed_exactly_as_target(case, seed):
    target_probs, draft_probs = CASES[case](torch.Generator().manual_seed(seed))
    emitted = emitted_distribution(target_probs, draft_probs)
    torch.testing.assert_close(emitted, target_probs, atol=1e-12, rtol=0)


@pytest.mark.parametrize("vocab", [2, 3])
def test_exact_over_every_pair_on_a_grid(vocab):
    """All p, q on a coarse grid of the simplex, not just random ones."""
    grid = [torch.tensor(c, dtype=torch.float64) / 4
            for c in itertools.product(range(5), repeat=vocab) if sum(c) == 4]
    for target_probs, draft_probs in itertools.product(grid, grid):
        emitted = emitted_distribution(target_probs, draft_probs)
        torch.testing.assert_close(emitted, target_probs, atol=1e-12, rtol=0)


def test_acceptance_probability_is_sum_of_min():
    """The chance a draft is accepted, E_q[min(1, p/q)], equals Σ min(p, q) (the lesson's α)."""
    g = torch.Generator().manual_seed(3)
    target_probs, draft_probs = random_distribution(6, g), random_distribution(6, g)
    expected = torch.minimum(target_probs, draft_probs).sum()
    accept = sum(
        draft_probs[x] * speculative_accept(
            torch.tensor([x]), draft_probs[None], torch.stack([target_probs] * 2), g
        ).accept_probs[0]
        for x in range(6)
    )
    torch.testing.assert_close(torch.as_tensor(accept, dtype=torch.float64), expected)


def test_residual_of_identical_distributions_is_guarded():
    p = torch.tensor([0.25, 0.75])
    residual = residual_distribution(p, p.clone())
    assert torch.isfinite(residual).all()
    torch.testing.assert_close(residual, p)


def test_draft_equal_to_target_accepts_everything_and_adds_a_bonus():
    g = torch.Generator().manual_seed(0)
    probs = random_distribution(7, g).float()
    drafted = torch.tensor([1, 4, 2])
    verdict = speculative_accept(drafted, probs.repeat(3, 1), probs.repeat(4, 1), g)
    assert verdict.num_accepted == 3 and verdict.is_bonus and verdict.residual is None
    assert verdict.accept_probs.tolist() == [1.0, 1.0, 1.0]


def test_record_at_a_certain_rejection():
    """Target gives the drafted token zero mass: rejected at once, replacement from p minus q."""
    target = torch.tensor([[0.6, 0.4, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    draft = torch.tensor([[0.0, 0.0, 1.0]])
    verdict = speculative_accept(torch.tensor([2]), draft, target, torch.Generator().manual_seed(0))
    assert verdict.num_accepted == 0 and not verdict.is_bonus
    assert verdict.accept_probs.tolist() == [0.0]
    assert verdict.draft_token_probs.tolist() == [1.0] and verdict.target_token_probs.tolist() == [0.0]
    torch.testing.assert_close(verdict.residual, torch.tensor([0.6, 0.4, 0.0]))
    assert verdict.next_token in (0, 1)
    assert verdict.accepted == [False]


def test_greedy_keeps_drafts_while_they_match_the_argmax():
    target = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.2, 0.6], [0.0, 0.0, 1.0]])
    draft = torch.full((3, 3), 1 / 3)
    verdict = greedy_accept(torch.tensor([1, 0, 1]), draft, target)
    assert verdict.num_accepted == 2
    assert verdict.next_token == 2  # the target's argmax at the first mismatch
    assert not verdict.is_bonus and verdict.uniforms is None
    all_match = greedy_accept(torch.tensor([1, 0, 2]), draft, target)
    assert all_match.num_accepted == 3 and all_match.is_bonus and all_match.next_token == 2
