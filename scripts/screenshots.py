"""Screenshots for the README and the tutorial, from the running app in headless Chromium.

    .venv/bin/python scripts/screenshots.py                  # starts the app on a free port, then stops it
    .venv/bin/python scripts/screenshots.py --presenter      # the lesson's five pages in presenter mode
    .venv/bin/python scripts/screenshots.py --url http://localhost:8501 --only round-view

Without --presenter: docs/images/round-view.png (the round view, three rounds in, at the acceptance
stage) and docs/images/guarantee.png (an instructor page: the guarantee's p/q playground), at 1280×800.
With --presenter: Home → Round by round → The guarantee → Code vs prose → Live speed-up with
`presenter=1` at 1920×1080 (a projector), each after what it shows first (three rounds; the prompt
sets; the race), written to docs/images/presenter/<n>-<page>.png scaled to 1280×720. Both as small
palette PNGs. A cold app loads the models first (a first start also converts the bundled model): the
script waits for them. Renew the pictures after a page changes, and look at them before committing.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_app import CHROMIUM, CHROMIUM_ARGS, ERROR, ROOT, app_server, timed_click  # noqa: E402 - this folder's helper

IMAGES = ROOT / "docs" / "images"
LOAD_TIMEOUT_MS = 600_000  # a first start converts the model; a busy machine takes longer
STEP_BUTTON = ".st-key-b_step button"  # drawn twice with a shortcut (one copy hidden): take .first


@dataclass(frozen=True)
class View:
    """One set of pictures: where they go, the browser's size, the size saved, the link's settings."""

    folder: Path
    viewport: dict[str, int]
    saved_size: tuple[int, int] | None
    link: dict[str, str]


PLAIN = View(IMAGES, {"width": 1280, "height": 800}, None, {})
PRESENTER = View(IMAGES / "presenter", {"width": 1920, "height": 1080}, (1280, 720),
                 {"presenter": "1", "seed": "0"})


def wait_idle(page) -> None:
    """Until the script has finished running, every chart has drawn, and no element is a grey skeleton
    (a busy browser loads widgets' code late)."""
    page.wait_for_timeout(500)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')
                 && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                        .every(chart => chart.querySelector('.main-svg'))
                 && !document.querySelector('[data-testid="stSkeleton"], '
                        + '[data-testid="stSkeletonElement"], [data-testid="stAppSkeleton"]')""",
        timeout=LOAD_TIMEOUT_MS,
    )
    page.wait_for_timeout(800)  # Vega and Plotly draw after their elements appear


def save(page, view: View, name: str) -> Path:
    """A viewport screenshot, scaled to the view's saved size and reduced to a 256-colour palette (the
    UI has few colours)."""
    from PIL import Image

    path = view.folder / name
    page.screenshot(path=str(path))
    with Image.open(path) as image:
        image = image.convert("RGB")
        if view.saved_size:
            image = image.resize(view.saved_size, Image.Resampling.LANCZOS)
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return path


def open_page(page, url: str, view: View, path: str, wait_for: str, **link: str) -> None:
    page.goto(f"{url}/{path}?{urlencode(view.link | link)}")
    page.get_by_text(wait_for).first.wait_for(timeout=LOAD_TIMEOUT_MS)
    wait_idle(page)


def scroll_to(page, locator, up: int) -> None:
    """`locator` near the top of the window, `up` pixels below it."""
    locator.scroll_into_view_if_needed()
    page.mouse.wheel(0, -up)
    page.wait_for_timeout(500)


def three_rounds_at_stage_3(page, url: str, view: View, **link: str) -> None:
    """The round view, animation and one stage per click off, three Steps, then the third round's
    acceptance test."""
    open_page(page, url, view, "rounds", "Step", **link)
    folded = page.get_by_text("Prompt and playback", exact=True)  # presenter mode folds the inputs away
    if folded.count():
        folded.click()
        wait_idle(page)
    for switch in ("Animate stages", "One stage per click"):  # each Step shows a whole round
        if page.get_by_role("switch", name=switch).is_checked():
            page.get_by_text(switch, exact=True).click()
            wait_idle(page)
    if folded.count():
        folded.click()
        wait_idle(page)
    for number in range(1, 4):
        page.locator(STEP_BUTTON).first.click()
        page.get_by_text(f"Round {number} of").first.wait_for(timeout=LOAD_TIMEOUT_MS)
        wait_idle(page)
    page.get_by_role("radio", name="3 · Accept?", exact=True).click()
    wait_idle(page)


# -- the README's pictures --------------------------------------------------------------------------


def round_view(page, url: str) -> Path:
    # A code prompt, greedy, a fixed seed: the picture shows the same rounds each time.
    three_rounds_at_stage_3(page, url, PLAIN, temperature="0", seed="0", prompt="Write a Python function "
                            "that checks whether a string is a palindrome.")
    scroll_to(page, page.get_by_role("radio", name="3 · Accept?", exact=True), 150)
    return save(page, PLAIN, "round-view.png")


def guarantee_playground(page, url: str) -> Path:
    """An instructor page that needs no run and no clock: the guarantee's p/q playground."""
    open_page(page, url, PLAIN, "guarantee", "1 · Toy playground")
    scroll_to(page, page.get_by_text("1 · Toy playground"), 120)
    return save(page, PLAIN, "guarantee.png")


