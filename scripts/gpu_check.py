"""The CUDA path, checked end to end in one command, with a short report (Markdown) at the end.

    python scripts/gpu_check.py                         # on a GPU: at most about 8 minutes
    python scripts/gpu_check.py --cpu                   # the same checks, reduced, on the CPU (CI runs it)
    python scripts/gpu_check.py --output gpu-check.md   # the report as a Markdown file too

Checks, each timed, each reported even when another failed (the exit status is 1 if any failed):
the device and the pair's memory; greedy speculative output against plain greedy, for every drafter,
on held-out code and prose prompts, in the default dtype (fp32 target: must be equal) and with
SPECDEC_DTYPE=bfloat16 (may differ: counted, not failed); one seed replayed at T = 0.8; a batch of 4
against the same rows alone; `bench` on two sets; the idle-machine curve; the draft's and the head's
training commands on tiny budgets (not with --cpu: the suite trains both); the tests marked `cuda`.
docs/howto/own-pair-and-gpu.md says how to read it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import torch  # noqa: E402

from specdec.config import SamplingConfig, Settings  # noqa: E402
from specdec.measure import timing  # noqa: E402
from specdec.models.batch_runs import batch_generate  # noqa: E402
from specdec.models.loading import cpu_description, gpu_description  # noqa: E402
from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair  # noqa: E402
from specdec.models.runs import generate  # noqa: E402
from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET, HELD_OUT_PROMPT_SETS  # noqa: E402

DRAFTERS = (NGRAM, BUNDLED_DRAFT, LOOKUP_FIRST + BUNDLED_DRAFT, BUNDLED_HEAD, LOOKUP_FIRST + BUNDLED_HEAD)


@dataclass
class Check:
    name: str
    ok: bool | None  # None: informational, or skipped
    detail: str
    seconds: float


@dataclass(frozen=True)
class Budget:
    """How much each check does: the full run on a GPU, a reduced one on the CPU."""

    prompts_per_set: int
    new_tokens: int
    bf16: bool  # the bf16 pass (a CPU without bf16 math would emulate it: slow, and not the point here)


FULL, REDUCED = Budget(6, 64, True), Budget(1, 12, False)


def prompts(kind: str, budget: Budget) -> list[str]:
    return json.loads(HELD_OUT_PROMPT_SETS[kind].read_text())["prompts"][: budget.prompts_per_set]


def memory_line(pair: ModelPair) -> str:
    if pair.target.device.type == "cuda":
        return (f"{torch.cuda.memory_allocated() / 2**20:,.0f} MiB allocated on the GPU "
                f"({torch.cuda.max_memory_allocated() / 2**20:,.0f} MiB at most so far)")
    return f"{psutil.Process().memory_info().rss / 2**20:,.0f} MiB resident (the whole process)"


def greedy_equality(pair: ModelPair, budget: Budget) -> tuple[bool, str]:
    """Every drafter's greedy speculative output against plain greedy, on code and prose."""
    settings = Settings(max_new_tokens=budget.new_tokens, sampling=SamplingConfig(temperature=0.0))
    lines, equal, total = [], 0, 0
    for drafter in DRAFTERS:
        with_drafter = pair.with_drafter(drafter)
        same = 0
        texts = [p for kind in ("code", "prose") for p in prompts(kind, budget)]
        for text in texts:
            ids = with_drafter.encode_prompt(text, True, budget.new_tokens)
            spec = generate(with_drafter, ids, settings, speculative=True, detail=False).token_ids
            plain = generate(with_drafter, ids, settings, speculative=False).token_ids
            same += spec == plain
        lines.append(f"{drafter}: {same} of {len(texts)} identical")
        equal, total = equal + same, total + len(texts)
    return equal == total, "; ".join(lines)


def seed_replay(pair: ModelPair, budget: Budget) -> tuple[bool, str]:
    settings = Settings(max_new_tokens=budget.new_tokens, seed=7, sampling=SamplingConfig(temperature=0.8))
    ids = pair.encode_prompt(prompts("prose", budget)[0], True, budget.new_tokens)
    first, second = (generate(pair, ids, settings, detail=False).token_ids for _ in range(2))
    verdict = "the same" if first == second else "differ"
    return first == second, f"{len(first)} tokens, seed 7, T = 0.8: {verdict}"


