"""Do figures read from the cache decode as fast as figures timed now? One process, two copies of the
default pair: one loaded with the machine's kept timings (read from the cache; timed first if none are
kept), one timed afresh (as --retime does). Both decode every held-out prompt, target alone and
speculatively, in rotating order per prompt, so machine noise touches each alike; the script prints each
copy's speed-up over its own target-alone run, per set, and the layouts and pass costs each used.

    .venv/bin/python scripts/kept_vs_fresh.py --temperature 0 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.cli.bench import SPECULATIVE, TARGET_ONLY, Method, _run, load_prompt_sets  # noqa: E402
from specdec.config import Settings  # noqa: E402
from specdec.kernels import choice, kept_timings  # noqa: E402
from specdec.kernels.matmul import layout_of  # noqa: E402
from specdec.models.loading import cpu_description  # noqa: E402
from specdec.models.pair import ModelPair, default_drafter  # noqa: E402
from specdec.paths import BUNDLED_TARGET  # noqa: E402


def load(fresh: bool) -> tuple[ModelPair, str]:
    """The default pair, its figures timed now (`fresh`) or read from the cache, and where they came from."""
    choice.forget_chosen()  # a second load in this process must not reuse the first one's choices
    if fresh:
        os.environ["SPECDEC_RETIME"] = "1"
    before = len(kept_timings.RECORDS)
    try:
        pair = ModelPair.load(BUNDLED_TARGET, default_drafter(BUNDLED_TARGET))
        _ = pair.target.pass_costs
    finally:
        os.environ.pop("SPECDEC_RETIME", None)
    return pair, kept_timings.summary(kept_timings.RECORDS[before:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-new-tokens", type=int, default=Settings().max_new_tokens)
    parser.add_argument("--repeats", type=int, default=1, help="runs per prompt and method")
    parser.add_argument("--fresh-first", action="store_true", help="load the freshly timed copy first (the "
                        "order of the two loads, checked apart from where the figures came from)")
    parser.add_argument("--prompt-set", action="append", type=Path, help="default: every held-out set")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    settings = replace(Settings(max_new_tokens=args.max_new_tokens),
                       sampling=replace(Settings().sampling, temperature=args.temperature))
    pairs = {}
    order = (("fresh", True), ("kept", False)) if args.fresh_first else (("kept", False), ("fresh", True))
    for name, fresh in order:
        pair, source = load(fresh)
        pairs[name] = pair
        print(f"{name}: figures {source}; target layout {layout_of(pair.target.model)}, pass costs "
              f"{[round(c, 2) for c in pair.target.pass_costs]}; draft {pair.draft.describe()}",
              file=sys.stderr, flush=True)
    speculative = replace(Method("speculative", SPECULATIVE, default_drafter(BUNDLED_TARGET)), adaptive=True)
    methods = [(name, method) for name in pairs for method in (Method(TARGET_ONLY, TARGET_ONLY), speculative)]
    for name, method in methods:  # first calls pay for lazy initialisation; keep that out of the numbers
        warm_up = pairs[name].encode_prompt("Hello", True, 8)
        _run(method, pairs[name], warm_up, replace(settings, max_new_tokens=8))
    report = {"cpu": cpu_description(), "temperature": args.temperature, "sets": {}}
    for set_name, prompts in load_prompt_sets(args.prompt_set).items():
        tokens = {(n, m.kind): 0 for n, m in methods}
        seconds = {(n, m.kind): 0.0 for n, m in methods}
        for index, prompt in enumerate(prompts * args.repeats):
            shift = index % len(methods)
            for name, method in methods[shift:] + methods[:shift]:
                ids = pairs[name].encode_prompt(prompt, True, settings.max_new_tokens)
                count, elapsed, _, _ = _run(method, pairs[name], ids, settings)
                tokens[name, method.kind] += count
                seconds[name, method.kind] += elapsed
        rate = {key: tokens[key] / seconds[key] for key in tokens}
        ratios = {name: rate[name, SPECULATIVE] / rate[name, TARGET_ONLY] for name in pairs}
        report["sets"][set_name] = {name: round(value, 3) for name, value in ratios.items()}
        print(f"{set_name:12s} kept {ratios['kept']:.2f}x  fresh {ratios['fresh']:.2f}x", flush=True)
    means = {name: sum(s[name] for s in report["sets"].values()) / len(report["sets"]) for name in pairs}
    print(f"{'mean':12s} kept {means['kept']:.2f}x  fresh {means['fresh']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(report | {"means": means}, indent=1) + "\n")


if __name__ == "__main__":
    main()
