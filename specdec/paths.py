"""Names of the bundled models and where the assets are (no torch here, so the CLI can show them fast)."""

from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
# Held out from draft training: the benchmark's default sets and the draft's evaluation prompts.
HELD_OUT_PROMPT_SETS = {"code": ASSETS / "prompts" / "code.json", "prose": ASSETS / "prompts" / "prose.json"}

BUNDLED_TARGET = "bundled:SmolLM2-135M-Instruct"
BUNDLED_DRAFT = "bundled:SmolLM2-135M-Instruct-draft"  # trained here: `python -m specdec train-draft`
