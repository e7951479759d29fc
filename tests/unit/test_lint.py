"""The code passes `ruff check` with the repository's ruff.toml (imports sorted, lines within 110,
no unused or undefined names): the lint the project uses instead of a formatter."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed (requirements-test.txt installs it)")
def test_ruff_check_passes():
    found = subprocess.run([RUFF, "check", "--no-cache", "--output-format", "concise", str(ROOT)],
                           capture_output=True, text=True, cwd=ROOT)
    assert found.returncode == 0, found.stdout[-3000:] + found.stderr[-1000:]


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_the_check_catches_an_unused_import(tmp_path):
    """Negative control: the same command fails on a file with an unused import."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    found = subprocess.run([RUFF, "check", "--no-cache", "--config", str(ROOT / "ruff.toml"), str(bad)],
                           capture_output=True, text=True)
    assert found.returncode == 1 and "F401" in found.stdout
