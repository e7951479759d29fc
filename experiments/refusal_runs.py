"""How often the default drafter refuses outright, and whether one refusal foretells the next.

    SPECDEC_PASS_COSTS=1,1.59,1.59,1.65,1.72,1.73,1.84,1.93,1.93 \\
        .venv/bin/python experiments/refusal_runs.py prose questions structured

A refusal is a round whose drafter drafted nothing because not even its first draft was worth what
it costs (drafts priced by the target's passes: core.drafters.stop_thresholds). Runs the bundled pair
with the default drafter at T = 0 on each named held-out set and prints per set: the share of rounds
refused, the share of refusals followed by another, and what the rounds after a refusal that did
draft kept (what a rule that skips the drafter after a refusal would give up: docs/LOG.md, "Resting the
drafter after a refusal"). Pinning the pass costs (as above: the ones a 2-core Intel Xeon timed with
AVX2 kernels) makes the count independent of the machine's speed.

Its answer is written in docs/LOG.md, "2026-12-03 — Resting the drafter after a refusal: tried, not kept
(negative)".
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.core.records import STOP_CONFIDENCE  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.models.runs import generate  # noqa: E402
from specdec.paths import HELD_OUT_PROMPT_SETS  # noqa: E402


def refused(trace) -> bool:
    return trace.draft_stop == STOP_CONFIDENCE and trace.num_drafted == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="+", choices=sorted(HELD_OUT_PROMPT_SETS))
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    pair = ModelPair.load()
    print("target pass costs (one-token passes, 1 to 9 tokens):", pair.target.pass_costs)
    settings = Settings(sampling=SamplingConfig(temperature=0.0), max_new_tokens=args.max_new_tokens)
    for name in args.sets:
        runs = []
        for prompt in json.loads(HELD_OUT_PROMPT_SETS[name].read_text())["prompts"]:
            prompt_ids = pair.encode_prompt(prompt, chat=True, max_new_tokens=args.max_new_tokens)
            runs.append(generate(pair, prompt_ids, settings, detail=False).rounds)
        rounds = sum(len(run) for run in runs)
        refusals = sum(refused(t) for run in runs for t in run)
        after = [b for run in runs for a, b in itertools.pairwise(run) if refused(a)]
        again = sum(refused(b) for b in after)
        drafting = [b for b in after if not refused(b)]
        print(f"{name}: {rounds} rounds, {refusals} refused ({refusals / rounds:.0%}); of the "
              f"{len(after)} after a refusal {again} refused again ({again / max(1, len(after)):.0%}), "
              f"{len(drafting)} drafted {sum(b.num_drafted for b in drafting)} tokens and kept "
              f"{sum(b.num_accepted for b in drafting)}")


if __name__ == "__main__":
    main()
