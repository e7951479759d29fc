"""Exact, with fractions: a depth-2 tree judged by the rule emits its first two tokens as p(y1)·p(y2 | y1).

Every draw of the candidates and every coin is enumerated with its exact probability; the judging is
core.tree_rule.judged_in_turn itself, run on arrays of Fractions. The two lossy rules must fail the
same test on most pairs: a test a broken rule passes would prove nothing.
"""

import itertools
import random
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
import torch

from specdec.config import Q_KEPT, TOP_K_AS_SAMPLED, TREE_RULE_NAMES, WITH_REPLACEMENT, WITHOUT_REPLACEMENT
from specdec.core.tree_rule import (
    TREE_RULES,
    greedy_siblings,
    gumbel_top_k,
    judged_in_turn,
    without_replacement,
)

KINDS = ("random", "q zero where p is not", "p = q", "one-hot p")


def law(weights) -> np.ndarray:
    total = sum(weights)
    return np.array([Fraction(w, total) for w in weights], dtype=object)


def random_pair(rng: random.Random, vocab: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) at one context."""
    p = law([rng.randint(0, 9) for _ in range(vocab - 1)] + [rng.randint(1, 9)])
    q_weights = [rng.randint(0, 9) for _ in range(vocab - 1)] + [rng.randint(1, 9)]
    if kind == "q zero where p is not":
        q_weights[rng.randrange(vocab - 1)] = 0
        p = law([rng.randint(1, 9) for _ in range(vocab)])  # every token possible under p
    if kind == "p = q":
        return p, p.copy()
    if kind == "one-hot p":
        top = rng.randrange(vocab)
        p = law([int(i == top) for i in range(vocab)])
    return p, law(q_weights)


def draws(rule: str, q: np.ndarray, width: int) -> list[tuple[tuple[int, ...], Fraction]]:
    """Every candidate list the rule's draw can give, with its exact probability."""
    support = [x for x in range(len(q)) if q[x] > 0]
    if rule == TOP_K_AS_SAMPLED:
        return [(tuple(sorted(support, key=lambda x: (-q[x], x))[:width]), Fraction(1))]
    if rule == WITH_REPLACEMENT:
        return [(c, np.prod([q[x] for x in c])) for c in itertools.product(support, repeat=width)]
    out = []  # without replacement: draw, remove, renormalise, draw again
    for c in itertools.permutations(support, min(width, len(support))):
        prob, left = Fraction(1), Fraction(1)
        for x in c:
            prob, left = prob * q[x] / left, left - q[x]
        out.append((c, prob))
    return out


def node_law(rule: str, p: np.ndarray, q: np.ndarray, width: int) -> dict:
    """{(rank of the kept candidate or None, emitted token): probability} at one node."""
    out = defaultdict(Fraction)
    for candidates, prob in draws(rule, q, width):
        steps, last = judged_in_turn(candidates, q, p, TREE_RULES[rule].shrink_draft)
        reach = prob  # the draw, and every earlier candidate rejected
        for rank, step in enumerate(steps):
            out[rank, step.token] += reach * step.keep_chance
            reach *= 1 - step.keep_chance
        for y, mass in enumerate(last):
            out[None, y] += reach * mass
    return out


def token_law(node: dict, vocab: int) -> list[Fraction]:
    tokens = [Fraction(0)] * vocab
    for (_, y), prob in node.items():
        tokens[y] += prob
    return tokens


def first_two(rule: str, pairs: dict, width: int, child_width: int, expanded: int) -> dict:
    """Law of (y1, y2) from a tree: the root with `width` candidates, its first `expanded` candidates
    (by rank) with `child_width` children each. A kept expanded child's node gives y2; a kept leaf's
    bonus is drawn from p(· | y1); after a rejection at the root, the next round's root gives y2."""
    (p, q), vocab = pairs[None], len(pairs[None][0])
    joint = defaultdict(Fraction)
    for (rank, y1), prob in node_law(rule, p, q, width).items():
        if prob == 0:
            continue
        p1, q1 = pairs[y1]
        if rank is not None and rank >= expanded:
            second = list(p1)  # the bonus
        else:
            second = token_law(node_law(rule, p1, q1, child_width if rank is not None else width), vocab)
        for y2, prob2 in enumerate(second):
            joint[y1, y2] += prob * prob2
    return joint


def is_exact(joint: dict, pairs: dict) -> bool:
    p = pairs[None][0]
    return all(joint[y1, y2] == p[y1] * pairs[y1][0][y2]
               for y1 in range(len(p)) for y2 in range(len(p)))


def cases(count: int, seed: int):
    """Random trees: a vocabulary of 4 or 5, widths 2-3, one to all root candidates expanded, and a
    pair kind per context."""
    rng = random.Random(seed)
    for index in range(count):
        vocab = rng.choice((4, 5))
        kind = KINDS[index % len(KINDS)]
        pairs = {ctx: random_pair(rng, vocab, kind) for ctx in (None, *range(vocab))}
        yield kind, pairs, rng.choice((2, 3)), rng.choice((2, 3)), rng.randint(1, 3)


