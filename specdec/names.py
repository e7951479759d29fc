"""Names of the bundled models (here, so the CLI can show them without importing torch)."""

BUNDLED_TARGET = "bundled:SmolLM2-135M-Instruct"
BUNDLED_DRAFT = "bundled:SmolLM2-135M-Instruct-draft"  # trained here: `python -m specdec train-draft`
