"""The page "A class is a batch" in a real browser with the bundled pair and the default drafter: its
quick default at 1280x720 and 1920x1080 (the chart drawn per batch size, click to first chart and to
the answer with the load average, to test-artifacts/quick-runs.json; the words read against the
chart's numbers), the full run one click more (wall time and the figures to test-artifacts/), and Stop.

    .venv/bin/python -m pytest tests/browser/test_browser_batch.py -x -q     (about 4 minutes on 2 cores)
"""

from __future__ import annotations

import json
import re
import time

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    MAIN,
    SIZES,
    browser_page,
    click_and_wait,
    record,
    shot,
    streamlit_server,
    timed_answer,
    wait_idle,
)

from specdec.measure.batching import QUICK_RUN
from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not CHROMIUM or not __import__("os").path.exists(CHROMIUM), reason="no Chromium"),
]

NUMBERS = ARTIFACTS / "batch-class-numbers.json"


def test_the_quick_default_answers_and_says_what_its_numbers_show():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_CHAT": "1", "OMP_NUM_THREADS": "1"}
    quick = {}
    with streamlit_server(env, timeout=180) as base, browser_page(height=720) as page:
        # Two code prompts, 16 new tokens a row, the quick run's batch sizes; at both screen sizes.
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{base}/class-is-a-batch")  # the sidebar's defaults, a fresh session
            page.get_by_role("button", name="Decode the class").wait_for(timeout=300_000)
            wait_idle(page)
            quick[size] = timed_answer(page, "Decode the class", "In practice.")
            assert quick[size]["click_to_first_chart_s"] < quick[size]["click_to_answer_s"]  # drawn live
            quick[size]["claim"] = check_claim(page)
            page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
            page.screenshot(path=ARTIFACTS / f"batch-quick-{size}.png")
        quick["estimate_after"] = page.get_by_text("is the quick run").first.inner_text()
        assert "at the pace measured on this server" in quick["estimate_after"]
    record("batch", quick)


def test_class_is_a_batch_page():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_CHAT": "1", "OMP_NUM_THREADS": "1"}
    numbers: dict[str, object] = {}
    with streamlit_server(env, timeout=180) as base, browser_page(height=2400) as page:
        page.goto(f"{base}/class-is-a-batch")  # the sidebar's defaults
        page.locator(f"{MAIN} h1").first.wait_for()
        wait_idle(page)
        assert "Thirty students on this server are a batch" in page.locator(MAIN).inner_text()
        page.get_by_role("button", name="Full run").wait_for(timeout=300_000)
        # 1. The full run, one click more: four code prompts, 32 new tokens per row, B = 1 to 16, then the
        # cost curve.
        started = time.monotonic()
        click_and_wait(page, "Full run", "memory-bound", timeout=400_000)  # said from the cost curve
        numbers["full_run_seconds"] = round(time.monotonic() - started, 1)
        text = page.locator(MAIN).inner_text()
        assert "Stopped" not in text
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 3  # throughput, cost curve, ratio
        assert page.locator(".js-plotly-plot").count() == 3  # each drawn (wait_idle waits for that)
        numbers["summary"] = [line for line in text.splitlines() if "speculation runs at" in line]
        assert "memory-bound" in text and "thirty students are a batch" in text
        shot(page, "batch-class")
        NUMBERS.write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")

        # 2. Stop during a second run: the page keeps what it measured and says it is partial.
        page.locator(MAIN).get_by_role("button", name="Full run", exact=True).click()
        page.get_by_text("B=1:").first.wait_for(timeout=120_000)  # the progress line after B = 1
        page.locator(MAIN).get_by_role("button", name="Stop", exact=True).click()
        page.get_by_text("Stopped: the figures below are partial.").wait_for(timeout=120_000)
        wait_idle(page)
        shot(page, "batch-class-stopped")


def check_claim(page) -> str:
    """The page's sentence about the crossover against the throughput chart's own numbers."""
    data = page.evaluate("() => document.querySelector('.js-plotly-plot')"  # the quick run's one chart
                         ".data.map(t => [t.name, t.x, t.y])")
    lines = {name: dict(zip(x, y, strict=True)) for name, x, y in data}
    sizes = sorted(lines["speculative"])
    ratios = {b: lines["speculative"][b] / lines["target only"][b] for b in sizes}
    assert sizes == list(QUICK_RUN["sizes"])
    text = page.locator(MAIN).inner_text()
    said = re.search(r"at B = 1 speculation runs at ([\d.]+)×", text)
    assert said and float(said[1]) == pytest.approx(ratios[1], abs=0.006)
    first_below = next((b for b in sizes if ratios[b] < 1), None)
    if first_below is None:
        assert f"has not fallen below 1 up to B = {sizes[-1]} in this quick run" in text
        return f"ratios {ratios}: no crossover up to B = {sizes[-1]} (said so)"
    assert f"It first falls below 1 at B = {first_below} of the sizes measured" in text
    return f"ratios {ratios}: crossover at B = {first_below}"
