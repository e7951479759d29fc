"""scripts/gpu_check.py --cpu: the CUDA path's checks, reduced, on the CPU (the smoke test CI runs)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # loads the bundled pair, every drafter, and trains for two steps


def test_gpu_check_runs_every_check_on_the_cpu_and_reports_them(tmp_path):
    report = tmp_path / "gpu-check.md"
    done = subprocess.run([sys.executable, "scripts/gpu_check.py", "--cpu", "--output", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = report.read_text()
    for check in ("load the pair and every drafter", "greedy: speculative = plain", "seed replay",
                  "batch of 4 against rows alone", "idle-machine curve", "bench on code and prose",
                  "train-draft and train-head", "tests marked cuda"):
        assert f"| {check}" in text, check
    # The reduced run: one code and one prose prompt per drafter, five drafters.
    assert text.count("2 of 2 identical") == 5 and text.rstrip().endswith("0 failed")


def test_gpu_check_without_a_gpu_asks_for_cpu_mode():
    done = subprocess.run([sys.executable, "scripts/gpu_check.py"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert done.returncode == 2 and "run with --cpu" in done.stderr
