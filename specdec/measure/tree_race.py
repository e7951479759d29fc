"""Tree against chain on one prompt: the lanes Live speed-up and Variants race (a tree of drafts per
round, the same draft model's chain, the target alone), and the race's figures per lane. No Streamlit.
"""

from __future__ import annotations

from dataclasses import replace

from specdec.config import TREE_AUTO, TREE_OFF, Settings
from specdec.measure.timing import TARGET, TimedRun
from specdec.models.pair import ModelPair

TREE, CHAIN = "tree", "chain"


def tree_settings(settings: Settings) -> Settings:
    """The settings' tree (Settings.tree), or one grown to fit each round where the settings draft chains."""
    return replace(settings, tree=settings.tree if settings.tree != TREE_OFF else TREE_AUTO)


def chain_settings(settings: Settings) -> Settings:
    return replace(settings, tree=TREE_OFF)


def tree_lanes(pair: ModelPair, settings: Settings) -> dict[str, tuple[ModelPair, Settings, bool]]:
    """label -> (pair, settings, speculates): the tree, the chain and the target alone, one pair."""
    tree = tree_settings(settings)
    return {f"{TREE} ({tree.tree})": (pair, tree, True), CHAIN: (pair, chain_settings(settings), True),
            TARGET: (pair, chain_settings(settings), False)}


def drew_trees(run: TimedRun) -> bool:
    """Whether any round of the run verified a tree (a drafter without a draft model drafts chains)."""
    return any(trace.tree is not None for trace in run.traces)


def lane_rows(runs: dict[str, TimedRun]) -> list[dict]:
    """Per lane: tokens, tokens/s, its speed-up over the target alone, target passes and tokens per pass."""
    plain = runs[TARGET]
    rows = []
    for label, run in runs.items():
        passes = len(run.traces) if run.traces else len(run.token_ids)
        rows.append({
            "lane": label, "tokens": len(run.token_ids), "tokens_per_second": run.tokens_per_second,
            "speedup": run.tokens_per_second / plain.tokens_per_second if plain.tokens_per_second else 0.0,
            "passes": passes, "tokens_per_pass": len(run.token_ids) / passes if passes else 0.0,
            "trees": drew_trees(run),
        })
    return rows
