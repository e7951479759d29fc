"""Names of the bundled models and where the assets are (no torch here, so the CLI can show them fast)."""

import os
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
# Prompts no training run has seen (a test checks): what bench and the draft's figures measure on.
HELD_OUT_PROMPT_SETS = {name: ASSETS / "prompts" / f"{name}.json"
                        for name in ("code", "structured", "prose", "math", "questions", "summaries")}
# Prompts of the same six kinds written after the drafters and their settings were chosen (docs/LOG.md,
# "Prompts written after the choices"): a check of the choice on text it was not tuned to. Nothing
# trains on them (the same test) and nothing is chosen by them.
LATER_PROMPT_SETS = {name: ASSETS / "prompts" / "later" / f"{name}.json" for name in HELD_OUT_PROMPT_SETS}
# The two the draft's training run evaluates on as it goes (code, which it learned, and prose); the
# feature head's evaluates on every held-out set.
TRAINING_EVAL_SETS = {name: HELD_OUT_PROMPT_SETS[name] for name in ("code", "prose")}

# The data campaign's answers (token ids: small, kept with the project); `python -m specdec campaign`.
CAMPAIGN_ANSWERS = ASSETS / "campaign"
GREEDY_CAMPAIGN_ANSWERS = ASSETS / "campaign-greedy"  # the same prompts, answered greedily

BUNDLED_TARGET = "bundled:SmolLM2-135M-Instruct"
BUNDLED_DRAFT = "bundled:SmolLM2-135M-Instruct-draft"  # trained here: `python -m specdec train-draft`
# The target's feature head, also trained here: `python -m specdec train-head`.
BUNDLED_HEAD = "bundled:SmolLM2-135M-Instruct-head"
# The target's own first layers and a trained exit adapter: `python -m specdec train-exit`.
BUNDLED_EXIT = "bundled:SmolLM2-135M-Instruct-exit"


def cache_root() -> Path:
    """Where what this machine derives is kept between runs (converted models, features, passages)."""
    return Path(os.environ.get("SPECDEC_CACHE", Path.home() / ".cache" / "specdec"))
