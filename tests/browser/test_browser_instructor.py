"""The instructor pages in a real browser with the bundled pair: open each, run its main action with
small sizes, save a screenshot, and write the numbers each page showed to test-artifacts/.

    .venv/bin/python -m pytest tests/browser/test_browser_instructor.py -x -q   (about 2-4 minutes on 2 cores)
"""

from __future__ import annotations

import json
import re
import time
from urllib.parse import urlencode

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    browser_page,
    click_and_wait,
    metric,
    set_number,
    shot,
    streamlit_server,
    wait_idle,
)

from specdec.paths import BUNDLED_TARGET

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # the bundled models in a real server and a real browser
    pytest.mark.skipif(not CHROMIUM or not __import__("os").path.exists(CHROMIUM), reason="no Chromium"),
]

SETTINGS = {"gamma": "4", "seed": "0", "temperature": "0.7", "max_new_tokens": "24", "chat": "1",
            "prompt": "Copy this list exactly, then add one more fruit at the end:\n"
                      "apple, banana, cherry, date, elderberry, fig, grape, honeydew"}
NUMBERS = ARTIFACTS / "instructor-numbers.json"


def open_page(page, base: str, path: str, **overrides) -> None:
    page.goto(f"{base}/{path}?{urlencode({**SETTINGS, **overrides})}")
    page.locator('[data-testid="stMainBlockContainer"] h1').first.wait_for()
    wait_idle(page)


def captions(page) -> list[str]:
    return [c.strip() for c in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()]


def test_instructor_pages_with_the_bundled_pair():
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_DRAFTER": "ngram", "SPECDEC_CHAT": "1",
           "OMP_NUM_THREADS": "1"}
    numbers: dict[str, dict] = {}
    started = time.monotonic()
    with streamlit_server(env, timeout=180) as base, browser_page(height=3000) as page:
        # 1. Live speed-up: the race, then the γ sweep.
        open_page(page, base, "speedup")
        click_and_wait(page, "Run the race", "Measured speed-up")
        numbers["speedup"] = {label: metric(page, label) for label in (
            "Measured speed-up", "Theory (paper)", "Theory (this machine)", "α (acceptance)",
            "Tokens per target pass")}
        numbers["speedup"]["caption"] = next(c for c in captions(page) if c.startswith("Measured here"))
        shot(page, "instructor-speedup-race")
        click_and_wait(page, "γ sweep (1…8)", "Best measured")
        numbers["speedup"]["sweep"] = next(c for c in captions(page) if c.startswith("Best measured"))
        shot(page, "instructor-speedup-sweep")

        # 2. Code vs prose: two prompts per category, 16 tokens each; then the quiz.
        open_page(page, base, "code-vs-prose")
        set_number(page, "Prompts per category", 2)
        set_number(page, "New tokens per prompt", 16)
        click_and_wait(page, "Run the prompt sets", "Save results (JSON)")
        page.get_by_text("Continuations of code are more predictable").click()
        page.get_by_text("Right.").first.wait_for()
        wait_idle(page)
        numbers["code_vs_prose"] = {
            "quiz": page.locator('[data-testid="stAlertContentSuccess"]').inner_text(),
            "code vs prose": [c for c in captions(page) if c.startswith("code vs prose")],
        }
        shot(page, "instructor-code-vs-prose")
        # Saved results reload from a file; a file of something else is a message, not a traceback.
        saved = ARTIFACTS / "prompt-sets-saved.json"
        rows = [{"category": c, "prompt": 1, "acceptance_rate": a, "tokens_per_pass": 1 + a, "speedup": x}
                for c, a, x in (("code", 0.8, 1.9), ("prose", 0.3, 1.1))]
        saved.write_text(json.dumps({"target": "t", "drafter": "d", "settings": {}, "rows": rows}))
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(saved))
        page.get_by_text("Showing reloaded results").wait_for()
        wait_idle(page)
        bad = ARTIFACTS / "not-results.json"
        bad.write_text('{"hello": 1}')
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(bad))
        page.get_by_text("that file is not saved results").wait_for()
        wait_idle(page)

        # 3. The guarantee: 120 samples of the first token each way, then greedy.
        open_page(page, base, "guarantee")
        set_number(page, "Samples of each kind (full run)", 120)
        click_and_wait(page, "Full run (120 each)", "TV distance")  # the quick run: test_browser_guarantee
        numbers["guarantee"] = {label: metric(page, label) for label in (
            "TV distance", "χ² p-value", "Drafts tested", "Drafts rejected")}
        click_and_wait(page, "Compare greedy outputs", re.compile("Identical|First difference"))
        numbers["guarantee"]["greedy"] = page.get_by_text(
            re.compile("Identical|First difference")
        ).first.inner_text()
        shot(page, "instructor-guarantee")

        # 4. The idle machine.
        open_page(page, base, "idle-machine")
        click_and_wait(page, "Time the forward pass", "one-token pass")
        numbers["idle_machine"] = {
            # the page's words (the chart's axis title says it too, as SVG text)
            "verdict": page.locator('[data-testid="stMarkdownContainer"]').filter(
                has_text="one-token pass").first.inner_text(),
            "costs": page.locator('[data-testid="stTable"]').filter(
                has_text="× one token").first.inner_text(),
        }
        # The table is the chart's data: its "× one token" column is the measured curve
        costs = page.locator('[data-testid="stTable"]').filter(has_text="× one token").first
        column = [name.strip() for name in costs.locator("thead th").all_inner_texts()].index("× one token")
        measured = [float(row.locator("th, td").nth(column).inner_text())
                    for row in costs.locator("tbody tr").all()]
        curve = page.evaluate("() => document.querySelector('.js-plotly-plot').data[0].y")
        assert measured == pytest.approx(curve, abs=0.006)
        shot(page, "instructor-idle-machine")

        # 5. Variants: n-gram lookup (and the trained draft if shipped) vs the target alone.
        open_page(page, base, "variants", max_new_tokens="40")
        click_and_wait(page, "Race the drafters", re.compile("tokens/s ·"))
        numbers["variants"] = {"drafters": [c for c in captions(page) if "tokens/s ·" in c]}
        shot(page, "instructor-variants")
    NUMBERS.write_text(json.dumps(numbers, indent=1, ensure_ascii=False))
    print(json.dumps(numbers, indent=1, ensure_ascii=False))
    assert float(numbers["speedup"]["Measured speed-up"].rstrip("x")) > 0
    assert 0 <= float(numbers["guarantee"]["TV distance"]) <= 1
    assert time.monotonic() - started < 900
