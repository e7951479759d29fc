"""Which drafters the Variants page races on one prompt: the target alone, n-gram lookup, the draft
model with a fixed and an adaptive length and as a tree, lookup first and then the model, the same two
for the feature head, and the target's own first layers (early exit: untrained, and with the trained
adapter). No Streamlit here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from specdec.config import TREE_OFF, Settings
from specdec.errors import SpecDecError
from specdec.measure.timing import TARGET
from specdec.measure.tree_race import tree_settings
from specdec.model_names import EARLY_EXIT
from specdec.models.exit_files import shipped_exit_exists
from specdec.models.feature_head_files import shipped_head_exists
from specdec.models.loading import shipped_draft_exists
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair
from specdec.paths import BUNDLED_DRAFT, BUNDLED_EXIT, BUNDLED_HEAD, BUNDLED_TARGET

Lane = tuple[ModelPair, Settings, bool]  # the pair, its settings, whether it speculates
# The untrained exit races at the layer the shipped adapter reads, so that its two lanes differ by the
# adapter alone (a target with fewer layers exits one before its last).
RACED_EXIT_LAYER = 4
NO_DRAFT_MODEL = "No draft model is configured: set one in the sidebar's *Drafter* box to race it too."


def lanes_to_race(
    pair: ModelPair, settings: Settings, pair_with: Callable[[str], ModelPair]
) -> tuple[dict[str, Lane], str | None]:
    """label -> lane, and a note for the page (None when all is well). The draft model and the head
    are the sidebar's, or the bundled target's trained ones. `pair_with(drafter)` gives the loaded
    target with another drafter (the server's one set of models: no second target is loaded)."""
    # Every lane drafts chains but one: the draft model's tree (the sidebar's, or one grown each round).
    fixed, adaptive = replace(settings, adaptive=False, tree=TREE_OFF), replace(settings, adaptive=True,
                                                                               tree=TREE_OFF)
    lanes: dict[str, Lane] = {TARGET: (pair, replace(settings, tree=TREE_OFF), False)}
    lanes["n-gram lookup"] = (pair_with(NGRAM), fixed, True)
    bundled = pair.target.name == BUNDLED_TARGET
    model, head = pair.draft and pair.draft.name, pair.head and pair.head.name
    if model is None and bundled and shipped_draft_exists():
        model = BUNDLED_DRAFT
    if head is None and bundled and shipped_head_exists():
        head = BUNDLED_HEAD
    if model is None and head is None:
        return lanes, NO_DRAFT_MODEL
    try:
        if model is not None:
            with_model = pair_with(model)
            lanes["draft model, γ fixed"] = (with_model, fixed, True)
            lanes["draft model, adaptive"] = (with_model, adaptive, True)
            lanes["n-gram, then model, adaptive"] = (pair_with(LOOKUP_FIRST + model), adaptive, True)
            tree = tree_settings(settings)
            lanes[f"draft model, tree ({tree.tree})"] = (with_model, tree, True)
        if head is not None:
            with_head = pair_with(head)
            lanes["feature head, adaptive"] = (with_head, adaptive, True)
            lanes["n-gram, then head, adaptive"] = (pair_with(LOOKUP_FIRST + head), adaptive, True)
        depth = pair.target.model.config.num_hidden_layers
        if depth > 1:
            layer = min(RACED_EXIT_LAYER, depth - 1)
            lanes[f"early exit after layer {layer}, adaptive"] = (pair_with(f"{EARLY_EXIT}{layer}"), adaptive,
                                                                  True)
        if bundled and shipped_exit_exists():
            lanes["exit adapter, adaptive"] = (pair_with(BUNDLED_EXIT), adaptive, True)
    except SpecDecError as error:  # a drafter that cannot load: race the others, and say why
        return lanes, str(error)
    return lanes, None
