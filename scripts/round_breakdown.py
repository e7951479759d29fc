"""Where a round's time goes, and what the matrix layout does to a forward pass, on this machine.

    .venv/bin/python scripts/round_breakdown.py [--temperature 0] [--max-new-tokens 64]

Loads the bundled pair once and prints, for each matrix layout of the fp32 target
(specdec.kernels.matmul), and the split one picked at load if it is one: the target's cached forward
pass over 1, 2, 3, 4, 5, 6, 8 and 12 new tokens,
then the milliseconds per round in each stage of the round loop, with the round view's full traces
and lean (as bench runs), on a held-out code prompt with the default drafter; then columns (and the
layout picked at load, if it has columns) once more with a long layer's weight whole, not in the
halves kernels.matmul's columns layout multiplies 3 or more tokens by; last, in the layout
picked at load, lean with the draft's one-token steps through the library's forward
(SPECDEC_DRAFT_STEP=library) and by hand (kernels.decoder_step) once more. The layouts are
measured in one run, side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.kernels import matmul  # noqa: E402
from specdec.measure import timing  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.paths import HELD_OUT_PROMPT_SETS  # noqa: E402

SIZES = (1, 2, 3, 4, 5, 6, 8, 12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement")
    args = parser.parse_args()
    pair = ModelPair.load()
    prompt = json.loads(HELD_OUT_PROMPT_SETS["code"].read_text())["prompts"][0]
    prompt_ids = pair.encode_prompt(prompt, chat=True, max_new_tokens=args.max_new_tokens)
    sampling = SamplingConfig(temperature=args.temperature)
    settings = Settings(sampling=sampling, max_new_tokens=args.max_new_tokens)
    chosen = matmul.layout_of(pair.target.model)
    print(f"target: {pair.target.describe()} (picked at load: {chosen})")
    print(f"drafter: {pair.drafter_name}; prompt: {prompt!r}; {settings}\n")
    print(f"{'layout':<15} " + " ".join(f"{n:>2} tok ms" for n in SIZES) + "   (cached forward pass, median)")
    breakdowns = {}

    def measure(layout: str, name: str) -> None:
        matmul.set_layout(pair.target.model, layout)
        timing.warm_up(pair, prompt_ids)
        costs = {r["tokens"]: r["seconds"] for r in timing.forward_cost_by_size(pair, prompt_ids, SIZES, 9)}
        print(f"{name:<15} " + " ".join(f"{1000 * costs[n]:>9.1f}" for n in SIZES))
        for label, detail in (("full trace", True), ("lean", False)):
            breakdowns[f"{name}, {label}"] = timing.round_breakdown(pair, prompt_ids, settings, detail,
                                                                    args.repeats)

    # Every layout, and the one picked at load where it is a split (fewer rows in one, more in another).
    for layout in dict.fromkeys([*matmul.candidate_layouts(), chosen]):
        measure(layout, layout)
    # Columns (and a split picked at load that has it) once more with a long layer's weight whole over
    # any number of rows, not in two halves.
    halves_from, matmul.HALVES_FROM_INPUTS = matmul.HALVES_FROM_INPUTS, math.inf
    for layout in dict.fromkeys([matmul.COLUMNS, chosen]):
        if matmul.COLUMNS in layout.partition("@")[0].split("/"):
            measure(layout, f"{layout}, whole")
    matmul.HALVES_FROM_INPUTS = halves_from
    matmul.set_layout(pair.target.model, chosen)
    # The same draft with its one-token steps through the library's forward (kernels.decoder_step).
    for label, draft_step in (("draft by library", "library"), ("again", None)):
        if draft_step:
            os.environ["SPECDEC_DRAFT_STEP"] = draft_step
        else:
            os.environ.pop("SPECDEC_DRAFT_STEP", None)
        breakdowns[f"{chosen}, lean, {label}"] = timing.round_breakdown(pair, prompt_ids, settings, False,
                                                                        args.repeats)
    stages = list(dict.fromkeys(s for parts in breakdowns.values() for s in parts))
    print(f"\n{'ms per round':<38} " + " ".join(f"{s:>13}" for s in stages) + f" {'total':>8}")
    for label, parts in breakdowns.items():
        print(f"{label:<38} " + " ".join(f"{parts.get(s, 0.0):>13.2f}" for s in stages)
              + f" {sum(parts.values()):>8.1f}")


if __name__ == "__main__":
    main()
