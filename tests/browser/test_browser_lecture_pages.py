"""The lecture's other pages on a projector, in a real browser (the tiny pair, presenter mode at
1920×1080): no wait behind a bare spinner, the lines a class needs shown large, the words that keep a
page from contradicting itself, and code shown that is the code run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, browser_page, streamlit_server, wait_idle

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.alone,  # times how long a spinner stands bare: the machine to itself
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
MAIN = '[data-testid="stMain"]'
# A wait the class sees: a spinner with nothing beside it that moves (no progress bar, no partial result).
BARE_SPINNER = f"""() => {{
    const main = document.querySelector('{MAIN}');
    return !!main.querySelector('[data-testid="stSpinner"]')
        && !main.querySelector('[data-testid="stProgress"]');
}}"""
LONGEST_BARE_WAIT_S = 3.0


def longest_bare_spinner(page, button: str, done: str, timeout: float = 180.0) -> float:
    """Click `button`, then watch until `done` is on the page: the longest stretch, in seconds, during
    which a spinner showed with no progress beside it."""
    page.get_by_role("button", name=button, exact=True).first.click()
    start = time.monotonic()
    longest, since = 0.0, None
    while time.monotonic() - start < timeout:
        bare = page.evaluate(BARE_SPINNER)
        now = time.monotonic()
        if bare:
            since = now if since is None else since
            longest = max(longest, now - since)
        else:
            since = None
        if not bare and page.get_by_text(done).count():
            return longest
        time.sleep(0.1)
    raise AssertionError(f"{done!r} never appeared after {button!r}")


def test_the_watch_sees_a_bare_spinner():
    """Negative control: the page script's check fires on a spinner drawn alone and not beside a bar."""
    with browser_page(height=600) as page:
        page.set_content('<div data-testid="stMain"><div data-testid="stSpinner">…</div></div>')
        assert page.evaluate(BARE_SPINNER)
        page.set_content('<div data-testid="stMain"><div data-testid="stSpinner"></div>'
                         '<div data-testid="stProgress"></div></div>')
        assert not page.evaluate(BARE_SPINNER)


def test_lecture_pages_show_progress_their_lines_and_the_code_they_run(tiny_pair_dirs):
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    waits = {}
    with streamlit_server(env) as base, browser_page(1080) as page:
        page.set_viewport_size({"width": 1920, "height": 1080})

        def open_page(path: str, query: str = "presenter=1") -> None:
            page.goto(f"{base}/{path}?{query}")
            page.locator(MAIN).get_by_role("heading").first.wait_for(timeout=180_000)
            wait_idle(page)

        # Live speed-up at T = 1 (the default): two sampled texts, and the page says why they differ.
        open_page("speedup")
        waits["speedup"] = longest_bare_spinner(page, "Run the race", "Why two different texts?")
        assert page.get_by_text("each run draws its own random numbers").count() == 1
        # At T = 0 the texts are the same tokens: no such note.
        open_page("speedup", "presenter=1&temperature=0")
        page.get_by_role("button", name="Run the race", exact=True).first.click()
        page.get_by_text("tokens/s · done").first.wait_for(timeout=120_000)
        wait_idle(page)
        assert page.get_by_text("Why two different texts?").count() == 0

        # The guarantee: the exact law drawn beside the samples, with their error bars.
        open_page("guarantee")
        waits["guarantee"] = longest_bare_spinner(page, "Sample both ways", "TV distance")
        legend = " ".join(page.locator(f"{MAIN} .legendtext").all_text_contents())
        assert "exact: the target's p" in legend and "± 95 %" in legend, legend
        waits["guarantee greedy"] = longest_bare_spinner(page, "Compare greedy outputs", "Speculative")
        page.screenshot(path=ARTIFACTS / "lecture-guarantee-presenter.png", full_page=True)

        # The idle machine: a measured round shows its progress, not a spinner alone.
        open_page("idle-machine")
        waits["idle machine"] = longest_bare_spinner(page, "Measure a round", "draft")

        # In your stack: the snippet is the run's own options (T = 1 samples; T = 0 does not).
        open_page("stack")
        code = " ".join(page.locator(f"{MAIN} code").all_inner_texts())
        assert "do_sample=True" in code and "do_sample=False" not in code, code[:400]
        waits["stack"] = longest_bare_spinner(page, "Run it on this prompt", "tok/s")
        open_page("stack", "presenter=1&temperature=0")
        code = " ".join(page.locator(f"{MAIN} code").all_inner_texts())
        assert "do_sample=False" in code, code[:400]

        # Code vs prose in presenter mode: the inputs fold away, the run's line stays on screen.
        open_page("code-vs-prose")
        line = page.get_by_text("categories · drafter")
        assert line.count() == 1 and line.first.is_visible()
        assert not page.get_by_label("Prompts per category").is_visible()  # folded
        page.get_by_text("Prompt sets and run size", exact=True).click()
        wait_idle(page)
        assert page.get_by_label("Prompts per category").is_visible()
    assert all(seconds <= LONGEST_BARE_WAIT_S for seconds in waits.values()), waits
