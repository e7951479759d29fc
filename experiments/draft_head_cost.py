"""What the exported draft's full-vocabulary head costs against the shipped draft's reduced head.

    .venv/bin/python experiments/draft_head_cost.py [--rounds 7]

One process loads the bundled target with both drafts (the shipped one, drafting over its 8,192 most
frequent tokens, and its export, over all 49,152) and times one-token forwards with a warm cache, target
and draft alternating (training.evaluate.one_token_step_costs), the two drafts taking turns round by
round. Prints the median of each: ms per token and the cost ratio c against the target.

Its answer is written in docs/LOG.md, "2026-12-02 — The draft outside specdec: transformers, GGUF,
llama.cpp".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the app and the CLI run
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.models.export import exported_draft_folder  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.paths import BUNDLED_DRAFT  # noqa: E402
from specdec.training.evaluate import one_token_step_costs  # noqa: E402

PROMPT = "Write a Python function that merges two sorted lists into one sorted list."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    shipped = ModelPair.load(drafter=BUNDLED_DRAFT)
    pairs = {"reduced head (shipped)": shipped,
             "full head (exported)": shipped.with_drafter(str(exported_draft_folder()))}
    context = shipped.encode_prompt(PROMPT, chat=True) * 2  # ~100 tokens of context
    runs: dict[str, list[dict]] = {label: [] for label in pairs}
    for _ in range(args.rounds):
        for label, pair in pairs.items():
            runs[label].append(one_token_step_costs(pair, context, repeats=20))
    for label, pair in pairs.items():
        median = {key: statistics.median(run[key] for run in runs[label]) for key in runs[label][0]}
        print(f"{label}: draft {median['draft_ms']:.1f} ms, target {median['target_ms']:.1f} ms, "
              f"c = {median['cost_ratio']:.3f}   [{pair.draft.describe()}]")


if __name__ == "__main__":
    main()
