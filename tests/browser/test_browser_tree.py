"""A token tree on a projector, in a real browser (the bundled pair): Round by round in presenter mode at
1920×1080 with a tree of 8 drafted tokens at temperature 1, stepped with → as a clicker sends it. Each
stage of the tree's round is on screen, no text under 20 px, no verdict before the Accept stage; the
sibling test steps through its beats; each press is timed (the median goes to test-artifacts).

Run alone: .venv/bin/python -m pytest -q tests/browser/test_browser_tree.py -s
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, browser_page, small_texts, streamlit_server, wait_idle

from specdec.paths import BUNDLED_DRAFT

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.alone,  # times one press of Step: the machine to itself
    pytest.mark.slow,  # a real server, the bundled pair and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
PROMPT = "Write a short story about a robot who learns to paint."
STEP_LIMIT_S = 0.35  # one press of Step, median, with a tree drawn
# Done when the round and stage asked for are on screen, the script has finished and every chart drew.
SHOWN = """([round, stage]) => {
    const heading = [...document.querySelectorAll('h3')]
        .find(h => h.innerText.startsWith(`Round ${round} of`));
    const checked = document.querySelector('[role="radio"][aria-checked="true"]');
    return heading && checked && checked.innerText.trim().startsWith(String(stage))
        && !document.querySelector('[data-testid="stStatusWidget"]')
        && !document.querySelector('[data-stale="true"]')
        && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
            .every(c => c.querySelector('.main-svg'));
}"""
LEGEND = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .legendtext')]
    .map(t => t.textContent)"""


def press_step(page, round_number: int, stage: int) -> float:
    """→ once; the seconds until that round's stage is drawn."""
    started = time.monotonic()
    page.keyboard.press("ArrowRight")
    try:
        page.wait_for_function(SHOWN, arg=[round_number, stage], timeout=120_000, polling=20)
    except Exception:
        page.screenshot(path=ARTIFACTS / f"tree-failed-round{round_number}-stage{stage}.png")
        raise
    return time.monotonic() - started


def test_a_tree_round_on_a_projector(tmp_path):
    env = {"SPECDEC_DRAFTER": BUNDLED_DRAFT}  # a draft model drafts trees (a lookup copies one branch)
    ARTIFACTS.mkdir(exist_ok=True)
    presses, small, shots = [], {}, []
    with streamlit_server(env, timeout=300) as base, browser_page(1080) as page:
        page.set_viewport_size({"width": 1920, "height": 1080})
        page.set_default_timeout(300_000)
        page.goto(f"{base}/rounds?presenter=1&tree=8&temperature=1.0&seed=3&prompt={PROMPT}")
        page.locator(".st-key-b_step button").first.wait_for()
        wait_idle(page)
        for round_number in (1, 2, 3, 4):
            for stage in (1, 2, 3, 4, 5):
                presses.append((round_number, stage, press_step(page, round_number, stage)))
                if round_number == 2 and stage <= 3:
                    wait_idle(page)
                    legend = page.evaluate(LEGEND)
                    if stage < 3:  # drafted and scored, not yet judged
                        assert "drafted" in legend, legend
                        assert "kept" not in legend and "rejected" not in legend, legend
                    else:
                        assert "rejected" in legend or "kept" in legend, legend
                    if found := small_texts(page):
                        small[f"stage {stage}"] = found
                    path = ARTIFACTS / f"tree-1920x1080-stage{stage}.png"
                    page.screenshot(path=path)
                    shots.append(path)
                    assert page.evaluate("window.scrollY") == 0
                if round_number == 2 and stage == 3:  # the sibling test, beat by beat
                    beats = page.locator('[class*="st-key-_tbeat_"]')  # not the sidebar's γ slider
                    slider = beats.get_by_role("slider").first
                    slider.focus()
                    for beat in (1, 2):
                        page.keyboard.press("ArrowRight")
                        wait_idle(page)
                        path = ARTIFACTS / f"tree-1920x1080-stage3-beat{beat + 1}.png"
                        page.screenshot(path=path)
                        shots.append(path)
                    page.evaluate("document.activeElement.blur()")  # → steps the round again
    computed = [seconds for _, stage, seconds in presses if stage == 1]  # a new round: drafted and verified
    figures = {"median_press_s": statistics.median(s for *_, s in presses),
               "median_new_round_s": statistics.median(computed), "presses": presses}
    (ARTIFACTS / "tree-steps.json").write_text(json.dumps(figures, indent=1))
    print({k: v for k, v in figures.items() if k != "presses"})
    assert not small, small
    assert figures["median_press_s"] <= STEP_LIMIT_S, figures
