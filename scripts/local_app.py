"""The app on a free localhost port, for the scripts and tests that drive it in a browser
(screenshots.py, load_test.py, tests/browser/test_browser*.py): started with `streamlit run app.py`, stopped
with its whole process group; and a click timed the way a class waits for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@dataclass(frozen=True)
class LocalApp:
    url: str
    pid: int  # the server's process id (it leads its own process group)
    log: Path  # the server's stdout and stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
            return reply.read() == b"ok"
    except OSError:
        return False


@contextlib.contextmanager
def app_server(log_path: Path, env: dict[str, str] | None = None, timeout: float = 300.0,
               start_script: bool = False):
    """-> LocalApp once the server answers its health check (the models load afterwards, in the
    background: a page says when they are in). Always stopped on exit.

    `start_script`: through the README's ./start.sh, as a user starts it (set-up included)."""
    port = free_port()
    options = ["--server.port", str(port), "--server.address", "127.0.0.1",
               "--server.fileWatcherType", "none"]
    if start_script:
        command = ["./start.sh", *options]
    else:
        command = [str(Path(sys.executable).parent / "streamlit"), "run", "app.py",
                   "--server.headless", "true", "--browser.gatherUsageStats", "false", *options]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + timeout
            while not healthy(url):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the app did not start; see {log_path}")
                time.sleep(0.5)
            yield LocalApp(url, server.pid, Path(log_path))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=15)


CHARTS = '[data-testid="stPlotlyChart"], [data-testid="stVegaLiteChart"]'
MAIN = '[data-testid="stMainBlockContainer"]'
ERROR = '[data-testid="stException"]'


def timed_click(page, button: str, done, milestone: str | None = None, timeout_ms: float = 600_000) -> dict:
    """Click the main area's `button` -> seconds to the first new chart, to the text `milestone` (if
    given) and to the locator `done` (or an error box), with the machine's load average before and after:
    how long the page kept the class waiting."""
    charts = page.locator(CHARTS).count()
    load = os.getloadavg()[0]
    started = time.monotonic()
    page.locator(MAIN).get_by_role("button", name=button, exact=True).click()
    page.wait_for_function("([charts, before]) => document.querySelectorAll(charts).length > before",
                           arg=[CHARTS, charts], timeout=timeout_ms, polling=100)
    figures = {"click_to_first_chart_s": round(time.monotonic() - started, 1)}
    if milestone:
        page.get_by_text(milestone).first.wait_for(timeout=timeout_ms)
        figures["click_to_milestone_s"] = round(time.monotonic() - started, 1)
    done.first.or_(page.locator(ERROR).first).wait_for(timeout=timeout_ms)
    return figures | {"click_to_answer_s": round(time.monotonic() - started, 1),
                      "load_average_1min_before": round(load, 2),
                      "load_average_1min_after": round(os.getloadavg()[0], 2)}
