"""A cold server as the first visitor meets it, in real Chromium: seconds from `./start.sh` (the
README's command, which warms the server as it starts) to the page menu, to a usable Step on the round
view, and to the first round shown after clicking it.

    .venv/bin/python scripts/cold_start.py --repeat 2

Each run starts a fresh server (the same caches: a converted model and the machine's kept timings are
used if there), opens the round view `--visit-after` seconds after the server answers its health check
(a student arriving), and prints one line of seconds per run, with the machine's load average before.
No goal is asserted here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_app import CHROMIUM, CHROMIUM_ARGS, app_server  # noqa: E402 - this folder's helper

STEP_BUTTON = ".st-key-b_step button"  # drawn twice with a shortcut (one copy hidden): take .first
MENU = '[data-testid="stSidebarNav"] a'


def one_cold_start(log: Path, visit_after: float) -> dict:
    from playwright.sync_api import sync_playwright

    load = os.getloadavg()[0]
    started = time.monotonic()
    with app_server(log, start_script=True) as app, sync_playwright() as playwright:
        answered = time.monotonic() - started
        time.sleep(visit_after)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        visited = time.monotonic() - started
        page.goto(f"{app.url}/rounds?animate=false")
        page.locator(MENU).first.wait_for(timeout=300_000)
        menu = time.monotonic() - started
        step = page.locator(STEP_BUTTON).first
        step.wait_for(timeout=300_000)
        page.wait_for_function(f"() => !document.querySelector('{STEP_BUTTON}').disabled", timeout=300_000)
        usable = time.monotonic() - started
        step.click()
        page.get_by_role("heading", name="Round 1 of").first.wait_for(timeout=300_000)
        shown = time.monotonic() - started
        browser.close()
    return {"server_answers_s": round(answered, 1), "menu_s": round(menu, 1),
            "menu_after_visit_s": round(menu - visited, 1), "step_usable_s": round(usable, 1),
            "first_round_shown_s": round(shown, 1), "load_average_before": round(load, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="fresh servers, one after the other")
    parser.add_argument("--visit-after", type=float, default=0.0,
                        help="seconds after the server answers before the first visit (default 0)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.repeat):
            figures = one_cold_start(Path(folder) / f"server-{run}.log", args.visit_after)
            print(" ".join(f"{name}={value}" for name, value in figures.items()), flush=True)


if __name__ == "__main__":
    main()
