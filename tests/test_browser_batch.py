"""The page "A class is a batch" in a real browser with the bundled pair and the default drafter: its
default run (wall time and the figures go to test-artifacts/), the charts drawn, and Stop.

    .venv/bin/python -m pytest tests/test_browser_batch.py -x -q     (about 2 minutes on 2 cores)
"""

from __future__ import annotations

import json
import time

import pytest
from test_browser import ARTIFACTS, CHROMIUM, browser_page, streamlit_server, wait_idle
from test_browser_instructor import click_and_wait, shot

from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not CHROMIUM or not __import__("os").path.exists(CHROMIUM), reason="no Chromium"),
]

NUMBERS = ARTIFACTS / "batch-class-numbers.json"
MAIN = '[data-testid="stMainBlockContainer"]'


def test_class_is_a_batch_page():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_CHAT": "1", "OMP_NUM_THREADS": "1"}
    numbers: dict[str, object] = {}
    with streamlit_server(env, timeout=180) as base, browser_page(height=2400) as page:
        page.goto(f"{base}/class-is-a-batch")  # the sidebar's defaults
        page.locator(f"{MAIN} h1").first.wait_for()
        wait_idle(page)
        assert "Thirty students on this server are a batch" in page.locator(MAIN).inner_text()
        # 1. The default run: four code prompts, 32 new tokens per row, B = 1 to 16, then the cost curve.
        started = time.monotonic()
        click_and_wait(page, "Decode the class", "In practice.", timeout=400_000)
        numbers["default_run_seconds"] = round(time.monotonic() - started, 1)
        text = page.locator(MAIN).inner_text()
        assert "Stopped" not in text
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 3  # throughput, cost curve, ratio
        assert page.locator(".js-plotly-plot").count() == 3  # each drawn (wait_idle waits for that)
        numbers["summary"] = [line for line in text.splitlines() if "speculation runs at" in line]
        assert "memory-bound" in text and "thirty students are a batch" in text
        shot(page, "batch-class")
        NUMBERS.write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")

        # 2. Stop during a second run: the page keeps what it measured and says it is partial.
        page.locator(MAIN).get_by_role("button", name="Decode the class", exact=True).click()
        page.get_by_text("B=1:").first.wait_for(timeout=120_000)  # the progress line after B = 1
        page.locator(MAIN).get_by_role("button", name="Stop", exact=True).click()
        page.get_by_text("Stopped: the figures below are partial.").wait_for(timeout=120_000)
        wait_idle(page)
        shot(page, "batch-class-stopped")
