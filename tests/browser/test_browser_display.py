"""Every page at its defaults, in a real browser: no label cut off, at 1280×720 and in presenter mode
at 1920×1080 (the tiny pair, so the pages open fast).

As a script it saves a screenshot of every page in both views under test-artifacts/display/:
    PYTHONPATH=.:scripts:tests/support python tests/browser/test_browser_display.py [--bundled]
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    small_texts,
    step,
    streamlit_server,
    unfold_inputs,
    wait_idle,
)

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
PAGES = ["", "rounds", "speedup", "code-vs-prose", "guarantee", "rule-trial", "idle-machine",
         "class-is-a-batch", "variants", "stack"]
VIEWS = {"1280x720": ({"width": 1280, "height": 720}, {}),
         "presenter-1920x1080": ({"width": 1920, "height": 1080}, {"presenter": "1"})}
# The labels a reader must read whole: headings, the menu's and the pages' links, table headers,
# metric labels, token chips. A label is cut off when its text is wider than its box.
LABELS = ["h1", "h2", "h3", '[data-testid="stSidebarNav"] a', '[data-testid="stPageLink"] a',
          '[data-testid="stTable"] th', '[data-testid="stMetricLabel"]', ".sd-tok"]
CLIPPED = """(selectors) => {
    const cut = [];
    let seen = 0;
    for (const label of document.querySelectorAll(selectors.join(','))) {
        seen += label.getClientRects().length ? 1 : 0;
        for (const box of [label, ...label.querySelectorAll('*')]) {
            if (!box.getClientRects().length || box.clientWidth === 0) continue;  // hidden, or inline
            if (box.scrollWidth > box.clientWidth + 1) {
                const text = label.innerText.trim().slice(0, 60);
                cut.push(`${text} (${box.scrollWidth} > ${box.clientWidth} px)`);
                break;
            }
        }
    }
    return {cut, seen};
}"""


@contextlib.contextmanager
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(page, base: str, path: str, params: dict[str, str]) -> None:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    page.goto(f"{base}/{path}" + (f"?{query}" if query else ""))
    page.locator('[data-testid="stSidebarNav"]').wait_for(state="attached")  # folded in presenter mode
    page.wait_for_function("() => !document.body.innerText.includes('Loading the models')",
                           timeout=180_000)  # the page's note and the sidebar's both go
    wait_idle(page)
    if path == "rounds":  # the round view's chips, table and metrics appear with the first round
        unfold_inputs(page)
        page.get_by_role("switch", name="Animate stages").wait_for()
        if page.get_by_role("switch", name="Animate stages").is_checked():
            page.get_by_text("Animate stages").click()
            wait_idle(page)
        step(page)
        page.get_by_role("radio", name="2 · Verify", exact=True).click()
        wait_idle(page)


def unfold_sidebar(page) -> None:
    if not page.locator('[data-testid="stSidebarNav"]').is_visible():
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.locator('[data-testid="stSidebarNav"]').wait_for()
        wait_idle(page)


def cut_labels(page) -> list[str]:
    """The labels cut off on the page (after checking the page has its menu's ten links at least)."""
    found = page.evaluate(CLIPPED, LABELS)
    assert found["seen"] >= len(PAGES), found
    return found["cut"]


def test_no_label_is_cut_off_on_any_page(tiny_pair_dirs):
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    found = {}
    with streamlit_server(env) as base, browser() as chromium:
        for view, (viewport, params) in VIEWS.items():
            page = chromium.new_page(viewport=viewport)
            page.set_default_timeout(180_000)
            for path in PAGES:
                open_page(page, base, path, params)
                unfold_sidebar(page)  # presenter mode starts with it folded: its menu is checked too
                if cut := cut_labels(page):
                    found[f"{view} /{path}"] = cut
                    page.screenshot(path=ARTIFACTS / f"cut-{view}-{path or 'home'}.png", full_page=True)
            if params:  # presenter=1 in the link turned presenter mode on
                assert page.get_by_role("switch", name="Presenter mode").is_checked()
                assert "presenter=True" in page.url
            page.close()
    assert not found, found


def test_presenter_mode_draws_no_text_under_20_px(tiny_pair_dirs):
    """A projector seen from the back of a hall: on every page, in presenter mode at 1920×1080, every
    visible text of the main area, charts included, is at least 20 px."""
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    found = {}
    with streamlit_server(env) as base, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1920, "height": 1080})
        page.set_default_timeout(180_000)
        for path in PAGES:
            open_page(page, base, path, {"presenter": "1"})
            if small := small_texts(page):
                found[path or "home"] = small
                page.screenshot(path=ARTIFACTS / f"small-text-{path or 'home'}.png", full_page=True)
        # Negative control: the same check sees a paragraph drawn at 14 px.
        page.add_style_tag(content='[data-testid="stMainBlockContainer"] h1 {font-size: 14px !important;}')
        assert any(" 14px: In your stack" in text for text in small_texts(page)), small_texts(page)
    (ARTIFACTS / "small-text.json").write_text(json.dumps(found, indent=1, ensure_ascii=False))
    assert not found, f"{sum(map(len, found.values()))} small texts, listed in {ARTIFACTS}/small-text.json"


def test_the_check_finds_a_cut_label(tiny_pair_dirs):
    """Negative control: a heading squeezed into 80 px is reported."""
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": "ngram", "SPECDEC_CHAT": "0"}
    with streamlit_server(env) as base, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 720})
        page.set_default_timeout(180_000)  # a first page on a busy machine
        open_page(page, base, "", {})
        assert cut_labels(page) == []
        page.add_style_tag(content="h1 {width: 80px; white-space: nowrap; overflow: hidden;}")
        assert any("specdec" in label for label in cut_labels(page))


if __name__ == "__main__":  # screenshots of every page in both views, for people to look at
    from tiny_models import save_tiny_model

    out = ARTIFACTS / "display"
    out.mkdir(parents=True, exist_ok=True)
    if "--bundled" in sys.argv:
        env = {}
    else:
        folder = ARTIFACTS / "tiny-models"
        env = {"SPECDEC_TARGET": str(save_tiny_model(folder / "target", 300, seed=0)),
               "SPECDEC_DRAFTER": str(save_tiny_model(folder / "draft", 300, seed=1)), "SPECDEC_CHAT": "0"}
    with streamlit_server(env, timeout=180) as base, browser() as chromium:
        for view, (viewport, params) in VIEWS.items():
            page = chromium.new_page(viewport=viewport)
            page.set_default_timeout(180_000)
            for path in PAGES:
                open_page(page, base, path, params)
                page.screenshot(path=out / f"{view}-{path or 'home'}.png")
                print(view, path or "home", cut_labels(page))
            page.close()
