"""Do the quick runs of The guarantee and A class is a batch show their page's claim, on prompts the page
did not pick, and is the time left the pages show (specdec.measure.eta) true within 1.5x?

Runs the pages' own measurements (no browser) with the bundled pair and the default drafter:
- the guarantee's quick run (the page's QUICK_SAMPLES, top-k 5, T = 1, first token) on the page's prompt
  and on other prompts: speculative inside the noise band? the draft alone caught, or said unresolvable?
- the batch page's quick run on the page's code prompts and on prompts it did not pick (the code set's
  later prompts, the prose set): where does the ratio first fall below 1?
For each run: the time left the page would show after its first step(s), against the time it really took.

    .venv/bin/python experiments/quick_runs.py [--full]     (--full: the batch page's full run too)

The answer is written to docs/LOG.md ("No dead air").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec.config import SPECULATIVE, SamplingConfig, Settings  # noqa: E402
from specdec.measure import batching, eta, guarantee  # noqa: E402
from specdec.measure.batching import QUICK_RUN  # noqa: E402
from specdec.measure.guarantee import QUICK_SAMPLES, SAMPLE_PROMPT  # noqa: E402
from specdec.models.pair import ModelPair  # noqa: E402
from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET  # noqa: E402

OTHER_PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, a small robot",
                 "1, 2, 3, 4, 5,", "My favourite fruit is"]


def timed_steps(steps, weights: list[float]) -> dict:
    """Drive a page's generator; after each step, the time left the page shows against the truth."""
    start, marks, items = time.monotonic(), [], []
    for item in steps:
        items.append(item)
        marks.append(time.monotonic() - start)
    total = marks[-1]
    said = [eta.seconds_left(marks[i], weights, i + 1) for i in range(len(marks) - 1)]
    truth = [total - marks[i] for i in range(len(marks) - 1)]
    pairs = [(round(s, 1), round(t, 1), round(s / t, 2)) for s, t in zip(said, truth, strict=True) if t > 0]
    return {"items": items, "total": total, "first_step": marks[0], "eta_vs_actual": pairs}


def guarantee_runs(pair: ModelPair) -> list[dict]:
    out = []
    for prompt in [SAMPLE_PROMPT, *OTHER_PROMPTS]:
        ids = pair.encode_prompt(prompt, False, 2)
        settings = Settings(sampling=SamplingConfig(1.0, 5, 1.0), rule=SPECULATIVE)
        steps = guarantee.sample_outcomes(pair, ids, settings, QUICK_SAMPLES, 1)
        run = timed_steps(steps, [1.0] * QUICK_SAMPLES)
        tally = run["items"][-1]
        spec = guarantee.compare(tally.speculative, tally.target)
        control = guarantee.compare(tally.control, tally.target)
        out.append({"prompt": prompt, "seconds": round(run["total"], 1), "spec_tv": round(spec.tv, 3),
                    "band": round(spec.band, 3), "spec_inside": spec.inside,
                    "control_tv": control and round(control.tv, 3),
                    "control_band": control and round(control.band, 3),
                    "control_caught": control and not control.inside,
                    "draft_tv": tally.draft_tv and round(tally.draft_tv, 3),
                    "words": guarantee.verdict_words(tally, 200), "eta_after_5": run["eta_vs_actual"][4],
                    "eta_after_1": run["eta_vs_actual"][0]})
        print(json.dumps(out[-1]), flush=True)
    return out


def batch_run(pair: ModelPair, prompts: list[str], plan: dict, label: str) -> dict:
    settings = replace(Settings(), max_new_tokens=plan["tokens"])
    ids = [pair.encode_prompt(p, True, plan["tokens"]) for p in prompts[: plan["prompts"]]]
    weights = batching.class_weights(settings, len(ids), plan["sizes"], plan["cost"])
    run = timed_steps(batching.class_run(pair, ids, settings, plan["sizes"], plan["cost"]), weights)
    points = [v for kind, v in run["items"] if kind == "batch"]
    result = {"label": label, "seconds": round(run["total"], 1), "first_step": round(run["first_step"], 1),
              "ratios": {p.batch_size: round(p.ratio, 2) for p in points},
              "crossover": batching.crossover(points), "eta_vs_actual": run["eta_vs_actual"][:6]}
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the batch page's full run too")
    parser.add_argument("--skip-guarantee", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    pair = ModelPair.load(BUNDLED_TARGET, BUNDLED_DRAFT)
    if not args.skip_guarantee:
        guarantee_runs(pair)
    code = batching.held_out_prompts("code")
    batch_run(pair, code, QUICK_RUN, "quick, the page's prompts (code 1-2)")
    batch_run(pair, code[2:], QUICK_RUN, "quick, code 3-4 (not picked)")
    batch_run(pair, batching.held_out_prompts("prose"), QUICK_RUN, "quick, prose 1-2 (not picked)")
    if args.full:
        full = {"tokens": 32, "prompts": 4, "sizes": batching.BATCH_SIZES, "cost": True}
        batch_run(pair, code, full, "full, the page's defaults")
    print(f"load average {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