def batch_against_rows(pair: ModelPair, budget: Budget) -> tuple[bool, str]:
    settings = Settings(max_new_tokens=budget.new_tokens, sampling=SamplingConfig(temperature=0.0))
    texts = (prompts("code", FULL) + prompts("prose", FULL))[:4]
    ids = [pair.encode_prompt(text, True, budget.new_tokens) for text in texts]
    batch = batch_generate(pair, ids, settings, speculative=True).token_ids
    alone = [generate(pair, row, settings, speculative=False).token_ids for row in ids]
    same = sum(a == b for a, b in zip(batch, alone, strict=True))
    return same == len(ids), f"greedy, speculative batch of 4 against plain rows alone: {same} of 4 identical"


def idle_curve(pair: ModelPair) -> tuple[None, str]:
    ids = pair.encode_prompt(prompts("code", FULL)[0], True, 32)
    rows = list(timing.forward_cost_by_size(pair, ids, sizes=(1, 2, 4, 8, 16, 32), repeats=5))
    one = rows[0]["seconds"]
    return None, ", ".join(f"{r['tokens']} tok {1000 * r['seconds']:.1f} ms ({r['seconds'] / one:.2f}×)"
                           for r in rows)


def run_command(args: list[str], env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def last_line(done: subprocess.CompletedProcess) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[-1] if lines else "(no output)"


def bench_two_sets(budget: Budget, work: Path) -> tuple[bool, str]:
    sets = []
    for kind in ("code", "prose"):
        path = work / f"{kind}.json"
        path.write_text(json.dumps({"name": kind, "prompts": prompts(kind, budget)}))
        sets += ["--prompt-set", str(path)]
    output = work / "bench.json"
    done = run_command(["-m", "specdec", "bench", "--race", LOOKUP_FIRST + BUNDLED_DRAFT, "--temperature",
                        "0", "--repeats", "1", "--no-hf", "--max-new-tokens", str(budget.new_tokens),
                        "--json", "--output", str(output), *sets])
    if done.returncode != 0:
        return False, last_line(done)
    report = json.loads(output.read_text())
    ratios = {name: entry["methods"][report["default_method"]]["over_target_only"]
              for name, entry in report["sets"].items()}
    return True, ", ".join(f"{name} {ratio:.2f}× the target alone" for name, ratio in ratios.items())


def bf16_equality(budget: Budget) -> tuple[None, str]:
    """The same greedy comparison with the target in bf16, in a process of its own (SPECDEC_DTYPE is
    read at load): counted, not failed, since bf16 rounds a pass over several tokens otherwise."""
    code = ("import sys; sys.path.insert(0, 'scripts'); import gpu_check as g; "
            "from specdec.models.pair import ModelPair; "
            f"print(g.greedy_equality(ModelPair.load(g.BUNDLED_TARGET), g.Budget({budget.prompts_per_set}, "
            f"{budget.new_tokens}, True))[1])")
    done = run_command(["-c", code], env={"SPECDEC_DTYPE": "bfloat16"}, timeout=400)
    return None, last_line(done)


def training(work: Path) -> tuple[bool, str]:
    tiny = ["--max-shards", "1", "--generation-batch", "2", "--max-new-tokens", "8", "--max-steps", "2",
            "--eval-every", "2", "--eval-tokens", "4"]
    draft = run_command(["-m", "specdec", "train-draft", "--work-dir", str(work / "draft-work"), "--output",
                         str(work / "draft"), "--layers", "1", "--samples-per-prompt", "1", "--stdlib-blocks",
                         "2", "--stdlib-batch", "2", "--stdlib-max-tokens", "8", "--batch-size", "2", *tiny])
    head = run_command(["-m", "specdec", "train-head", "--work-dir", str(work / "head-work"), "--output",
                        str(work / "head"), "--layers", "1", "--batch-size", "2", "--feature-batch", "2",
                        *tiny])
    ok = draft.returncode == 0 and head.returncode == 0
    return ok, f"train-draft: exit {draft.returncode} ({last_line(draft)}); " \
               f"train-head: exit {head.returncode} ({last_line(head)})"


def cuda_tests() -> tuple[bool | None, str]:
    done = run_command(["-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider"], timeout=300)
    passed = done.returncode == 0
    return (passed if torch.cuda.is_available() else None), last_line(done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="a reduced run on the CPU (the CI's smoke test)")
    parser.add_argument("--output", type=Path, help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        print("error: no CUDA GPU here: run with --cpu for the reduced check on the CPU", file=sys.stderr)
        return 2
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path, even on a machine with a GPU
    budget = REDUCED if args.cpu else FULL
    checks: list[Check] = []

    def check(name: str, run) -> None:
        start = time.perf_counter()
        try:
            ok, detail = run()
        except Exception as error:  # noqa: BLE001 - a failed check is reported, the others still run
            ok, detail = False, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        checks.append(Check(name, ok, detail, time.perf_counter() - start))
        mark = {True: "ok", False: "FAILED", None: "--"}[ok]
        print(f"[{mark}] {name}: {detail}", flush=True)

    gpu = gpu_description()
    device = (f"{gpu['name']}, {gpu['memory_gib']} GiB, CUDA {gpu['cuda']}, torch {gpu['torch']}" if gpu
              else f"CPU: {cpu_description()['model']}, {os.cpu_count()} cores, torch {torch.__version__}")
    loaded: dict[str, ModelPair] = {}

    def load() -> tuple[bool, str]:
        pair = ModelPair.load(BUNDLED_TARGET)
        for drafter in DRAFTERS:
            pair = pair.with_drafter(drafter)
        loaded["pair"] = pair.with_drafter(LOOKUP_FIRST + BUNDLED_DRAFT)
        return True, f"{pair.target.describe()}; {memory_line(pair)}"

    check("load the pair and every drafter", load)
    if "pair" in loaded:
        pair = loaded["pair"]
        check("greedy: speculative = plain, every drafter, fp32 target",
              lambda: greedy_equality(pair, budget))
        check("seed replay", lambda: seed_replay(pair, budget))
        check("batch of 4 against rows alone", lambda: batch_against_rows(pair, budget))
        check("idle-machine curve (passes over n tokens)", lambda: idle_curve(pair))
    if budget.bf16:
        check("greedy with SPECDEC_DTYPE=bfloat16 (may differ)", lambda: bf16_equality(budget))
    with tempfile.TemporaryDirectory() as folder:
        check("bench on code and prose", lambda: bench_two_sets(budget, Path(folder)))
        if args.cpu:  # the suite trains both on the CPU already, end to end: a minute saved in every CI run
            check("train-draft and train-head on tiny budgets", lambda: (
                None, "skipped on the CPU: tests/models/test_draft_training.py and test_feature_head.py "
                      "train both end to end"))
        else:
            check("train-draft and train-head on tiny budgets", lambda: training(Path(folder)))
    check("tests marked cuda", cuda_tests)

    failed = [c.name for c in checks if c.ok is False]
    report = [f"# gpu_check ({'--cpu, reduced' if args.cpu else 'full'})", "",
              f"- date: {time.strftime('%Y-%m-%d')}", f"- device: {device}",
              f"- command: `python scripts/gpu_check.py{' --cpu' if args.cpu else ''}`", "",
              "| check | result | seconds | detail |", "| --- | --- | --- | --- |"]
    report += [f"| {c.name} | {({True: 'ok', False: 'FAILED', None: '—'})[c.ok]} | {c.seconds:.0f} | "
               f"{c.detail.replace('|', '/')} |" for c in checks]
    report += ["", f"{len(failed)} failed" + (f": {', '.join(failed)}" if failed else "")]
    text = "\n".join(report) + "\n"
    print("\n" + text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
