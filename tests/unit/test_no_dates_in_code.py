"""Code says why, not when: no calendar date (YYYY-MM-DD) in any comment, docstring or string of the
engine (specdec/), the pages (app_pages/) or app.py. Dated figures go to docs/LOG.md, which code cites
by entry title. A year alone is fine (a paper: "Li et al. 2024")."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATE = re.compile(r"\b(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")


def code_files() -> list[Path]:
    return sorted([*ROOT.glob("specdec/**/*.py"), *ROOT.glob("app_pages/**/*.py"), ROOT / "app.py"])


def dated_lines(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if DATE.search(line)]


def test_the_pattern_finds_dates_and_leaves_years():
    assert dated_lines("x = 1  # measured 2026-12-01\n'''on 1999-01-31'''") == [
        (1, "x = 1  # measured 2026-12-01"), (2, "'''on 1999-01-31'''")]
    assert dated_lines("# Leviathan et al. 2023; Li et al. 2024 (EAGLE)\nrange(2026 - 12)") == []
    assert dated_lines("version 2026-13-01, id 12026-12-01x") == []


def test_the_scan_covers_the_engine_and_the_pages():
    files = {path.relative_to(ROOT).as_posix() for path in code_files()}
    assert {"app.py", "specdec/core/acceptance.py", "app_pages/rounds.py"} <= files
    assert len(files) > 50


def test_no_dates_in_code():
    found = [f"{path.relative_to(ROOT)}:{n}: {line}"
             for path in code_files() for n, line in dated_lines(path.read_text(encoding="utf-8"))]
    assert not found, ("dates in code (move the dated figure to docs/LOG.md and cite its entry):\n"
                       + "\n".join(found))
