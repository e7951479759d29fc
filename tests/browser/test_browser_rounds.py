"""The real app in a real browser: start `streamlit run app.py`, drive it with Playwright + Chromium.

As a test it uses the tiny pair. As a script it also takes screenshots of every stage of a round:
    python tests/test_browser.py [--bundled [--second-choices]]     (screenshots under test-artifacts/)
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
# The browser and the server as the scripts start them (the other browser tests import them from here).
from local_app import CHROMIUM, CHROMIUM_ARGS, ERROR, MAIN, app_server, free_port, timed_click  # noqa: E402, F401

ARTIFACTS = ROOT / "test-artifacts"
STAGES = ["1 · Draft", "2 · Verify", "3 · Accept?", "4 · Correct", "5 · Output"]

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]


@contextlib.contextmanager
def streamlit_server(env: dict[str, str], timeout: float = 90.0, start_script: bool = False):
    """The app on a free localhost port, its log in test-artifacts/server.log; always stopped.

    `start_script`: through the README's ./start.sh, as a user starts it (set-up included)."""
    with app_server(ARTIFACTS / "server.log", env, timeout, start_script) as app:
        yield app.url


@contextlib.contextmanager
def browser_page(height: int = 1000):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_idle(page) -> None:
    """Until Streamlit says the script is no longer running, every Plotly chart has drawn (Plotly's
    script loads on first use and draws after the data arrives), and no element is still a grey
    skeleton (a first page draws its elements a moment after the script ends)."""
    page.wait_for_timeout(500)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')
                 && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                        .every(chart => chart.querySelector('.main-svg'))
                 && !document.querySelector('[data-testid="stSkeleton"], '
                        + '[data-testid="stSkeletonElement"], [data-testid="stAppSkeleton"]')""",
        timeout=60_000,
    )
    page.wait_for_timeout(300)


def open_rounds(page, base: str, params: dict[str, str]) -> None:
    page.goto(f"{base}/rounds?{urlencode(params)}")
    page.get_by_role("button", name=re.compile("Step")).wait_for()
    wait_idle(page)


def unfold_inputs(page) -> None:
    """Presenter mode folds the round view's prompt and playback settings into an expander: open it."""
    folded = page.get_by_text("Prompt and playback", exact=True)
    if folded.count() and not page.get_by_role("switch", name="Animate stages").is_visible():
        folded.click()
        wait_idle(page)


def set_animation(page, on: bool) -> None:
    unfold_inputs(page)
    toggle = page.get_by_role("switch", name="Animate stages")
    if toggle.is_checked() != on:
        page.get_by_text("Animate stages").click()
        wait_idle(page)


def step(page) -> None:
    """Click Step and wait until the counter shows one more round (a click during a rerun can be lost)."""
    before = int(metric(page, "Rounds"))
    for _ in range(3):
        page.get_by_role("button", name=re.compile("Step")).click()
        try:
            page.get_by_text(f"Round {before + 1} of").wait_for(timeout=20_000)
            break
        except Exception:  # noqa: BLE001 - retry the click once or twice
            continue
    wait_idle(page)
    # The counters hold a round back until its test (stage 3): one stage per click (presenter mode's
    # pace) leaves it at stage 1, so show it whole.
    whole = page.get_by_role("radio", name="5 · Output", exact=True)
    if whole.count() and whole.get_attribute("aria-checked") != "true":
        whole.click()
        wait_idle(page)
    assert int(metric(page, "Rounds")) == before + 1


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


def show_stage(page, stage: str) -> None:
    page.get_by_role("radio", name=stage, exact=True).click()
    wait_idle(page)


def screenshot_stages(page, prefix: str, rounds: int = 1) -> list[Path]:
    """Step `rounds` times, then show and save each stage of the last round."""
    set_animation(page, False)
    for _ in range(rounds):
        step(page)
    saved = []
    for number, stage in enumerate(STAGES, start=1):
        show_stage(page, stage)
        path = ARTIFACTS / f"{prefix}-stage{number}.png"
        page.screenshot(path=path, full_page=True)
        saved.append(path)
    return saved


def test_step_play_and_charts_in_a_real_browser(tiny_pair_dirs):
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}  # fmt: skip
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


