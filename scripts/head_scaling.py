"""The feature head's data-scaling curve: the same training on the campaign's first N answers, for each N.

    .venv/bin/python scripts/head_scaling.py 1500 3000 6000 [--minutes 8 | --steps 1500]
        [--code-share 0.5] [--work-root .cache/head-scaling]
    .venv/bin/python scripts/head_scaling.py --evaluate HEAD_FOLDER [...] [--work-root ...]

Each N runs `python -m specdec train-head --start-from-draft --campaign --answers N` with the shipped head's
settings and the same budget, in its own work folder (resumable), and writes its head there. The budget is
wall time (--minutes: run nothing else meanwhile) or training steps (--steps: the same for every point
whatever the machine's load, so the campaign may go on beside it); --code-share draws code answers at that
share of each step (train-head's option). The held-out evaluation set (the target's
greedy answers to every held-out kind) is made once and shared. Then every head written, and the shipped
one, is read back from its files and evaluated on that set alike. Prints, per head: Σ min(p, q) of the first
draft (its acceptance rate α at T = 1) and the share of first drafts equal to the target's argmax (α at
T = 0), per held-out kind, and writes them to work-root/scaling.json. Last, per kind, the least-squares rise
of agreement per doubling of the answers, and from it how many answers would reach the goals (GOALS).
--evaluate trains nothing: it reads back the shipped head and the heads in the folders given, evaluates
them alike on the held-out set in work-root (made there if missing; --eval-tokens sets its answers' length),
and writes work-root/evaluated.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHIPPED_SETTINGS = ["--start-from-draft", "--learning-rate", "2e-4", "--warmup-steps", "200",
                    "--feature-weight", "0"]


GOALS = {"code": 0.78, "prose": 0.45}  # the first-draft agreement (α at T = 0) asked of the head


def extrapolate(agreement: dict[int, float], goal: float | None) -> dict:
    """The least-squares line of agreement against log2(answers): its rise per doubling, and the answers at
    which it would reach `goal` (None where it does not rise: no amount of data gets there on this line)."""
    answers = sorted(agreement)
    line = statistics.linear_regression([math.log2(n) for n in answers], [agreement[n] for n in answers])
    reach = None
    if goal is not None and line.slope > 0:
        reach = round(2 ** ((goal - line.intercept) / line.slope))
    return {"per_doubling": line.slope, "goal": goal, "answers_for_goal": reach}


def train(answers: int, options: list[str], work: Path) -> dict:
    command = [sys.executable, "-m", "specdec", "train-head", *SHIPPED_SETTINGS, "--campaign",
               "--answers", str(answers), *options, "--work-dir", str(work / "work"),
               "--output", str(work / "head")]
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)
    return json.loads((work / "head" / "training.json").read_text())


def evaluate_saved(heads: dict[str, str], eval_folder: Path, tokens: int | None = None) -> dict[str, dict]:
    """Each head (a folder or the bundled name), loaded as bench loads it but kept in fp32 weights, on the
    held-out set kept in `eval_folder` (made there first if missing): the target's greedy answers of
    `tokens` tokens (training's evaluation length where None)."""
    from specdec.config import HeadTrainingConfig
    from specdec.kernels.matmul import layout_of, set_layout
    from specdec.models.feature_head_files import load_head
    from specdec.models.loading import load_model
    from specdec.paths import BUNDLED_TARGET
    from specdec.training.train_feature_head import evaluate_head, held_out_eval_sets

    target = load_model(BUNDLED_TARGET)
    eval_sets = held_out_eval_sets(target, eval_folder, tokens or HeadTrainingConfig().eval_tokens)
    embed = target.model.get_input_embeddings()
    figures = {}
    for label, name in heads.items():
        loaded = load_head(name, target)
        # The weights as saved, as training evaluates them (not int8, where that drafts faster here).
        set_layout(loaded.head, layout_of(target.model))
        rows = loaded.reduced.weight.float()  # the target's output rows for the head's tokens
        figures[label] = {kind: evaluate_head(loaded.head.float(), examples, embed, rows, unroll=3)
                          for kind, examples in eval_sets.items()}
    return figures


def print_figures(figures: dict[str, dict], runs: dict[str, dict]) -> None:
    kinds, width = list(figures["shipped"]), max(8, *map(len, figures))
    print(f"{'head':>{width}} {'positions':>9} {'steps':>5}  " + "  ".join(f"{k:>16}" for k in kinds))
    print(f"{'':>{width}} {'':>9} {'':>5}  " + "  ".join(f"{'Σmin   agree':>16}" for _ in kinds))
    for label, by_kind in figures.items():
        run = runs.get(label, {"answer_positions": "", "steps": ""})
        cells = [f"{by_kind[k]['sum_min_pq']:.3f}  {by_kind[k]['agree_1_in_a_row']:.3f}".rjust(16)
                 for k in kinds]
        print(f"{label:>{width}} {run['answer_positions']:>9} {run['steps']:>5}  " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=int, nargs="*", help="training answers per point")
    parser.add_argument("--evaluate", type=Path, nargs="+", metavar="HEAD_FOLDER",
                        help="train nothing: evaluate these saved heads beside the shipped one")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=8.0, help="training time per point")
    budget.add_argument("--steps", type=int, help="training steps per point (instead of a time budget)")
    parser.add_argument("--code-share", type=float, help="the share of each step's answers that are code")
    parser.add_argument("--work-root", type=Path, default=ROOT / ".cache" / "head-scaling")
    parser.add_argument("--eval-tokens", type=int, help="with --evaluate: the held-out answers' length "
                        "(default: training's, 96); longer answers give more positions to count")
    args = parser.parse_args()
    from specdec.paths import BUNDLED_HEAD

    if args.evaluate:
        figures = evaluate_saved({"shipped": BUNDLED_HEAD} | {str(f): str(f) for f in args.evaluate},
                                 args.work_root, args.eval_tokens)
        (args.work_root / "evaluated.json").write_text(json.dumps(figures, indent=1))
        print_figures(figures, {})
        return
    if not args.answers:
        parser.error("give the training answers of each point, or --evaluate HEAD_FOLDER ...")
    # A step budget needs a time budget that never runs out first: a day.
    options = (["--max-steps", str(args.steps), "--minutes", "1440"] if args.steps
               else ["--minutes", str(args.minutes)])
    if args.code_share is not None:
        options += ["--code-share", str(args.code_share)]
    steps, shared_eval = {}, None
    for answers in args.answers:
        work = args.work_root / str(answers)
        (work / "work").mkdir(parents=True, exist_ok=True)
        if shared_eval is not None and not (work / "work" / shared_eval.name).exists():
            shutil.copy(shared_eval, work / "work" / shared_eval.name)
        card = train(answers, options, work)
        shared_eval = next((work / "work").glob("eval-*.pt"))
        steps[str(answers)] = {"steps": card["steps"], "answer_positions": card["answer_positions"]}
    if not (args.work_root / shared_eval.name).exists():  # where evaluate_saved looks for it
        shutil.copy(shared_eval, args.work_root / shared_eval.name)
    heads = {"shipped": BUNDLED_HEAD} | {str(n): str(args.work_root / str(n) / "head") for n in args.answers}
    figures = evaluate_saved(heads, args.work_root)
    kinds = list(figures["shipped"])
    trend = {kind: extrapolate({n: figures[str(n)][kind]["agree_1_in_a_row"] for n in args.answers},
                               GOALS.get(kind))
             for kind in kinds} if len(args.answers) > 1 else {}
    (args.work_root / "scaling.json").write_text(json.dumps({"runs": steps, "figures": figures,
                                                             "trend": trend}, indent=1))
    print_figures(figures, steps)
    for kind, line in trend.items():
        reach = ("" if line["goal"] is None else f"; agreement {line['goal']} at "
                 + (f"~{line['answers_for_goal']:,} answers" if line["answers_for_goal"] else "no amount"))
        print(f"{kind}: {line['per_doubling']:+.3f} agreement per doubling of the answers{reach}")


if __name__ == "__main__":
    main()
