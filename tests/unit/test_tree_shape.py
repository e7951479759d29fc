"""The tree's shape from measured acceptance and pass costs (core.tree_shape)."""

import itertools
import json

import pytest

from specdec.core.tree_rounds import TreeShape, chain_shape
from specdec.core.tree_shape import (
    best_chain,
    best_tree,
    choose_tree,
    kept_chances,
    measured_acceptance,
    plan,
    shape_for,
    tree_pass_costs,
)

ACCEPTANCE = [[0.6, 0.75, 0.8], [0.5, 0.65, 0.7]]  # depth 1, then every depth below


def test_kept_chances_are_the_steps_of_beta_never_negative():
    assert kept_chances([[0.5, 0.7, 0.65]]) == [[0.5, pytest.approx(0.2), 0.0]]


def test_the_best_tree_takes_the_likeliest_nodes():
    shape, accepted = best_tree(ACCEPTANCE, 4)
    # Node values: first child 0.6, its first child 0.3, second child 0.15, its grandchild 0.15,
    # under the first child's second rank 0.6 x 0.15 = 0.09; root's third 0.05.
    assert accepted == pytest.approx(0.6 + 0.3 + 0.15 + 0.15)
    assert len(shape) == 4 and shape.parents[0] == -1
    assert sorted(shape.depths) == [0, 1, 1, 2, 3]


def every_tree(size: int):
    """Every tree of `size` nodes, by parents in level order (small sizes only)."""
    for parents in itertools.product(*(range(i) for i in range(1, size + 1))):
        yield TreeShape((-1, *parents))


def value_of(shape: TreeShape, acceptance) -> float:
    chances = kept_chances(acceptance)
    values, total = [1.0] * (len(shape) + 1), 0.0
    for node in range(1, len(shape) + 1):
        parent = shape.parents[node]
        rank = shape.children(parent).index(node)
        row = chances[min(shape.depths[node], len(chances)) - 1]
        values[node] = values[parent] * (row[rank] if rank < len(row) else 0.0)
        total += values[node]
    return total


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_no_tree_of_the_same_size_expects_more(size):
    _, accepted = best_tree(ACCEPTANCE, size)
    assert accepted == pytest.approx(max(value_of(s, ACCEPTANCE) for s in every_tree(size)))


def test_the_chosen_size_pays_for_its_pass_and_the_chain_is_the_width_one_tree():
    flat = choose_tree(ACCEPTANCE, pass_costs=(), step_price=0.1, max_size=16)
    dear = choose_tree(ACCEPTANCE, pass_costs=[1 + 0.2 * n for n in range(20)], step_price=0.1, max_size=16)
    assert len(flat.shape) > len(dear.shape)  # cheap passes: a bigger tree
    chain = best_chain(ACCEPTANCE, (), 0.1, 6)
    assert all(len(chain.shape.children(n)) <= 1 for n in range(len(chain.shape) + 1))
    assert flat.tokens_per_cost >= chain.tokens_per_cost
    assert plan(ACCEPTANCE, 3, (), 0.0).round_cost == 1.0


def test_a_setting_becomes_a_shape(tmp_path, monkeypatch):
    assert shape_for(0, 1.0, (), 0.1, 5) == chain_shape(5)
    assert len(shape_for(7, 1.0, (), 0.1, 5)) == 7
    grown = shape_for(None, 1.0, (1.0, 1.5), 0.1, 3)  # auto: each round grows its own, within a budget
    assert (grown.nodes, grown.depth, grown.step_price) == (12, 3, 0.1)
    assert grown.pass_costs[:3] == pytest.approx((1.0, 1.5, 2.0)) and len(grown.pass_costs) == 13
    table = tmp_path / "acceptance.json"
    table.write_text(json.dumps({"acceptance": {"0": [[0.9]], "1": [[0.3, 0.4]]}}))
    assert measured_acceptance(0.2, table) == [[0.9]]
    assert measured_acceptance(0.8, table) == [[0.3, 0.4]]
    assert measured_acceptance(1.0, tmp_path / "missing.json") is None


def test_pass_costs_grow_past_the_measured_sizes_as_they_grew():
    assert tree_pass_costs((1.0, 1.2, 1.4, 1.6), 6) == pytest.approx([1.0, 1.2, 1.4, 1.6, 1.8, 2.0])
    assert tree_pass_costs((), 3) == [1.0, 1.0, 1.0]
    assert tree_pass_costs((1.0,), 2) == [1.0, 1.0]