def interesting_rounds(target: str, drafter: str, params: dict[str, str], chat: bool) -> dict[str, int]:
    """Replay the run outside the browser (same seed, same rounds) to find rounds worth a picture."""
    from specdec.config import SamplingConfig, Settings
    from specdec.core.records import STOP_CONFIDENCE
    from specdec.views.stepper import Stepper
    from specdec.models.pair import ModelPair

    pair = ModelPair.load(target, drafter)
    budget = int(params.get("max_new_tokens", Settings.max_new_tokens))
    settings = Settings(int(params["gamma"]), SamplingConfig(float(params.get("temperature", 1.0))),
                        budget, int(params["seed"]),
                        siblings=params.get("siblings", str(Settings.siblings)) == "True")  # fmt: skip
    stepper = Stepper(pair, pair.encode_prompt(params["prompt"], chat, settings.max_new_tokens), settings)
    while stepper.step() is not None:
        pass
    found = {}
    for trace in stepper.traces:
        if trace.num_drafted and not trace.is_bonus:
            found.setdefault("rejection", trace.index)
            if trace.num_accepted:
                found.setdefault("partial", trace.index)
        if trace.num_drafted and trace.is_bonus:
            found.setdefault("bonus", trace.index)
        if trace.num_drafted and trace.draft_stop == STOP_CONFIDENCE:
            found.setdefault("adaptive-stop", trace.index)
        if trace.kept_sibling is not None:
            found.setdefault("second-choice", trace.index)
    return found


def test_feature_head_round_shows_what_it_read():
    """The bundled target with its shipped feature head, picked by link: stage 1 says what the head read
    and draws the target's hidden state."""
    from specdec.paths import BUNDLED_HEAD

    ARTIFACTS.mkdir(exist_ok=True)
    params = {"prompt": "Write a Python function that returns the n largest numbers of a list.",
              "drafter": BUNDLED_HEAD, "temperature": "0", "seed": "0"}  # fmt: skip
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
    sys.path.insert(0, str(ROOT))
    ARTIFACTS.mkdir(exist_ok=True)
    bundled = "--bundled" in sys.argv
    if bundled:
        from specdec.models.pair import LOOKUP_FIRST
        from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET

        target, drafter, chat = BUNDLED_TARGET, LOOKUP_FIRST + BUNDLED_DRAFT, True  # the default
        params = {"prompt": "Write a Python function that checks whether a string is a palindrome.",
                  "gamma": "4", "seed": "0", "temperature": "0.7", "drafter": drafter}  # fmt: skip
        if "--second-choices" in sys.argv:  # greedy, with the draft's second choices in the pass
            params |= {"temperature": "0.0", "siblings": "True"}
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from tiny_models import save_tiny_model

        folder = ARTIFACTS / "tiny-models"
        target = str(save_tiny_model(folder / "target", 300, seed=0))
        drafter, chat = str(save_tiny_model(folder / "draft", 300, seed=1)), False
        params = {"prompt": "def add(a, b):\n    return a + b\n", "gamma": "3", "seed": "1"}
    env = {"SPECDEC_TARGET": target, "SPECDEC_DRAFTER": drafter, "SPECDEC_CHAT": "1" if chat else "0"}
    wanted = interesting_rounds(target, drafter, params, chat)
    print("rounds worth a picture:", wanted)
    prefix = ("bundled" if bundled else "tiny") + ("-second-choices" if "siblings" in params else "")
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
              "seed": "0"}  # fmt: skip
    with streamlit_server({"SPECDEC_DRAFTER": "ngram"}) as base, browser_page() as page:
        page.goto(f"{base}/speedup?{urlencode(params)}")
        page.get_by_role("button", name="Run the race").click()
        page.get_by_text(re.compile(r"Speculative · [1-9]\d* tokens")).wait_for()
        page.wait_for_timeout(1500)
        main = page.get_by_test_id("stMainBlockContainer")
        main.get_by_role("button", name="Stop", exact=True).click()
        page.get_by_text("Stopped: the numbers below cover the tokens produced so far.").wait_for()
        wait_idle(page)
        page.screenshot(path=ARTIFACTS / "race-stopped.png", full_page=True)
        assert metric(page, "Measured speed-up").endswith("x")
        produced = int(re.search(r"Target only · (\d+) tokens", page.inner_text("body")).group(1))
        assert 0 < produced < 128
