"""α and speed of the early exit against its depth L, on the held-out prompt sets.

Races `early:L` for each L given (the target's first L layers, then its own norm and head, untrained),
and any other drafters named with --also (the trained exit adapter, the draft), against the target alone,
through bench's own race (specdec.cli.bench.run_bench_sets): the first few prompts of each set, at each
temperature. Prints one line per set, drafter and temperature, and writes every report as JSON.

    nice -n 10 .venv/bin/python scripts/early_exit_sweep.py --layers 2,4,8,16 --prompts 2 \\
        --temperatures 0,1 --also bundled:SmolLM2-135M-Instruct-exit --output /tmp/early-exit-sweep.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.cli.bench import load_prompt_sets, run_bench_sets  # noqa: E402
from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.errors import SpecDecError  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.paths import HELD_OUT_PROMPT_SETS  # noqa: E402


def numbers(text: str, kind=int) -> list:
    try:
        return [kind(word) for word in text.split(",") if word.strip()]
    except ValueError as error:
        raise SpecDecError(f"expected numbers separated by commas, got {text!r}") from error


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="2,4,8,16", help="the depths L to race (early:L)")
    parser.add_argument("--also", default="", help="other drafters to race beside them, comma-separated")
    parser.add_argument("--prompts", type=int, default=2, help="the first N prompts of each held-out set")
    parser.add_argument("--sets", default=",".join(HELD_OUT_PROMPT_SETS), help="which held-out sets")
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--tokens", type=int, default=48, help="new tokens a run")
    parser.add_argument("--output", type=Path, help="write the reports here (JSON)")
    args = parser.parse_args()
    try:
        drafters = [f"early:{n}" for n in numbers(args.layers)] + [d for d in args.also.split(",") if d]
        names = [n for n in args.sets.split(",") if n]
        if unknown := [n for n in names if n not in HELD_OUT_PROMPT_SETS]:
            raise SpecDecError(f"no held-out set {', '.join(unknown)}: choose from "
                               f"{', '.join(HELD_OUT_PROMPT_SETS)}")
        sets = {name: prompts[: args.prompts] for name, prompts in
                load_prompt_sets([HELD_OUT_PROMPT_SETS[n] for n in names]).items()}
        pair = ModelPair.load(drafter=drafters[0])
        reports = {}
        for temperature in numbers(args.temperatures, float):
            settings = Settings(sampling=SamplingConfig(temperature=temperature), max_new_tokens=args.tokens)
            report = run_bench_sets(pair, sets, replace(settings, adaptive=True), chat=True, with_hf=False,
                                    race=drafters)
            reports[str(temperature)] = report
            for set_name, entry in report["sets"].items():
                for label, row in entry["methods"].items():
                    alpha = row.get("alpha")
                    print(f"T={temperature:g} {set_name:10s} {label:42s} "
                          f"{row['tokens_per_second']:6.2f} tok/s  {row['over_target_only']:5.2f}x  "
                          f"alpha {'-' if alpha is None else f'{alpha:.3f}'}", flush=True)
        if args.output:
            args.output.write_text(json.dumps(reports, indent=1))
    except SpecDecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
