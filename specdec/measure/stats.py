"""Comparing two empirical samples of outcomes: total-variation distance and a chi-square test.

Used to check, with real models, that speculative sampling draws from the same distribution as the
target alone. Outcomes are any hashable values (a token id, a tuple of token ids); samples are given
as counts {outcome: how many times it was drawn}. No SciPy: the chi-square tail comes from torch.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import torch

from specdec.errors import SpecDecError

Counts = Mapping[Hashable, int]


def _total(counts: Counts, name: str) -> int:
    total = sum(counts.values())
    if total <= 0 or any(c < 0 for c in counts.values()):
        raise SpecDecError(f"sample {name} is empty (or has negative counts): draw at least one outcome")
    return total


def tv_distance(counts_a: Counts, counts_b: Counts) -> float:
    """Total variation distance between the two empirical distributions: ½ Σ |a(x) − b(x)|, in [0, 1]."""
    total_a, total_b = _total(counts_a, "A"), _total(counts_b, "B")
    outcomes = set(counts_a) | set(counts_b)
    return 0.5 * sum(abs(counts_a.get(x, 0) / total_a - counts_b.get(x, 0) / total_b) for x in outcomes)


def tv_resplits(counts_a: Counts, counts_b: Counts, splits: int = 200, seed: int = 0) -> list[float]:
    """The TV distances two samples of these sizes from one distribution show by chance alone, from two
    samples of that one distribution: the TV of each of `splits` random re-splits of their pooled
    outcomes into groups of the same two sizes (a permutation estimate), sorted."""
    total_a, _ = _total(counts_a, "A"), _total(counts_b, "B")
    pooled = [x for counts in (counts_a, counts_b) for x, count in counts.items() for _ in range(count)]
    shuffler = random.Random(seed)  # its own generator: the same counts give the same floor
    distances = []
    for _ in range(splits):
        shuffler.shuffle(pooled)
        distances.append(tv_distance(Counter(pooled[:total_a]), Counter(pooled[total_a:])))
    return sorted(distances)


def tv_noise_floor(counts_a: Counts, counts_b: Counts, splits: int = 100, seed: int = 0) -> float:
    """The mean of `tv_resplits` (one split alone varies by half its value)."""
    distances = tv_resplits(counts_a, counts_b, splits, seed)
    return sum(distances) / len(distances)


def tv_noise_band(counts_a: Counts, counts_b: Counts, quantile: float = 0.95, splits: int = 200,
                  seed: int = 0) -> float:
    """The noise floor as an interval [0, band]: the `quantile` of `tv_resplits`. A sample drawn from the
    same distribution as `counts_a` lands at a TV from it inside the band `quantile` of the time (19
    times in 20 at 0.95); outside it by chance alone the rest."""
    if not 0 < quantile <= 1:
        raise SpecDecError(f"quantile must be in (0, 1], got {quantile}")
    distances = tv_resplits(counts_a, counts_b, splits, seed)
    return distances[min(len(distances) - 1, int(quantile * len(distances)))]


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X ≥ statistic) for X ~ χ²(dof): the regularised upper incomplete gamma Q(dof/2, statistic/2)."""
    if dof <= 0:
        return 1.0
    value = torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64),
                                    torch.tensor(max(statistic, 0.0) / 2.0, dtype=torch.float64))
    return float(value)


@dataclass(frozen=True)
class ChiSquareResult:
    statistic: float
    dof: int  # (categories − 1) after merging rare ones
    p_value: float  # chance of a statistic this large if both samples come from one distribution
    categories: int


def chi_square_two_sample(counts_a: Counts, counts_b: Counts, min_expected: float = 5.0) -> ChiSquareResult:
    """Pearson's chi-square test of homogeneity on a 2 × K table (sample × outcome).

    Outcomes whose expected count is below `min_expected` in either row are pooled into one "other"
    cell (the chi-square approximation needs expected counts of about 5 or more).
    """
    total_a, total_b = _total(counts_a, "A"), _total(counts_b, "B")
    total = total_a + total_b
    outcomes = sorted(set(counts_a) | set(counts_b), key=lambda x: -(counts_a.get(x, 0) + counts_b.get(x, 0)))
    cells, other = [], [0, 0]
    for x in outcomes:
        a, b = counts_a.get(x, 0), counts_b.get(x, 0)
        if (a + b) * min(total_a, total_b) / total >= min_expected:
            cells.append([a, b])
        else:
            other[0] += a
            other[1] += b
    if sum(other):
        cells.append(other)
    statistic = 0.0
    for a, b in cells:
        column = a + b
        for observed, row_total in ((a, total_a), (b, total_b)):
            expected = column * row_total / total
            statistic += (observed - expected) ** 2 / expected
    dof = len(cells) - 1
    return ChiSquareResult(statistic, dof, chi_square_sf(statistic, dof), len(cells))


def wilson_interval(count: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """Where the true share behind `count` of `total` draws lies, 95 % of the time at z = 1.96 (Wilson's
    score interval: never below 0 or above 1, and not empty at a count of 0); (0, 1) with no draws."""
    if total <= 0:
        return 0.0, 1.0
    share, spread = count / total, z * z / total
    centre = (share + spread / 2) / (1 + spread)
    half = z * math.sqrt(share * (1 - share) / total + spread / (4 * total)) / (1 + spread)
    return max(0.0, centre - half), min(1.0, centre + half)
