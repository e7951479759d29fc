"""Which drafter should be the bundled target's default: the rule, applied to bench reports.

    .venv/bin/python scripts/choose_default.py REPORT.json [REPORT.json ...]

Each report is `python -m specdec bench --json --output REPORT.json` from one machine (or one kernel
cap). Of the speculative rows never slower than the target alone on any set of any report, whose
drafter also serves batched decoding (a feature head does not), the rule
(specdec.cli.bench_report.measured_best) picks the fastest on code, by its lower code ratio over the reports;
the current default (the reports' `default_method`) stays unless that lead is more than KEEP_WITHIN.
Prints each row's code ratio per report, its worst ratio anywhere, and the choice.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdec.cli.bench_report import measured_best, row_name  # noqa: E402

# One drafter's code ratio moves between reports of one machine on one day (the default's, 2026-12-02:
# 1.53x to 1.62x over six, standard deviation 0.037x): a smaller lead is noise, not a reason to change.
KEEP_WITHIN = 0.04


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json",
                        help="bench --json --output REPORT.json, one per machine or kernel cap")
    paths = parser.parse_args().reports
    try:
        reports = [json.loads(path.read_text()) for path in paths]
    except (OSError, ValueError) as error:
        sys.exit(f"choose_default: cannot read a bench report: {error}")
    chosen, rows = measured_best(reports, keep_within=KEEP_WITHIN)
    width = max(map(len, rows))
    machines = " ".join(f"{'code, ' + path.stem:>18}" for path in paths)
    print(f"{'method':<{width}} {machines} {'worst anywhere':>15}")
    default = row_name(reports[0], reports[0].get("default_method"))
    for label, figures in rows.items():  # a row's name: its drafter and draft length
        codes = " ".join(f"{ratio:>17.2f}x" if ratio is not None else f"{'-':>18}"
                         for ratio in figures["code"])
        mark = "  <- chosen" if label == chosen else ""
        mark += "  (the default)" if label == default else ""
        mark += "" if figures["batched"] else "  (no batched form: not a candidate)"
        print(f"{label:<{width}} {codes} {figures['worst']:>14.2f}x{mark}")
    if chosen is None:
        print("no drafter is at least as fast as the target alone on every set")


if __name__ == "__main__":
    main()