def run(rules, count: int, seed: int) -> dict:
    failures = {rule: defaultdict(int) for rule in rules}
    for kind, pairs, width, child_width, expanded in cases(count, seed):
        for rule in rules:
            failures[rule][kind] += not is_exact(first_two(rule, pairs, width, child_width, expanded), pairs)
    return failures


def test_without_replacement_is_exact_on_random_trees():
    failures = run([WITHOUT_REPLACEMENT], count=24, seed=0)
    assert sum(failures[WITHOUT_REPLACEMENT].values()) == 0


@pytest.mark.slow
def test_every_rule_over_hundreds_of_trees_the_exact_ones_always_the_lossy_ones_mostly_fail():
    count = 240
    failures = run(TREE_RULE_NAMES, count=count, seed=1)
    assert sum(failures[WITHOUT_REPLACEMENT].values()) == 0
    assert sum(failures[WITH_REPLACEMENT].values()) == 0
    random_trees = count // len(KINDS)
    for lossy in (Q_KEPT, TOP_K_AS_SAMPLED):  # the negative control: caught on most random pairs
        assert failures[lossy]["random"] > random_trees / 2, (lossy, dict(failures[lossy]))


def test_the_lossy_rules_fail_where_the_exact_one_holds():
    """The negative control, fast: over random pairs the lossy rules are caught on most."""
    failures = run([WITHOUT_REPLACEMENT, Q_KEPT, TOP_K_AS_SAMPLED], count=12, seed=2)
    assert sum(failures[WITHOUT_REPLACEMENT].values()) == 0
    for lossy in (Q_KEPT, TOP_K_AS_SAMPLED):
        assert failures[lossy]["random"] >= 2, (lossy, dict(failures[lossy]))


def test_at_temperature_0_the_rule_keeps_the_child_that_is_the_targets_top_token():
    rng = random.Random(3)
    for _ in range(20):
        vocab = rng.choice((4, 5))
        p, q = random_pair(rng, vocab, "one-hot p")
        top = int(np.argmax(p))
        for (rank, y), prob in node_law(WITHOUT_REPLACEMENT, p, q, 3).items():
            assert prob == 0 or y == top
            if prob:  # kept exactly when the top token was among the candidates, at its rank
                candidates = [c for c, w in draws(WITHOUT_REPLACEMENT, q, 3) if w]
                assert rank is None or any(c[rank] == top for c in candidates)
        # The sampling function agrees with the greedy one, coin for coin.
        candidates = gumbel_top_k(torch.tensor(q.astype(float)), 3, torch.Generator().manual_seed(0))
        exact = without_replacement(candidates, torch.tensor(q.astype(float)), torch.tensor(p.astype(float)),
                                    torch.Generator().manual_seed(1))
        greedy = greedy_siblings(candidates, torch.tensor(p.astype(float)))
        assert (exact.kept, exact.token) == (greedy.kept, greedy.token)


def test_after_every_candidate_is_rejected_the_rule_draws_from_the_last_residual():
    p, q = law([1, 1, 0, 2]), law([3, 1, 0, 0])  # q(3) = 0 < p(3): only a residual can emit it
    steps, last = judged_in_turn([0, 1], q, p)
    # x = 0: p(0)/q(0) = 1/3. Rejected: p_2 = norm(max(0, p − q)) = e_3, q_2 = q without 0 = e_1.
    assert [s.keep_chance for s in steps] == [Fraction(1, 3), 0]
    assert list(steps[1].target_probs) == [0, 0, 0, 1] and list(steps[1].draft_probs) == [0, 1, 0, 0]
    assert list(last) == [0, 0, 0, 1]
    # q exhausted (q_3 has no mass): the last residual is then p_3 itself, never a division by zero.
    steps, last = judged_in_turn([0, 1], q, law([1, 0, 0, 0]))
    assert list(last) == [1, 0, 0, 0] or steps[0].keep_chance == 1


def test_gumbel_top_k_draws_as_drawing_without_replacement_would():
    q = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0], dtype=torch.float64)
    generator, n = torch.Generator().manual_seed(4), 6000
    counts = defaultdict(int)
    for _ in range(n):
        counts[tuple(gumbel_top_k(q, 2, generator))] += 1
    expected = dict(draws(WITHOUT_REPLACEMENT, law([10, 6, 3, 1, 0]), 2))
    assert set(counts) <= set(expected)  # never the token q cannot give, never a repeat
    chi2 = sum((counts[c] - n * float(w)) ** 2 / (n * float(w)) for c, w in expected.items())
    assert chi2 < 32.9  # 12 outcomes, 11 degrees of freedom: the 0.999 quantile is 31.3
