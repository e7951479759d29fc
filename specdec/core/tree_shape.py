"""Which tree to draft: the shape that buys the most tokens for what a round costs (Sequoia, EAGLE-2).

The measured figure is βₖ at each depth: the chance that one of the first k candidates at a node
survives (drawn without replacement, judged by core.tree_rule). The k-th candidate then is the one
kept with chance mₖ = βₖ − βₖ₋₁, and a node is on the accepted path with the product of those chances
along its path from the root. A tree's expected accepted drafts are the sum over its nodes, and the
best tree of n nodes takes the n likeliest nodes: grown one node at a time, always the likeliest next
(a child below a node, or the next sibling beside it), it stays a tree because a node is never more
likely than its parent or its elder sibling.

A round with a tree of n nodes and depth d costs one target pass over n + 1 tokens and d drafting
steps (one draft pass per level); it gives 1 + (expected accepted drafts) tokens. The chosen size is the
one with the most tokens per unit of cost, the chain being the tree of width 1.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specdec.core.drafters import costs_up_to
from specdec.core.tree_rounds import TreeBudget, TreeShape, chain_shape
from specdec.paths import ASSETS

# βₖ per depth and temperature as scripts/tree_acceptance.py measured them (docs/LOG.md).
MEASURED_ACCEPTANCE = ASSETS / "tree_acceptance.json"


@dataclass(frozen=True)
class TreePlan:
    """A shape and what it is expected to give: accepted drafts per round, and tokens per cost."""

    shape: TreeShape
    expected_accepted: float  # Σ over the nodes of the chance each is on the accepted path
    round_cost: float  # in one-token target passes: the pass over the tree and the drafting steps
    tokens_per_cost: float  # (1 + expected_accepted) / round_cost: above 1 beats the target alone


def kept_chances(acceptance: Sequence[Sequence[float]]) -> list[list[float]]:
    """βₖ per depth (acceptance[d][k - 1]) -> mₖ per depth: the chance the k-th candidate is the kept one.
    β is made non-decreasing in k first (a measured β may dip by noise)."""
    chances = []
    for betas in acceptance:
        running, row = 0.0, []
        for beta in betas:
            beta = max(running, min(1.0, beta))
            row.append(beta - running)
            running = beta
        chances.append(row)
    return chances


def best_tree(acceptance: Sequence[Sequence[float]], size: int,
              max_depth: int | None = None) -> tuple[TreeShape, float]:
    """The tree of `size` drafted nodes with the most expected accepted drafts, and that number.
    `acceptance[d][k - 1]`: βₖ at depth d + 1 (the last row stands for every depth beyond it)."""
    chances = kept_chances(acceptance)
    depth_limit = max_depth or size

    def chance(depth: int, rank: int) -> float:
        row = chances[min(depth, len(chances)) - 1]
        return row[rank] if rank < len(row) else 0.0

    # Each entry: (-value, tie, parent node, depth, rank). Node 0 is the root.
    parents, depths, ranks, values = [-1], [0], [0], [1.0]
    frontier = [(-chance(1, 0), 0, 0, 1, 0)]
    tie = 1
    while frontier and len(parents) <= size:
        negative, _, parent, depth, rank = heapq.heappop(frontier)
        if -negative <= 0:
            break
        node = len(parents)
        parents.append(parent)
        depths.append(depth)
        ranks.append(rank)
        values.append(-negative)
        pushes = [(values[parent] * chance(depth, rank + 1), parent, depth, rank + 1)]
        if depth < depth_limit:
            pushes.append((values[node] * chance(depth + 1, 0), node, depth + 1, 0))
        for value, *where in pushes:
            heapq.heappush(frontier, (-value, tie, *where))
            tie += 1
    return _level_order(parents, depths, ranks), sum(values[1:])


def _level_order(parents: list[int], depths: list[int], ranks: list[int]) -> TreeShape:
    """Renumber nodes level by level, each node's children in rank order (TreeShape's order)."""
    order = [0]
    for node in order:  # breadth first: the list grows as it is read
        order += sorted((c for c, p in enumerate(parents) if p == node), key=lambda c: ranks[c])
    index = {node: i for i, node in enumerate(order)}
    return TreeShape(tuple(-1 if node == 0 else index[parents[node]] for node in order))


def tree_pass_costs(pass_costs: Sequence[float], tokens: int) -> list[float]:
    """What passes over 1 to `tokens` tokens cost, in one-token passes: as measured, then growing past
    the largest measured size as the last measured sizes grew (a tree may be wider than any chain the
    costs were timed for). None measured, or one size only: every pass as one (core.drafters)."""
    if len(pass_costs) < 2:
        return costs_up_to(pass_costs, tokens)
    costs = list(pass_costs[:tokens])
    tail = list(pass_costs[-4:])
    step = (tail[-1] - tail[0]) / (len(tail) - 1)
    while len(costs) < tokens:
        costs.append(costs[-1] + step)
    return costs


def plan(acceptance: Sequence[Sequence[float]], size: int, pass_costs: Sequence[float],
         step_price: float, max_depth: int | None = None) -> TreePlan:
    """The best tree of `size` nodes, priced: a pass over size + 1 tokens (`pass_costs[n - 1]`, in
    one-token passes; none measured: every size costs one) and `step_price` per level drafted."""
    shape, accepted = best_tree(acceptance, size, max_depth)
    cost = tree_pass_costs(pass_costs, len(shape) + 1)[len(shape)] + step_price * max(shape.depths)
    return TreePlan(shape, accepted, cost, (1 + accepted) / cost)


def choose_tree(acceptance: Sequence[Sequence[float]], pass_costs: Sequence[float], step_price: float,
                max_size: int, max_depth: int | None = None) -> TreePlan:
    """Of every size from 1 to `max_size`, the plan with the most tokens per cost."""
    plans = [plan(acceptance, n, pass_costs, step_price, max_depth) for n in range(1, max_size + 1)]
    return max(plans, key=lambda p: p.tokens_per_cost)


def best_chain(acceptance: Sequence[Sequence[float]], pass_costs: Sequence[float], step_price: float,
               max_length: int) -> TreePlan:
    """The chain (one candidate per node) of the best length, priced as `plan` prices trees."""
    first = [[row[0]] for row in acceptance]
    return choose_tree(first, pass_costs, step_price, max_length)


def measured_acceptance(temperature: float, path: Path = MEASURED_ACCEPTANCE) -> list[list[float]] | None:
    """βₖ per depth measured at the temperature nearest `temperature`, or None if never measured."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    by_temperature = {float(t): rows for t, rows in table.get("acceptance", {}).items()}
    if not by_temperature:
        return None
    return by_temperature[min(by_temperature, key=lambda t: abs(t - temperature))]


# Without a measurement: a draft right half the time, its second choice a quarter more, less below.
PRIOR_ACCEPTANCE = [[0.5, 0.65, 0.72, 0.76]]


def shape_for(tree: int | None, temperature: float, pass_costs: Sequence[float], step_price: float,
              gamma: int) -> TreeShape | TreeBudget:
    """Settings.tree as a round's tree: N nodes (the best tree of that size, from the acceptance measured
    at this temperature), or for 'auto' a budget each round grows its own tree in (up to 4γ nodes,
    core.tree_rounds.grow_tree, priced by `pass_costs`); never deeper than γ."""
    if tree is None:
        nodes = 4 * gamma
        return TreeBudget(nodes, gamma, tuple(tree_pass_costs(pass_costs, nodes + 1)), step_price)
    if tree <= 0:
        return chain_shape(gamma)
    acceptance = measured_acceptance(temperature) or PRIOR_ACCEPTANCE
    return best_tree(acceptance, tree, gamma)[0]
