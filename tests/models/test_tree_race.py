"""Tree against chain (measure.tree_race) and the tree lane Variants races (measure.drafter_race), on
the tiny pair: the tree lane drafts trees, every other lane chains."""

import pytest

from specdec.config import TREE_AUTO, TREE_OFF, SamplingConfig, Settings
from specdec.measure import drafter_race, timing, tree_race


def test_the_tree_lane_takes_the_settings_tree_or_the_measured_best():
    assert tree_race.tree_settings(Settings(tree=TREE_OFF)).tree == TREE_AUTO
    assert tree_race.tree_settings(Settings(tree="8")).tree == "8"
    assert tree_race.chain_settings(Settings(tree="8")).tree == TREE_OFF


def test_variants_races_one_tree_and_chains_elsewhere(pair):
    lanes, note = drafter_race.lanes_to_race(pair, Settings(tree="8"), lambda drafter: pair)
    trees = [label for label, (_, settings, _) in lanes.items() if settings.tree != TREE_OFF]
    assert note is None and trees == ["draft model, tree (8)"]


@pytest.mark.slow  # three lanes of the tiny pair: seconds on a 2-core machine
def test_a_race_of_tree_chain_and_target(pair, prompt_ids):
    settings = Settings(gamma=3, max_new_tokens=16, seed=1, sampling=SamplingConfig(1.0, 0, 1.0), tree="8")
    *_, runs = timing.race_lanes(tree_race.tree_lanes(pair, settings), prompt_ids)  # the last pass's runs
    rows = {row["lane"]: row for row in tree_race.lane_rows(runs)}
    assert list(rows) == ["tree (8)", tree_race.CHAIN, timing.TARGET]
    assert rows["tree (8)"]["trees"] and not rows[tree_race.CHAIN]["trees"]
    assert all(row["tokens"] >= 16 for row in rows.values())
    assert rows[timing.TARGET]["speedup"] == pytest.approx(1.0)
    # A run's figures follow its own counts
    chain = runs[tree_race.CHAIN]
    assert rows[tree_race.CHAIN]["passes"] == len(chain.traces)
