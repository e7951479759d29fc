"""The feature head's data-scaling curve: the same training on the campaign's first N answers, for each N.

    .venv/bin/python scripts/head_scaling.py 1500 3000 6000 [--minutes 8] [--work-root .cache/head-scaling]

Each N runs `python -m specdec train-head --start-from-draft --campaign --answers N` with the shipped
head's settings and the same time budget (run nothing else meanwhile: the budget is wall time), in its
own work folder (resumable), and writes its head there. The held-out evaluation set (the target's greedy
answers to every held-out kind) is made once and shared. Prints, per N, the last evaluation: Σ min(p, q)
of the first draft (its acceptance rate α at T = 1) and the share of first drafts equal to the target's
argmax (α at T = 0), per held-out kind, and writes them all to work-root/scaling.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_SETTINGS = ["--start-from-draft", "--learning-rate", "2e-4", "--warmup-steps", "200",
                    "--feature-weight", "0"]


def train(answers: int, minutes: float, work: Path) -> dict:
    command = [sys.executable, "-m", "specdec", "train-head", *SHIPPED_SETTINGS, "--campaign",
               "--answers", str(answers), "--minutes", str(minutes), "--work-dir", str(work / "work"),
               "--output", str(work / "head")]
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)
    return json.loads((work / "head" / "training.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=int, nargs="+", help="training answers per point")
    parser.add_argument("--minutes", type=float, default=8.0, help="training budget per point")
    parser.add_argument("--work-root", type=Path, default=ROOT / ".cache" / "head-scaling")
    args = parser.parse_args()
    points = {}
    shared_eval = None
    for answers in args.answers:
        work = args.work_root / str(answers)
        (work / "work").mkdir(parents=True, exist_ok=True)
        if shared_eval is not None and not (work / "work" / shared_eval.name).exists():
            shutil.copy(shared_eval, work / "work" / shared_eval.name)
        card = train(answers, args.minutes, work)
        shared_eval = next((work / "work").glob("eval-*.pt"))
        points[answers] = {"steps": card["steps"], "answer_positions": card["answer_positions"],
                           "last": card["history"][-1]}
    (args.work_root / "scaling.json").write_text(json.dumps(points, indent=1) + "\n")
    first = points[args.answers[0]]["last"]
    kinds = [k for k in first if isinstance(first[k], dict)]  # the held-out sets' figures
    print(f"{'answers':>8} {'positions':>9} {'steps':>5}  " + "  ".join(f"{k:>17}" for k in kinds))
    print(f"{'':>8} {'':>9} {'':>5}  " + "  ".join(f"{'Σmin  agree':>17}" for _ in kinds))
    for answers, point in points.items():
        cells = [f"{point['last'][k]['sum_min_pq']:.3f}  {point['last'][k]['agree_1_in_a_row']:.3f}".rjust(17)
                 for k in kinds]
        print(f"{answers:>8} {point['answer_positions']:>9} {point['steps']:>5}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
