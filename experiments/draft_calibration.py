"""Is the draft's top probability its chance of surviving? The pricing of drafts takes it to be.

    .venv/bin/python experiments/draft_calibration.py --prompts 48

Runs the bundled target with the bundled draft alone (no lookup) at T = 0, γ 6 drafted every round
(adaptive length off, so that drafts of every confidence face the target), on data-campaign prompts
from index 40,000 on: made by the same templates as the training data, but past every index the
campaign has used, and none of them from the held-out sets. For every draft that faced the test (up to
and including the first rejection) it takes q(x), the draft's top probability at T = 0, and whether
the target kept it, and prints per kind and overall, in tenths of q: mean q -> the share kept (count).
A calibrated draft keeps about q; a share above q means the draft is surer than its probabilities say.

Its answer is written in docs/LOG.md, "2026-12-03 — Is the draft's top probability its chance of
surviving?", and for the shipped draft "2026-12-06 — The trained draft: read-back figures of each stage,
and its calibration".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from draft_replay import kept_by_tenth  # noqa: E402  (this script's folder is on the path)

from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.models.runs import generate  # noqa: E402
from specdec.paths import BUNDLED_DRAFT  # noqa: E402
from specdec.training.campaign_prompts import campaign_prompt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--first-index", type=int, default=40_000)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    pair = ModelPair.load(drafter=BUNDLED_DRAFT)
    settings = Settings(gamma=6, sampling=SamplingConfig(temperature=0.0), max_new_tokens=args.max_new_tokens,
                        adaptive=False)
    drafts = {}  # kind -> [(q, kept)] of the drafts that faced the test
    for index in range(args.first_index, args.first_index + args.prompts):
        kind, prompt = campaign_prompt(index)
        prompt_ids = pair.encode_prompt(prompt, chat=True, max_new_tokens=args.max_new_tokens)
        for trace in generate(pair, prompt_ids, settings, detail=False).rounds:
            drafts.setdefault(kind, []).extend((trace.draft_token_probs[i], i < trace.num_accepted)
                                               for i in range(trace.num_tested))
    drafts["all"] = [draft for kind_drafts in drafts.values() for draft in kind_drafts]
    for kind in sorted(drafts):
        filled = [cell for cell in kept_by_tenth(drafts[kind]) if cell[0]]
        print(f"{kind}: " + ", ".join(f"{q / n:.2f} -> {kept / n:.2f} ({n})" for n, kept, q in filled))


if __name__ == "__main__":
    main()