# -- the lesson's five pages in presenter mode ------------------------------------------------------


def run_timed(page, button: str, done, milestone: str | None = None) -> None:
    """Click `button`; print how long the page kept the class waiting (timed_click's figures)."""
    figures = timed_click(page, button, done, milestone, LOAD_TIMEOUT_MS)
    if page.locator(ERROR).count():
        raise SystemExit(f"{button}: the page shows an error")
    reached = f"'{milestone}' after {figures['click_to_milestone_s']} s, " if milestone else ""
    print(f"{button}: first chart after {figures['click_to_first_chart_s']} s, {reached}done after "
          f"{figures['click_to_answer_s']} s (load average {figures['load_average_1min_after']:.2f})")
    wait_idle(page)


def home(page, url: str) -> Path:
    open_page(page, url, PRESENTER, "", "step by step")
    return save(page, PRESENTER, "1-home.png")


def rounds(page, url: str) -> Path:
    three_rounds_at_stage_3(page, url, PRESENTER)
    page.locator(STEP_BUTTON).first.evaluate("button => button.scrollIntoView()")  # the buttons on top
    page.wait_for_timeout(500)
    return save(page, PRESENTER, "2-rounds.png")


def guarantee(page, url: str) -> Path:
    """The quick run's verdict: speculative inside the noise band, the draft alone outside it."""
    open_page(page, url, PRESENTER, "guarantee", "Sample both ways")
    run_timed(page, "Sample both ways", page.get_by_text("TV distance").first)
    page.locator('[data-testid="stPlotlyChart"]').last.evaluate("chart => chart.scrollIntoView()")
    page.mouse.wheel(0, -40)  # the chart's title in view, its verdict below it
    page.wait_for_timeout(500)
    return save(page, PRESENTER, "3-guarantee.png")


def code_vs_prose(page, url: str) -> Path:
    open_page(page, url, PRESENTER, "code-vs-prose", "Run the prompt sets")
    # The quiz comes after the last prompt; code's and prose's first numbers, after the first two.
    run_timed(page, "Run the prompt sets", page.get_by_role("heading", name="Quiz"), "prose · prompt 1")
    scroll_to(page, page.locator('[data-testid="stPlotlyChart"]').first, 120)
    return save(page, PRESENTER, "4-code-vs-prose.png")


def speedup(page, url: str) -> Path:
    open_page(page, url, PRESENTER, "speedup", "Run the race")
    run_timed(page, "Run the race", page.get_by_text("Measured speed-up").first)
    scroll_to(page, page.get_by_text("Measured speed-up").first, 200)
    return save(page, PRESENTER, "5-speedup.png")


PICTURES = {"round-view": round_view, "guarantee": guarantee_playground}
PRESENTER_PICTURES = {"home": home, "rounds": rounds, "guarantee": guarantee, "code-vs-prose": code_vs_prose,
                      "speedup": speedup}


def models_loaded(page, url: str) -> None:
    """A cold server loads the models in the background: wait for them, so every picture shows a page
    at rest (the sidebar's status names the target once they are in)."""
    page.goto(f"{url}/rounds")
    page.locator('[data-testid="stSidebar"]').get_by_text("Target:").wait_for(timeout=LOAD_TIMEOUT_MS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one on a free port)")
    parser.add_argument("--presenter", action="store_true",
                        help="the lesson's five pages in presenter mode, docs/images/presenter/")
    parser.add_argument("--only", nargs="+", metavar="PICTURE",
                        help=f"renew these alone: {', '.join(PICTURES)}; with --presenter: "
                             f"{', '.join(PRESENTER_PICTURES)}")
    args = parser.parse_args()
    pictures, view = (PRESENTER_PICTURES, PRESENTER) if args.presenter else (PICTURES, PLAIN)
    unknown = sorted(set(args.only or ()) - set(pictures))
    if unknown:
        parser.error(f"no picture named {', '.join(unknown)}; the pictures: {', '.join(pictures)}")
    from playwright.sync_api import sync_playwright

    view.folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.url:
            url = args.url.rstrip("/")
        else:
            url = stack.enter_context(app_server(Path(tempfile.gettempdir()) / "specdec-screenshots.log")).url
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=view.viewport)
                page.set_default_timeout(LOAD_TIMEOUT_MS)
                models_loaded(page, url)
                for name, take in pictures.items():
                    if args.only is None or name in args.only:
                        take(page, url)
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
