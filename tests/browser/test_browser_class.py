"""A class behind the balancer, in real browsers on loopback: scripts/serve_class.sh starts two
replicas (the tiny pair) behind HAProxy, and four Chromium sessions, each with its own cookies like
four students, step through rounds from 127.0.0.1.

Asserts that each session's requests (page, websocket, download) stay on one replica, by the header
HAProxy adds and by its log; that the sessions spread over both; that every Step shows its round;
that a download works through the balancer; that when one replica is killed its students see
Streamlit's "connecting" state and then a working page on the other replica, while the other
replica's students go on stepping; and that Ctrl-C stops every process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    free_port,
    load_test_module,
    metric,
    set_animation,
    wait_idle,
)

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.alone,  # two replicas behind HAProxy and four browsers: the machine to itself
    pytest.mark.slow,  # two servers, HAProxy and four browser sessions
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
STUDENTS = 4
CLICKS = 3
PARAMS = {"prompt": "def add(a, b):", "seed": "0"}
BANNER_END = "Ctrl-C stops everything."
FIRST_PAGE_TIMEOUT_MS = 300_000
# Records every text Streamlit's status widget and any dialog show, from now on, in the page itself:
# the "connecting" state lasts about a second before the page comes back on the other replica.
WATCH_CONNECTION = """() => {
    window.seenStates = [];
    const note = () => {
        for (const el of document.querySelectorAll('[data-testid="stStatusWidget"], [role="dialog"]'))
            window.seenStates.push(el.innerText);
    };
    new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


@contextlib.contextmanager
def serve_class(env: dict[str, str], log_dir: Path):
    """scripts/serve_class.sh --replicas 2 on loopback; -> (launcher, url, {replica: pid})."""
    port = free_port()
    out = open(log_dir / "launcher.out", "w+")  # noqa: SIM115 - closed below
    command = ["scripts/serve_class.sh", "--replicas", "2", "--port", str(port), "--address", "127.0.0.1",
               "--log-dir", str(log_dir)]
    launcher = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # first run: `scripts/setup.sh class` may install HAProxy
        while BANNER_END not in (text := (log_dir / "launcher.out").read_text()):
            assert launcher.poll() is None and time.monotonic() < deadline, f"no banner:\n{text}"
            time.sleep(0.5)
        pids = {name: int(pid) for name, pid in re.findall(r"replica (r\d): \S+\s+pid (\d+)", text)}
        yield launcher, f"http://127.0.0.1:{port}", pids
    finally:
        if launcher.poll() is None:  # the test failed before its own Ctrl-C
            os.killpg(launcher.pid, signal.SIGINT)
            launcher.wait(timeout=30)
        out.close()


def open_student(browser, base: str, number: int):
    """A new browser context (its own cookies), named by its User-Agent in HAProxy's log; -> (page,
    the X-Specdec-Replica header of every response it received)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  user_agent=f"Mozilla/5.0 specdec-student-{number}")
    page = context.new_page()
    page.set_default_timeout(60_000)
    replicas: list[str] = []
    page.on("response", lambda reply: replicas.append(reply.headers.get("x-specdec-replica", "none")))
    page.goto(f"{base}/rounds?{urlencode(PARAMS)}")
    # The first student on each replica waits for it to load the models: on a busy 2-core machine
    # that took more than the minute a Step may take.
    page.get_by_role("button", name=re.compile("Step")).first.wait_for(timeout=FIRST_PAGE_TIMEOUT_MS)
    wait_idle(page)
    set_animation(page, False)
    return page, replicas


def click_step(page, number: int, load_test) -> None:
    """One click on Step, then round `number` must be shown (no retry: rounds = clicks), to its last
    stage: the counters count a round from its test on (a fresh page animates its stages)."""
    page.evaluate(load_test.CLICK_AND_TIME, number)
    page.get_by_role("radio", name="5 · Output", checked=True).wait_for(timeout=60_000)
    wait_idle(page)


def log_servers(lines: list[str]) -> dict[str, list[tuple[str, str, str]]]:
    """HAProxy's log -> for each student, its requests as (replica, status, request line)."""
    found = defaultdict(list)
    for line in lines:
        match = re.match(r'\S+ \S+ (\S+) (\d+) \S+ \{[^}]*specdec-student-(\d+)\} "([^"]*)"', line)
        if match:
            found[match[3]].append((match[1], match[2], match[4]))
    return found


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def running_with(argument: str) -> list[str]:
    """The ids of the processes whose command line holds `argument`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if argument in cmdline.read_text(errors="replace"):
                found.append(cmdline.parent.name)
    return found


def test_four_students_on_two_replicas_stay_sticky_and_survive_a_stopped_replica(tiny_pair_dirs):
    from playwright.sync_api import sync_playwright

    load_test = load_test_module()
    log_dir = ARTIFACTS / "serve-class"
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0", "SPECDEC_ALLOWED_MODELS": ""}
    with serve_class(env, log_dir) as (launcher, base, pids), sync_playwright() as playwright:
        assert sorted(pids) == ["r1", "r2"]
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        students = [open_student(browser, base, number) for number in range(STUDENTS)]
        for number in range(1, CLICKS + 1):
            for page, _ in students:
                click_step(page, number, load_test)
        assert [int(metric(page, "Rounds")) for page, _ in students] == [CLICKS] * STUDENTS

        # Each browser saw one replica in every reply's header; together they saw both.
        homes = []
        for _, replicas in students:
            assert len(set(replicas)) == 1 and replicas[0] in pids, replicas
            homes.append(replicas[0])
        assert set(homes) == {"r1", "r2"}, homes

        # A download: the file is made in the replica that holds the session, fetched through HAProxy.
        first, replicas = students[0]
        with first.expect_download() as download:
            first.get_by_role("button", name="Download trace (JSON)").click()
        assert len(json.loads(Path(download.value.path()).read_text())["rounds"]) == CLICKS
        assert "/media/" in download.value.url and set(replicas) == {homes[0]}

        # Kill the first student's replica mid-lesson.
        victim = homes[0]
        stranded = [page for (page, _), home in zip(students, homes, strict=True) if home == victim]
        others = [page for (page, _), home in zip(students, homes, strict=True) if home != victim]
        for page in stranded:
            page.evaluate(WATCH_CONNECTION)
        lines_before = len((log_dir / "haproxy.log").read_text().splitlines())
        os.killpg(pids[victim], signal.SIGKILL)
        for page in others:  # the other replica's students go on stepping
            for number in range(CLICKS + 1, CLICKS + 3):
                click_step(page, number, load_test)
            assert int(metric(page, "Rounds")) == CLICKS + 2
        for page in stranded:  # "connecting", then a fresh page from the other replica: Step works
            page.wait_for_function("() => window.seenStates.some(s => /connecting/i.test(s))")
            page.get_by_text("Press Step to run the first round").wait_for()
            wait_idle(page)
            assert metric(page, "Rounds") == "0"
            click_step(page, 1, load_test)
            assert metric(page, "Rounds") == "1"
            assert page.locator('[data-testid="stException"]').count() == 0
            assert "Traceback" not in page.locator("body").inner_text()
        first.screenshot(path=str(log_dir / "after-failover.png"))
        browser.close()

        # HAProxy's log: before the kill, every request of a student (its websocket included) went to
        # its home replica; after it, the stranded students' requests went to the other one.
        lines = (log_dir / "haproxy.log").read_text().splitlines()
        before, after = log_servers(lines[:lines_before]), log_servers(lines[lines_before:])
        for number, home in enumerate(homes):
            served = before[str(number)]
            assert {replica for replica, _, _ in served} == {home}, served
            assert ("101", "GET /_stcore/stream HTTP/1.1") in {(status, req) for _, status, req in served}
            if home == victim:
                assert {replica for replica, _, _ in after[str(number)]} == {"r1", "r2"} - {victim}
            else:
                assert {replica for replica, _, _ in after[str(number)]} <= {home}
        assert any("/media/" in request for _, _, request in before["0"])

        # Ctrl-C: the launcher says so, exits 0, and leaves no process behind.
        os.killpg(launcher.pid, signal.SIGINT)
        assert launcher.wait(timeout=30) == 0
        text = (log_dir / "launcher.out").read_text()
        assert f"replica {victim} stopped" in text and "stopping" in text
        assert all(gone(pid) for pid in pids.values())
        assert running_with(str(log_dir / "haproxy.cfg")) == []
    for name in pids:
        log = (log_dir / f"{name}.log").read_text(errors="replace")
        assert load_test.tracebacks(log) == [], f"{name}: {log[-2000:]}"
