"""'In your stack' with the bundled pair in a real browser: the live transformers run, the engines' lines
and the quiz. As a script it prints how long the run took:
    PYTHONPATH=.:scripts:tests/support python tests/browser/test_browser_stack.py
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, browser_page, streamlit_server, wait_idle

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
PROMPT = "Write a Python function that checks whether a number is prime."


def run_stack_page() -> float:
    """Open the page, run the pair through transformers and specdec, answer the quiz; -> run seconds."""
    ARTIFACTS.mkdir(exist_ok=True)
    with streamlit_server({}) as base, browser_page(height=2400) as page:
        page.goto(f"{base}/stack?{urlencode({'prompt': PROMPT, 'temperature': '0'})}")
        run = page.get_by_role("button", name="Run it on this prompt")
        run.wait_for(timeout=180_000)
        wait_idle(page)
        started = time.monotonic()
        run.click()
        page.get_by_text("transformers, assisted").wait_for(timeout=180_000)
        seconds = time.monotonic() - started
        wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.get_by_text("the same tokens as the target decoding alone").count() == 1
        lines = page.locator('[data-testid="stCode"]').all_inner_texts()
        assert any("SpecDecoding metrics: Mean acceptance length" in text for text in lines)
        assert any(re.search(r"draft acceptance rate = 0\.\d{5}", text) for text in lines)
        quiz = page.locator('[data-testid="stRadio"]').first
        quiz.locator('[role="radiogroup"] label').nth(1).click()  # α: the second option is right
        page.get_by_text(re.compile(r"Right\. α = accepted / tested")).wait_for()
        page.screenshot(path=ARTIFACTS / "stack.png", full_page=True)
    return seconds


def test_stack_page_runs_the_pair_in_transformers_in_a_real_browser():
    print(f"run: {run_stack_page():.1f} s")


if __name__ == "__main__":
    print(f"click -> transformers and specdec figures shown: {run_stack_page():.1f} s")
