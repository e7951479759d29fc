"""Write the tokens the shipped draft's reduced head scores (FR-Spec), read off the campaigns' answers.

    python scripts/draft_head_tokens.py                  # assets/draft/draft_head_tokens.json, 8,192 tokens
    python scripts/draft_head_tokens.py --count 12288 --output other.json

The list is `specdec.training.campaign.frequent_answer_tokens` over the greedy and the sampled
campaign (`assets/campaign-greedy/`, `assets/campaign/`); a test checks that the shipped file is it.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.models.loading import HEAD_TOKENS_FILE, SHIPPED_DRAFT  # noqa: E402
from specdec.training.campaign import frequent_answer_tokens  # noqa: E402

VOCAB_SIZE = 49152  # SmolLM2's tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=8192)
    parser.add_argument("--output", type=Path, default=SHIPPED_DRAFT / HEAD_TOKENS_FILE)
    args = parser.parse_args()
    tokens = frequent_answer_tokens(args.count, VOCAB_SIZE)
    args.output.write_text(json.dumps(tokens) + "\n", encoding="utf-8")
    print(f"{len(tokens)} tokens -> {args.output}")


if __name__ == "__main__":
    main()
