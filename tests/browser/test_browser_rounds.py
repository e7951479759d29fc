"""The real app in a real browser: start `streamlit run app.py`, drive it with Playwright + Chromium.

As a test it uses the tiny pair. As a script it also takes screenshots of every stage of a round
(under test-artifacts/; PYTHONPATH names the folders pytest.ini puts on the path):
    PYTHONPATH=.:scripts:tests/support .venv/bin/python tests/browser/test_browser_rounds.py \
        [--bundled [--tree]]
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    STAGES,
    browser_page,
    interesting_rounds,
    metric,
    open_rounds,
    screenshot_stages,
    set_animation,
    show_stage,
    step,
    streamlit_server,
    wait_idle,
)

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]


# Click Step, then for a second sample every 10 ms: elements marked stale, and elements fading.
STEP_AND_WATCH_FADES = """() => new Promise(resolve => {
    const step = [...document.querySelectorAll('button')].find(b => b.innerText.includes('Step'));
    const seen = {stale: 0, fading: 0};
    const start = performance.now();
    const sample = () => {
        seen.stale += document.querySelectorAll('[data-stale="true"]').length;
        seen.fading += document.getAnimations().filter(a => a.transitionProperty === 'opacity'
            && a.effect.target.dataset.testid === 'stElementContainer').length;
        if (performance.now() - start < 1000) setTimeout(sample, 10); else resolve(seen);
    };
    step.click();
    sample();
})"""


WATCH_STAGES = """() => {
    window.stagesSeen = new Set();
    window.stageWatch = setInterval(() => document.querySelectorAll('[role="radio"][aria-checked="true"]')
        .forEach(radio => window.stagesSeen.add(radio.innerText.trim())), 10);
}"""


def click_timeline_column(page, chart, number: int, columns: int) -> None:
    """Click round `number`'s column of the Altair timeline (the plot spans the chart's width; the
    legend sits above it, the round numbers below)."""
    box = chart.bounding_box()
    x = box["x"] + 2 + (box["width"] - 4) * (number - 0.5) / columns
    page.mouse.click(x, box["y"] + box["height"] * 0.55)


def test_step_play_and_charts_in_a_real_browser(tiny_pair_dirs):
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    started = time.monotonic()
    with streamlit_server(env) as base, browser_page() as page:
        open_rounds(page, base, {"prompt": "def add(a, b):\n    return a + b\n", "gamma": "3", "seed": "1"})
        assert metric(page, "Rounds") == "0"
        saved = screenshot_stages(page, "tiny")
        assert metric(page, "Rounds") == "1"
        assert page.locator(".sd-tok").count() > 0
        show_stage(page, "3 · Accept?")
        assert page.locator('[data-testid="stPlotlyChart"] .main-svg').count() > 0
        # While a Step runs, the round view's elements are stale but do not fade: on a busy server
        # a fade would repaint every waiting browser frame by frame.
        seen = page.evaluate(STEP_AND_WATCH_FADES)
        wait_idle(page)
        assert seen["stale"] > 0 and seen["fading"] == 0, seen
        # Play: rounds go by on their own; Pause stops them.
        page.get_by_role("button", name=re.compile("Play")).click()
        deadline = time.monotonic() + 60
        while int(metric(page, "Rounds")) < 3 and time.monotonic() < deadline:
            page.wait_for_timeout(300)
        page.get_by_role("button", name=re.compile("Pause")).click()
        wait_idle(page)
        page.screenshot(path=ARTIFACTS / "tiny-after-play.png", full_page=True)
        computed = int(metric(page, "Rounds"))
        assert computed >= 3
        # The timeline: one column per round; a click on the first column shows round 1.
        chart = page.locator('[data-testid="stVegaLiteChart"]').first
        chart.wait_for()
        page.wait_for_timeout(500)  # Vega draws after the element appears
        click_timeline_column(page, chart, 1, computed)
        page.get_by_text(f"Round 1 of {computed} computed").wait_for(timeout=20_000)
        wait_idle(page)
        assert metric(page, "Rounds") == "1"
        # Animated stages: a Step starts at stage 1 and the stages advance on their own to 5.
        # From a fresh run (Reset). A stage shows for a quarter of a second at the default pace: the
        # browser itself notes each stage it draws, every 10 ms, so a slow poll from here misses none.
        page.get_by_role("button", name=re.compile("Reset")).click()
        wait_idle(page)
        set_animation(page, True)
        page.evaluate(WATCH_STAGES)
        page.get_by_role("button", name=re.compile("Step")).click()
        page.get_by_role("radio", name="5 · Output", checked=True).wait_for(timeout=30_000)
        shown = page.evaluate("() => { clearInterval(window.stageWatch); return [...window.stagesSeen]; }")
        assert {"1 · Draft", "2 · Verify", "3 · Accept?", "4 · Correct"} <= set(shown), shown
        # The URL carries the settings: it opens the same demo.
        assert "gamma=3" in page.url and "seed=1" in page.url
        # A bad prompt shows a message, and the page keeps working.
        page.get_by_role("textbox", name=re.compile("Prompt")).fill("   ")
        page.keyboard.press("Control+Enter")
        page.get_by_text("the prompt is empty").wait_for()
    assert all(path.exists() for path in saved)
    assert time.monotonic() - started < 240


def test_feature_head_round_shows_what_it_read():
    """The bundled target with its shipped feature head, picked by link: stage 1 says what the head read
    and draws the target's hidden state."""
    from specdec.paths import BUNDLED_HEAD

    ARTIFACTS.mkdir(exist_ok=True)
    params = {"prompt": "Write a Python function that returns the n largest numbers of a list.",
              "drafter": BUNDLED_HEAD, "temperature": "0", "seed": "0"}
    with streamlit_server({}) as base, browser_page(height=1600) as page:
        open_rounds(page, base, params)
        set_animation(page, False)
        step(page)
        step(page)
        show_stage(page, STAGES[0])
        page.get_by_text("What the feature head read.").wait_for()
        wait_idle(page)
        page.screenshot(path=ARTIFACTS / "bundled-head-stage1.png", full_page=True)
        assert "hidden state at token" in page.inner_text("body")
        assert page.locator(".js-plotly-plot .heatmaplayer").count() == 1
        assert "feature head" in page.get_by_test_id("stSidebar").inner_text()


