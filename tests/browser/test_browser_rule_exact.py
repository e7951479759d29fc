"""The rule on trial's exact answers and a student's own rule, in a real browser with the bundled pair:
a link carrying `p > q`, the presets, a bad expression, and a trial whose lossy rule cannot be seen
at the prompt's next token, moved in one click to where it can. Screenshots at 1280x720 and 1920x1080
go to test-artifacts/.

    .venv/bin/python -m pytest tests/browser/test_browser_rule_exact.py -x -q     (a few minutes on 2 cores)
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, browser_page, set_number, streamlit_server, wait_idle

from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not CHROMIUM or not __import__("os").path.exists(CHROMIUM), reason="no Chromium"),
]

PROMPT = "Tell a bedtime story about a fox who is afraid of the dark."
SIZES = {"1280": (1280, 720), "1920": (1920, 1080)}


def no_traceback(page) -> None:
    assert not page.locator('[data-testid="stException"]').count()


def verdict(page) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has_text="verdict").first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def shots(page, name: str, anchor: str) -> None:
    """`anchor`'s part of the page in view at both sizes, and the whole page at the larger."""
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        page.get_by_text(anchor).first.scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / f"{name}-{size}.png")
    page.screenshot(path=ARTIFACTS / f"{name}-full.png", full_page=True)


def test_exact_answers_and_your_own_rule_in_the_browser():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_CHAT": "1", "OMP_NUM_THREADS": "1"}
    with streamlit_server(env, timeout=180) as base, browser_page(height=1080) as page:
        # 1. A link carries a student's rule: p > q with the residual is judged lossy at once.
        link = {"prompt": PROMPT, "accept": "p > q", "on_reject": "residual"}
        page.goto(f"{base}/rule-trial?{urlencode(link)}")
        page.get_by_text("2 · Your own rule").wait_for(timeout=300_000)  # the models load first
        wait_idle(page)
        no_traceback(page)
        assert page.get_by_label("Keep x with probability").input_value() == "p > q"
        assert verdict(page) == "lossy"
        assert page.get_by_text(re.compile(r"Lossy: p > q with the residual")).count() == 1
        shots(page, "rule-own-lossy", "2 · Your own rule")
        # 2. A preset, one click: speculative sampling is lossless.
        page.get_by_role("button", name="speculative sampling", exact=True).click()
        wait_idle(page)
        assert verdict(page) == "lossless" and page.get_by_label("Keep x with probability").input_value() \
            == "min(1, p/q)"
        # 3. A bad expression: one line, no traceback.
        box = page.get_by_label("Keep x with probability")
        box.fill("__import__('os')")
        box.press("Enter")
        wait_idle(page)
        no_traceback(page)
        said = page.locator('[data-testid="stAlertContentError"]').filter(has_text="rule expression")
        assert said.count() == 1 and "cannot be called" in said.first.inner_text()
        shots(page, "rule-own-error", "2 · Your own rule")

        # 4. The trial at the prompt's next token: each rule's exact TV beside the sampled one.
        page.set_viewport_size({"width": 1920, "height": 1080})
        set_number(page, "Samples of each kind", 60)
        page.get_by_role("button", name="Put the rules on trial").click()
        page.get_by_text(re.compile("Noise band")).first.wait_for(timeout=400_000)
        page.get_by_text(re.compile("What each rule emits at")).first.wait_for(timeout=200_000)
        wait_idle(page)
        no_traceback(page)
        assert page.get_by_role("columnheader", name="TV exact").count() == 1
        hidden = page.locator('[data-testid="stAlertContentWarning"]').filter(has_text="cannot be seen")
        assert hidden.filter(has_text="the top choice matches").count() == 1
        offer = page.get_by_role("button", name=re.compile("Put the rules on trial at token"))
        said = page.get_by_text(re.compile("cannot be seen with 60 samples"))
        offer.or_(said).first.wait_for(timeout=300_000)
        shots(page, "rule-trial-exact", "What each rule emits at")
        if offer.count():  # 5. One click: the trial moves there and runs.
            offer.click()
            page.get_by_text(re.compile(r"The trial runs at token \d+")).wait_for(timeout=60_000)
            page.get_by_text(re.compile("What each rule emits at token")).first.wait_for(timeout=400_000)
            wait_idle(page)
            no_traceback(page)
            shots(page, "rule-trial-moved", "What each rule emits at token")
        else:
            assert said.count() == 1
