"""Driving the real app in a real browser (Playwright + Chromium): a server started as the scripts start
it, a page, and the waits and clicks every browser test needs. Not a test module: the browser tests in
tests/browser/ import it by name (tests/support is on pytest.ini's pythonpath)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

# The browser and the server as the scripts start them (scripts/ is on pytest.ini's pythonpath).
from local_app import CHROMIUM, CHROMIUM_ARGS, ERROR, MAIN, app_server, free_port, timed_click  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
STAGES = ["1 · Draft", "2 · Verify", "3 · Accept?", "4 · Correct", "5 · Output"]
SIZES = {"1280x720": (1280, 720), "1920x1080": (1920, 1080)}
TIMES = ARTIFACTS / "quick-runs.json"
# Two browser tests may run at once (./test.sh), each on a pytest-xdist worker: one server log each.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
SERVER_LOG = ARTIFACTS / (f"server-{WORKER}.log" if WORKER else "server.log")


@contextlib.contextmanager
def streamlit_server(env: dict[str, str], timeout: float = 90.0, start_script: bool = False):
    """The app on a free localhost port, its log in SERVER_LOG (test-artifacts/server.log, or
    server-gw0.log on a pytest-xdist worker); always stopped.

    `start_script`: through the README's ./start.sh, as a user starts it (set-up included)."""
    with app_server(SERVER_LOG, env, timeout, start_script) as app:
        yield app.url


@contextlib.contextmanager
def browser_page(height: int = 1000):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.set_default_timeout(180_000)  # a first page while another browser test runs beside it
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


def interesting_rounds(target: str, drafter: str, params: dict[str, str], chat: bool) -> dict[str, int]:
    """Replay the run outside the browser (same seed, same rounds) to find rounds worth a picture."""
    from specdec.config import SamplingConfig, Settings
    from specdec.core.records import STOP_CONFIDENCE
    from specdec.models.pair import ModelPair
    from specdec.views.stepper import Stepper

    pair = ModelPair.load(target, drafter)
    budget = int(params.get("max_new_tokens", Settings.max_new_tokens))
    settings = Settings(int(params["gamma"]), SamplingConfig(float(params.get("temperature", 1.0))),
                        budget, int(params["seed"]), tree=params.get("tree", Settings.tree))
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


def click_and_wait(page, button: str, done: str, timeout: float = 240_000) -> None:
    """Click, then wait for `done`; fail at once (with a screenshot) if the page shows a traceback."""
    page.get_by_role("button", name=button, exact=True).click()
    finished = page.get_by_text(done).first.or_(page.locator('[data-testid="stException"]').first)
    finished.wait_for(timeout=timeout)
    if page.locator('[data-testid="stException"]').count():
        page.screenshot(path=ARTIFACTS / "instructor-failure.png", full_page=True)
        pytest.fail(f"{button}: {page.locator('[data-testid=stException]').first.inner_text()[:500]}")
    wait_idle(page)


def set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def shot(page, name: str) -> None:
    wait_idle(page)  # every Plotly chart drawn
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)


def record(name: str, figures: dict) -> None:
    """Add a page's timings to test-artifacts/quick-runs.json (the batch page writes there too), locked
    against a test on another worker doing the same."""
    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "quick-runs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = json.loads(TIMES.read_text()) if TIMES.exists() else {}
        known[name] = figures
        TIMES.write_text(json.dumps(known, indent=2) + "\n", encoding="utf-8")


def timed_answer(page, button: str, done: str) -> dict:
    """timed_click to the text `done`, a screenshot of the page however it ends, and no error shown."""
    try:
        figures = timed_click(page, button, page.get_by_text(done))
    finally:
        page.screenshot(path=ARTIFACTS / "quick-run-last.png", full_page=True)
    assert not page.locator(ERROR).count()
    wait_idle(page)
    return figures


def load_test_module():
    """scripts/load_test.py, which drives several browser sessions at once."""
    import load_test

    return load_test


# Every visible text in the main area, with the font size it is drawn at: HTML elements with text of
# their own, and the charts' SVG text (Plotly's ticks, legends and titles), at its size on screen.
SMALL_TEXT = """(limit) => {
    const small = [];
    let seen = 0;
    const main = document.querySelector('[data-testid="stMainBlockContainer"]');
    for (const box of main.querySelectorAll('*')) {
        const own = [...box.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
        if (!own || !box.getClientRects().length) continue;
        if (box.closest('[data-testid="stIconMaterial"], [translate="no"]')) continue;  // an icon, not text
        const style = getComputedStyle(box);
        if (style.visibility === 'hidden' || style.display === 'none' || box.closest('[hidden]')) continue;
        const rect = box.getBoundingClientRect();
        if (rect.width === 0 || rect.height === 0) continue;
        seen += 1;
        const m = box instanceof SVGElement ? box.getScreenCTM() : null;
        const scale = m ? Math.hypot(m.a, m.b) : 1;  // rotated text (an axis title) too
        const size = Math.round(parseFloat(style.fontSize) * scale * 10) / 10;
        const text = box.textContent.trim().slice(0, 40);
        if (size < limit - 0.5) small.push(`${box.tagName.toLowerCase()} ${size}px: ${text}`);
    }
    // A data grid draws its text (14 px) on a canvas: what counts is the zoom it is drawn at.
    for (const grid of main.querySelectorAll('[data-testid="stDataFrame"]')) {
        if (!grid.getClientRects().length) continue;
        seen += 1;
        const size = 14 * (parseFloat(getComputedStyle(grid).zoom) || 1);
        if (size < limit - 0.5) small.push(`grid ${size}px: ${grid.innerText.trim().slice(0, 40)}`);
    }
    return {small, seen};
}"""


def small_texts(page, limit: float = 20) -> list[str]:
    """The main area's visible texts drawn under `limit` px (presenter mode's floor), as 'tag size: text'."""
    found = page.evaluate(SMALL_TEXT, limit)
    assert found["seen"] > 3, found
    return found["small"]

