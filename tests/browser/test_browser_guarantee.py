"""The guarantee's quick default in a real browser with the bundled pair, at 1280x720 and 1920x1080: the
chart drawn while the samples arrive, the time from the click to the first chart and to the answer
(with the machine's load average, to test-artifacts/quick-runs.json), and the page's verdict read
against its own numbers. Then the full run (80 samples here) is one click more, with its estimate
before it starts.

    .venv/bin/python -m pytest tests/browser/test_browser_guarantee.py -x -q     (about 2 minutes on 2 cores)
"""

from __future__ import annotations

import re

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    MAIN,
    SIZES,
    browser_page,
    metric,
    record,
    streamlit_server,
    timed_answer,
    wait_idle,
)

from specdec.measure.guarantee import QUICK_SAMPLES
from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not CHROMIUM or not __import__("os").path.exists(CHROMIUM), reason="no Chromium"),
]


def check_verdict(page) -> str:
    """The page's two sentences against the numbers they carry and the metrics beside them."""
    text = page.locator(MAIN).inner_text()
    same = re.search(r"lands (inside|outside) the noise band[^:]*: TV ([\d.]+) ([≤>]) ([\d.]+)", text)
    assert same, text[-1500:]
    tv, band = float(same[2]), float(same[4])
    assert (same[1] == "inside") == (tv <= band) == (same[3] == "≤")
    assert float(metric(page, "TV distance")) == pytest.approx(tv, abs=0.0006)
    caught = re.search(r"is caught: TV ([\d.]+) from the target, outside its band ([\d.]+)", text)
    unresolved = re.search(r"differs from the target by TV ([\d.]+) at the first token, "
                           r"less than the ([\d.]+)", text)
    missed = re.search(r"was not caught this time: TV ([\d.]+), inside its band ([\d.]+)", text)
    assert caught or unresolved or missed, text[-1500:]
    if caught:
        assert float(caught[1]) > float(caught[2])
    if unresolved:
        assert float(unresolved[1]) < float(unresolved[2])
    if missed:
        assert float(missed[1]) <= float(missed[2])
    return same[0] + " / " + (caught or unresolved or missed)[0]


def test_the_guarantee_answers_quickly_and_says_what_its_numbers_show():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_CHAT": "1", "OMP_NUM_THREADS": "1"}
    figures: dict[str, object] = {}
    with streamlit_server(env, timeout=180) as base, browser_page(height=720) as page:
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{base}/guarantee")
            page.get_by_role("button", name="Sample both ways").wait_for(timeout=300_000)  # models load first
            wait_idle(page)
            run = timed_answer(page, "Sample both ways", "TV distance")
            assert run["click_to_first_chart_s"] < run["click_to_answer_s"]  # drawn as the samples arrive
            titles = [t.replace(" ", "") for t in page.locator(f"{MAIN} .gtitle").all_text_contents()]
            wanted = f"First 1 token(s): {QUICK_SAMPLES} speculative vs {QUICK_SAMPLES} target only"
            assert wanted.replace(" ", "") in titles, titles  # the final chart (its two lines joined)
            run["verdict"] = check_verdict(page)
            figures[size] = run
            page.locator(".js-plotly-plot").last.scroll_into_view_if_needed()  # the samples' chart
            page.screenshot(path=ARTIFACTS / f"guarantee-quick-{size}.png")
            page.screenshot(path=ARTIFACTS / f"guarantee-quick-{size}-page.png", full_page=True)
        # The full run: one click more, and the page says how long it should take, as measured here.
        caption = page.get_by_text("is the quick run").first.inner_text()
        assert "at the pace measured on this server" in caption
        box = page.get_by_label("Samples of each kind (full run)", exact=True)
        box.fill("80")  # a short full run: its estimate against its time
        box.press("Enter")
        wait_idle(page)
        figures["estimate_before_full"] = page.get_by_text("is the quick run").first.inner_text()
        full = timed_answer(page, "Full run (80 each)", "two samples of 80 from one")
        figures["full"] = full | {"verdict": check_verdict(page)}
        page.screenshot(path=ARTIFACTS / "guarantee-full-1920x1080.png", full_page=True)
        figures["estimate_after_full"] = page.get_by_text("is the quick run").first.inner_text()
    record("guarantee", figures)
