"""Screenshots for the README and the tutorial, from the running app in headless Chromium.

    .venv/bin/python scripts/screenshots.py                  # starts the app on a free port, then stops it
    .venv/bin/python scripts/screenshots.py --url http://localhost:8501   # uses a running app

Writes docs/images/round-view.png (the round view, three rounds in, at the acceptance stage) and
docs/images/guarantee.png (an instructor page: the guarantee's p/q playground), as small palette
PNGs. The app's first start converts the bundled model (a minute or two): the script
waits for it. Renew the pictures after a page changes, and look at them before committing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]  # fmt: skip
VIEWPORT = {"width": 1280, "height": 800}
# The round view: a code prompt, greedy, a fixed seed, so the picture shows the same rounds each time.
ROUND_LINK = {"temperature": "0", "seed": "0", "prompt": "Write a Python function that checks whether a "
              "string is a palindrome."}  # fmt: skip
SERVER_LOG = Path(tempfile.gettempdir()) / "specdec-screenshots-server.log"
LOAD_TIMEOUT_MS = 600_000  # a first start converts the model; a busy machine takes longer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def app_server(log_path: Path, timeout: float = 120.0):
    """`streamlit run app.py` on a free localhost port; always stopped (its process group) on exit."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "streamlit"), "run", "app.py", "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"]  # fmt: skip
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + timeout
            while not healthy(url):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the app did not start; see {log_path}")
                time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
            return reply.read() == b"ok"
    except OSError:
        return False


def wait_idle(page) -> None:
    """Until the script has finished running and every chart has drawn."""
    page.wait_for_timeout(500)
    page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')
                 && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                        .every(chart => chart.querySelector('.main-svg'))""",
        timeout=LOAD_TIMEOUT_MS,
    )
    page.wait_for_timeout(800)  # Vega and Plotly draw after their elements appear


def save(page, name: str) -> Path:
    """A viewport screenshot, reduced to a 256-colour palette (the UI has few colours)."""
    from PIL import Image

    path = IMAGES / name
    page.screenshot(path=str(path))
    with Image.open(path) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")
    return path


def round_view(page, url: str, rounds: int = 3) -> Path:
    page.goto(f"{url}/rounds?{urlencode(ROUND_LINK)}")
    page.get_by_role("button", name=re.compile("Step")).wait_for(timeout=LOAD_TIMEOUT_MS)
    wait_idle(page)
    animate = page.get_by_role("switch", name="Animate stages")
    if animate.count() and animate.is_checked():
        page.get_by_text("Animate stages").click()
        wait_idle(page)
    for number in range(1, rounds + 1):
        page.get_by_role("button", name=re.compile("Step")).click()
        page.get_by_text(f"Round {number} of").first.wait_for(timeout=LOAD_TIMEOUT_MS)
        wait_idle(page)
    page.get_by_role("radio", name="3 · Accept?", exact=True).click()  # mid-round: the acceptance test
    wait_idle(page)
    page.get_by_role("radio", name="3 · Accept?", exact=True).scroll_into_view_if_needed()
    page.mouse.wheel(0, -150)
    page.wait_for_timeout(500)
    return save(page, "round-view.png")


def guarantee(page, url: str) -> Path:
    """An instructor page that needs no run and no clock: the guarantee's p/q playground."""
    page.goto(f"{url}/guarantee")
    header = page.get_by_text("1 · Toy playground")
    header.wait_for(timeout=LOAD_TIMEOUT_MS)
    wait_idle(page)
    header.scroll_into_view_if_needed()
    page.mouse.wheel(0, -120)
    page.wait_for_timeout(500)
    return save(page, "guarantee.png")


PICTURES = {"round-view": round_view, "guarantee": guarantee}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start one on a free port)")
    parser.add_argument("--only", choices=sorted(PICTURES), help="renew this picture alone")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        url = args.url.rstrip("/") if args.url else stack.enter_context(app_server(SERVER_LOG))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(120_000)
                for name, take in PICTURES.items():
                    if args.only in (None, name):
                        take(page, url)
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
