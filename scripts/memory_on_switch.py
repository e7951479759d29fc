"""The app server's resident memory as a class switches drafters: one target, however many drafters.

    python scripts/memory_on_switch.py [--root CHECKOUT] [--drafters ngram,early:4,...]

Starts the app (of this checkout, or of another one, to compare), opens Round by round in headless
Chromium with the bundled default drafter, then in new sessions with the feature head, with n-gram
lookup and with the default again, and prints the server's resident memory (RSS, its whole process
tree) once each page has loaded its models. docs/howto/own-pair-and-gpu.md quotes its figures.
--drafters switches through those instead, in that order (start with ngram: the target alone).
--in-process loads them in this process through the server's own PairShelf, without the app or a
browser, runs each on a short prompt (the first run pages the target's weights in, as a server's first
session does), and prints the resident size after each and what each load added (PairShelf.resident_added;
for an early exit, the bytes of its own tensors beside it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

from browser_driver import browser_page, free_port, open_rounds  # noqa: E402

from specdec.paths import BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_TARGET  # noqa: E402

SWITCHES = ("ngram+" + BUNDLED_DRAFT, BUNDLED_HEAD, "ngram", "ngram+" + BUNDLED_DRAFT)


@contextlib.contextmanager
def app_server(root: Path):
    port = free_port()
    command = [str(Path(sys.executable).parent / "streamlit"), "run", "app.py", "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.port", str(port), "--server.address",
               "127.0.0.1", "--server.fileWatcherType", "none"]
    server = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                if reply.read() == b"ok":
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}", psutil.Process(server.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


def resident_mib(process: psutil.Process) -> float:
    tree = [process, *process.children(recursive=True)]
    return sum(p.memory_info().rss for p in tree) / 2**20


def in_process(switches: list[str]) -> int:
    from specdec.config import SamplingConfig, Settings
    from specdec.models.pair import NGRAM, ModelPair
    from specdec.models.runs import generate
    from specdec.serving.allowed_models import PairShelf

    shelf = PairShelf(lambda target: ModelPair.load(target, NGRAM))
    settings = Settings(sampling=SamplingConfig(temperature=0), max_new_tokens=16)
    for drafter in switches:
        pair = shelf.get(BUNDLED_TARGET, drafter)
        generate(pair, pair.encode_prompt("def add(a, b):", chat=False), settings)
        print(f"after {drafter} and a run: {resident_mib(psutil.Process()):,.0f} MiB", flush=True)
    own = shelf.own_bytes
    for name, size in shelf.resident_added.items():
        counted = f" (its own tensors: {own[name] / 2**20:,.1f} MiB)" if name in own else ""
        print(f"{name}: +{size / 2**20:,.1f} MiB{counted}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app is served")
    parser.add_argument("--drafters", help="the drafters to switch through, comma-separated")
    parser.add_argument("--in-process", action="store_true", help="load through PairShelf here, no app")
    args = parser.parse_args()
    switches = [d for d in args.drafters.split(",") if d] if args.drafters else SWITCHES
    if args.in_process:
        return in_process(switches)
    with app_server(args.root.resolve()) as (base, process), browser_page() as page:
        page.set_default_timeout(600_000)  # a cold load on a busy 2-core machine takes minutes
        print(f"started: {resident_mib(process):,.0f} MiB")
        for drafter in switches:
            page.goto("about:blank")  # a new session each time, as a second student's browser would be
            open_rounds(page, base, {"drafter": drafter, "prompt": "def add(a, b):"})
            page.wait_for_timeout(2000)  # the memory settles after the load
            print(f"after Round by round with {drafter}: {resident_mib(process):,.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
