"""Screenshots of the lesson's pages in presenter mode, for the tutorial, from the running app.

    .venv/bin/python scripts/presenter_screenshots.py                 # starts the app, then stops it
    .venv/bin/python scripts/presenter_screenshots.py --url http://localhost:8501

Opens Home → Round by round → The guarantee → Code vs prose → Live speed-up with `presenter=1` at
1920×1080 (a projector), runs what each page shows first (three rounds; the prompt sets; the race),
and writes docs/images/presenter/<n>-<page>.png, scaled to 1280×720 and reduced to a 256-colour
palette. Look at them before committing.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, streamlit_server, wait_idle  # noqa: E402 - tests' helpers

OUT = ROOT / "docs" / "images" / "presenter"
LOAD_TIMEOUT_MS = 600_000  # a first start converts the bundled model; a busy machine takes longer
VIEWPORT = {"width": 1920, "height": 1080}
SAVED_SIZE = (1280, 720)
LINK = {"presenter": "1", "seed": "0"}


def save(page, name: str) -> Path:
    from PIL import Image

    path = OUT / name
    page.screenshot(path=str(path))
    with Image.open(path) as image:
        small = image.convert("RGB").resize(SAVED_SIZE, Image.Resampling.LANCZOS)
        small.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return path


def drawn(page) -> None:
    """Until the script is idle and every element has drawn (a busy browser loads widgets' code late
    and shows grey skeletons meanwhile)."""
    wait_idle(page)
    page.wait_for_function("""() => !document.querySelector(
        '[data-testid="stSkeleton"], [data-testid="stSkeletonElement"], [data-testid="stAppSkeleton"]')""")
    page.wait_for_timeout(500)


def open_page(page, url: str, path: str, wait_for: str) -> None:
    page.goto(f"{url}/{path}?{urlencode(LINK)}")
    page.get_by_text(wait_for).first.wait_for(timeout=LOAD_TIMEOUT_MS)
    drawn(page)


def models_loaded(page, url: str) -> None:
    """A cold server loads the models in the background: wait for them, so every picture shows a page
    at rest (the sidebar's status names the target once they are in)."""
    page.goto(f"{url}/rounds?{urlencode(LINK)}")
    page.locator('[data-testid="stSidebar"]').get_by_text("Target:").wait_for(timeout=LOAD_TIMEOUT_MS)


def home(page, url: str) -> Path:
    open_page(page, url, "", "step by step")
    return save(page, "1-home.png")


def rounds(page, url: str, count: int = 3) -> Path:
    open_page(page, url, "rounds", "Animate stages")
    if page.get_by_role("switch", name="Animate stages").is_checked():
        page.get_by_text("Animate stages").click()
        wait_idle(page)
    for number in range(1, count + 1):
        page.get_by_role("button", name=re.compile("Step")).click()
        page.get_by_text(f"Round {number} of").first.wait_for(timeout=LOAD_TIMEOUT_MS)
        wait_idle(page)
    page.get_by_role("radio", name="3 · Accept?", exact=True).click()
    drawn(page)
    page.get_by_role("radio", name="3 · Accept?", exact=True).scroll_into_view_if_needed()
    page.mouse.wheel(0, -250)
    page.wait_for_timeout(500)
    return save(page, "2-rounds.png")


def guarantee(page, url: str) -> Path:
    open_page(page, url, "guarantee", "guarantee")
    return save(page, "3-guarantee.png")


def code_vs_prose(page, url: str) -> Path:
    open_page(page, url, "code-vs-prose", "Run the prompt sets")
    page.get_by_role("button", name="Run the prompt sets").click()
    page.get_by_role("heading", name="Quiz").wait_for(timeout=LOAD_TIMEOUT_MS)  # after the last prompt
    drawn(page)
    page.locator('[data-testid="stPlotlyChart"]').first.scroll_into_view_if_needed()
    page.mouse.wheel(0, -120)
    page.wait_for_timeout(500)
    return save(page, "4-code-vs-prose.png")


def speedup(page, url: str) -> Path:
    open_page(page, url, "speedup", "Run the race")
    page.get_by_role("button", name="Run the race").click()
    page.get_by_text("Measured speed-up").first.wait_for(timeout=LOAD_TIMEOUT_MS)
    drawn(page)
    page.get_by_text("Measured speed-up").first.scroll_into_view_if_needed()
    page.mouse.wheel(0, -200)
    page.wait_for_timeout(500)
    return save(page, "5-speedup.png")


PICTURES = {"home": home, "rounds": rounds, "guarantee": guarantee, "code-vs-prose": code_vs_prose,
            "speedup": speedup}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one on a free port)")
    parser.add_argument("--only", choices=sorted(PICTURES), nargs="+", help="renew these pictures alone")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    ARTIFACTS.mkdir(exist_ok=True)  # the server's log
    with contextlib.ExitStack() as stack:
        url = args.url.rstrip("/") if args.url else stack.enter_context(streamlit_server({}, timeout=300))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(LOAD_TIMEOUT_MS)
                models_loaded(page, url)
                for name, take in PICTURES.items():
                    if args.only is None or name in args.only:
                        take(page, url)
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
