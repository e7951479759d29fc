"""Write the tokens the shipped draft's reduced head scores (FR-Spec), read off the campaigns' answers.

    python scripts/draft_head_tokens.py                  # assets/draft/draft_head_tokens.json, 8,192 tokens
    python scripts/draft_head_tokens.py --count 12288 --output other.json

The list is `specdec.training.campaign.frequent_answer_tokens` over the greedy and the sampled
campaign (`assets/campaign-greedy/`, `assets/campaign/`); a test checks that the shipped file is it.
It also prints, per kind, the share of the greedy answers' tokens that the list in the file before it
and the new list leave out: at T = 0 a draft can never propose those, so each is a sure rejection.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.models.loading import HEAD_TOKENS_FILE, SHIPPED_DRAFT  # noqa: E402
from specdec.paths import GREEDY_CAMPAIGN_ANSWERS  # noqa: E402
from specdec.training.campaign import answer_token_counts, frequent_answer_tokens  # noqa: E402

VOCAB_SIZE = 49152  # SmolLM2's tokenizer


def left_out(token_lists: dict[str, list[int]]) -> dict[str, dict[str, float]]:
    """Per list, per kind: the share of the greedy answers' tokens not in the list."""
    counts = answer_token_counts(GREEDY_CAMPAIGN_ANSWERS, VOCAB_SIZE)
    return {name: {kind: 1 - (kind_counts[tokens].sum() / kind_counts.sum()).item()
                   for kind, kind_counts in counts.items()}
            for name, tokens in token_lists.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=8192)
    parser.add_argument("--output", type=Path, default=SHIPPED_DRAFT / HEAD_TOKENS_FILE)
    args = parser.parse_args()
    tokens = frequent_answer_tokens(args.count, VOCAB_SIZE)
    lists = {"new": tokens}
    if args.output.exists():
        lists = {"before": json.loads(args.output.read_text(encoding="utf-8")), **lists}
    print("greedy answers' tokens left out, per kind:")
    for name, shares in left_out(lists).items():
        print(f"  {name:>6}: " + ", ".join(f"{kind} {share:.1%}" for kind, share in shares.items()))
    args.output.write_text(json.dumps(tokens) + "\n", encoding="utf-8")
    print(f"{len(tokens)} tokens -> {args.output}")


if __name__ == "__main__":
    main()