if __name__ == "__main__":  # screenshots for people to look at
    ARTIFACTS.mkdir(exist_ok=True)
    bundled = "--bundled" in sys.argv
    if bundled:
        from specdec.models.pair import LOOKUP_FIRST
        from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET

        target, drafter, chat = BUNDLED_TARGET, LOOKUP_FIRST + BUNDLED_DRAFT, True  # the default
        params = {"prompt": "Write a Python function that checks whether a string is a palindrome.",
                  "gamma": "4", "seed": "0", "temperature": "0.7", "drafter": drafter}
        if "--tree" in sys.argv:  # greedy, with a tree of drafts grown to fit each round
            params |= {"temperature": "0.0", "tree": "auto"}
    else:
        from tiny_models import save_tiny_model

        folder = ARTIFACTS / "tiny-models"
        target = str(save_tiny_model(folder / "target", 300, seed=0))
        drafter, chat = str(save_tiny_model(folder / "draft", 300, seed=1)), False
        params = {"prompt": "def add(a, b):\n    return a + b\n", "gamma": "3", "seed": "1"}
    env = {"SPECDEC_TARGET": target, "SPECDEC_DRAFTER": drafter, "SPECDEC_CHAT": "1" if chat else "0"}
    wanted = interesting_rounds(target, drafter, params, chat)
    print("rounds worth a picture:", wanted)
    prefix = ("bundled" if bundled else "tiny") + ("-tree" if "tree" in params else "")
    with streamlit_server(env, timeout=180) as base, browser_page(height=1800) as page:
        open_rounds(page, base, params)
        done = 0
        for kind in ("partial", "bonus", "adaptive-stop", "second-choice"):
            if kind not in wanted and kind == "partial" and "rejection" in wanted:
                kind = "rejection"
            if kind not in wanted:
                continue
            if wanted[kind] < done:
                page.get_by_role("button", name=re.compile("Reset")).click()
                wait_idle(page)
                done = 0
            for path in screenshot_stages(page, f"{prefix}-{kind}", rounds=wanted[kind] + 1 - done):
                print(path)
            done = wanted[kind] + 1


def test_stop_during_a_race_keeps_what_was_measured():
    """Stop reruns the page; the race saved itself after every pass, so its numbers stay on screen.
    The bundled target (with n-gram drafting) is slow enough to be stopped half-way."""
    ARTIFACTS.mkdir(exist_ok=True)
    params = {"prompt": "Write a short poem about the sea.", "gamma": "4", "max_new_tokens": "128",
              "seed": "0"}
    with streamlit_server({"SPECDEC_DRAFTER": "ngram"}) as base, browser_page() as page:
        page.goto(f"{base}/speedup?{urlencode(params)}")
        page.get_by_role("button", name="Run the race").click()
        page.get_by_text(re.compile(r"Speculative · [1-9]\d* tokens")).wait_for()
        page.wait_for_timeout(1500)
        page.locator(".st-key-b_stop button").first.click()  # the race's Stop (the tree race has its own)
        page.get_by_text("Stopped: the numbers below cover the tokens produced so far.").wait_for()
        wait_idle(page)
        page.screenshot(path=ARTIFACTS / "race-stopped.png", full_page=True)
        assert metric(page, "Measured speed-up").endswith("x")
        produced = int(re.search(r"Target only · (\d+) tokens", page.inner_text("body")).group(1))
        assert 0 < produced < 128
