"""A classroom against one server: N real browser sessions step through rounds at the same time.

    .venv/bin/python scripts/load_test.py --start --sessions 1 --clicks 10 --repeat 3
    .venv/bin/python scripts/load_test.py --url http://localhost:8501 --sessions 8 --clicks 5 \
        --server-log server.log --server-pid PID

`--start` starts the app itself on a free port (its log and process id are then known) and warms it
with one Step before timing, as a teacher does before class; `--url` drives a running app.
Each session opens the round view (animation off); once all are open, each clicks Step `--clicks`
times, each click as soon as the previous round is shown and the page is idle, and times click ->
round shown on the page's own clock. `--repeat` runs the whole class again, in fresh sessions, and
pools the clicks. It prints the latency per click (median, p95, max), rounds against clicks per session,
every traceback in the server's log, the CPU that this script's own browsers and the server used per
click, the load average before and after, and one table row with all of it. Exit status 1 if a session's
rounds differ from its clicks or the log holds a traceback. No timing goal is asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_app import CHROMIUM, CHROMIUM_ARGS, app_server  # noqa: E402 - this folder's helper

ROUND_SHOWN_TIMEOUT_MS = 120_000
FIRST_PAGE_TIMEOUT_MS = 600_000  # a cold server loads the models (on a busy machine, minutes)
# The Step button by its key: a name match ("Step") can meet a second button while a page loads.
STEP_BUTTON = ".st-key-b_step button"  # drawn twice with a shortcut (one copy hidden): take .first
# Click Step and time, on the page's own clock, until the heading of round `number` is in the page:
# what a student waits for, without the test driver's own overhead in the number.
CLICK_AND_TIME = """(number) => new Promise((resolve, reject) => {
    const step = document.querySelector('""" + STEP_BUTTON + """');
    const heading = new RegExp('^Round ' + number + ' of');
    const shown = () => [...document.querySelectorAll('h3')].some(h => heading.test(h.innerText));
    const start = performance.now();
    const watcher = new MutationObserver(() => {
        if (shown()) { watcher.disconnect(); resolve(performance.now() - start); }
    });
    watcher.observe(document.body, {subtree: true, childList: true, characterData: true});
    setTimeout(() => { watcher.disconnect(); reject(new Error('round ' + number + ' not shown')); },
               """ + str(ROUND_SHOWN_TIMEOUT_MS) + """);
    step.click();
})"""


@dataclass
class SessionResult:
    clicks: int = 0
    rounds: int = 0
    latencies: list[float] = field(default_factory=list)
    error: str | None = None


async def _metric(page, label: str) -> int:
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return int((await box.locator('[data-testid="stMetricValue"]').inner_text()).strip())


async def _idle(page) -> None:
    await page.wait_for_timeout(300)
    await page.wait_for_function(
        """() => !document.querySelector('[data-testid="stStatusWidget"]')
                 && !document.querySelector('[data-stale="true"]')""",
        timeout=ROUND_SHOWN_TIMEOUT_MS,
    )


async def run_session(browser, url: str, clicks: int, params: dict[str, str],
                      ready: asyncio.Barrier | None = None, cpu_marks: list | None = None,
                      server_pid: int | None = None, done: asyncio.Barrier | None = None,
                      failure_shots: Path | None = None) -> SessionResult:
    """Open the round view, then (once every session is open, if `ready` is given) click Step."""
    result = SessionResult()
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(ROUND_SHOWN_TIMEOUT_MS)
    try:
        await page.goto(f"{url}/rounds?{urlencode(params)}")
        step = page.locator(STEP_BUTTON).first
        await step.wait_for()
        await _idle(page)
        if await page.get_by_role("switch", name="Animate stages").is_checked():
            await page.get_by_text("Animate stages").click()
            await _idle(page)
        if ready is not None:
            if await ready.wait() == 0 and cpu_marks is not None:  # the class has its pages open
                cpu_marks.append(cpu_seconds(server_pid))  # now everyone steps at once
        for number in range(1, clicks + 1):
            await step.wait_for()
            result.clicks += 1
            result.latencies.append(await page.evaluate(CLICK_AND_TIME, number) / 1000)
            await _idle(page)
        await page.wait_for_timeout(1000)  # a stray extra round would show by now
        await _idle(page)
        result.rounds = await _metric(page, "Rounds")
        if done is not None and await done.wait() == 0 and cpu_marks is not None:
            cpu_marks.append(cpu_seconds(server_pid))  # every session has stepped; no page closed yet
    except Exception as error:  # noqa: BLE001 - reported per session, the others go on
        for barrier in (ready, done):
            if barrier is not None:
                await barrier.abort()  # a failed session must not keep the others waiting
        result.error = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        if failure_shots is not None:  # what the page showed when it failed, for the report
            failure_shots.mkdir(parents=True, exist_ok=True)
            shot = failure_shots / f"load-test-failed-{id(page)}.png"
            try:
                await page.screenshot(path=str(shot), full_page=True)
                result.error += f" (page: {shot})"
            except Exception:  # noqa: BLE001
                pass
        try:
            result.rounds = await _metric(page, "Rounds")
        except Exception:  # noqa: BLE001
            pass
    finally:
        await page.close()
    return result


async def open_long_prompt(browser, url: str, params: dict[str, str], chars: int) -> float:
    """One more session that opens the round view with a `chars`-character prompt (the server reads
    it in chunks while the others step); -> seconds until its Step button is ready."""
    page = await browser.new_page()
    page.set_default_timeout(600_000)
    text = ("def total(values):\n    return sum(v for v in values if v is not None)\n\n" * chars)[:chars]
    start = time.perf_counter()
    try:
        await page.goto(f"{url}/rounds?{urlencode(params | {'prompt': text})}")
        await page.locator(STEP_BUTTON).first.wait_for()
        await _idle(page)
        return time.perf_counter() - start
    finally:
        await page.close()


async def run_load(url: str, sessions: int, clicks: int, params: dict[str, str],
                   long_prompt_chars: int = 0, cpu_marks: list | None = None,
                   server_pid: int | None = None, failure_shots: Path | None = None,
                   ) -> tuple[list[SessionResult], float | None]:
    """-> (each stepping session's result, seconds the long-prompt session took to open, if any).
    `cpu_marks` gets the CPU times (cpu_seconds) when the stepping starts and when it ends; a session
    that fails leaves a screenshot of its page in `failure_shots`, if given."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ready = asyncio.Barrier(sessions)
            done = asyncio.Barrier(sessions)
            steppers = [run_session(browser, url, clicks, params, ready, cpu_marks, server_pid, done,
                                    failure_shots) for _ in range(sessions)]
            if not long_prompt_chars:
                return list(await asyncio.gather(*steppers)), None
            long_one = asyncio.create_task(open_long_prompt(browser, url, params, long_prompt_chars))
            await asyncio.sleep(2.0)  # its prompt is being read when the others start stepping
            results = await asyncio.gather(*steppers)
            return list(results), await long_one
        finally:
            await browser.close()


def cpu_seconds(server_pid: int | list[int] | None) -> dict[str, float]:
    """CPU time used so far by this script's own Chromium processes (its descendants; other browsers
    on the machine do not count) and by the server (Linux /proc), in seconds. Several server ids
    (replicas behind a balancer, scripts/serve_class.py) count together."""
    clock = os.sysconf("SC_CLK_TCK")
    servers = {server_pid} if isinstance(server_pid, int) else set(server_pid or ())
    processes = {}  # pid -> (parent, name, seconds)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        processes[int(entry.name)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / clock)
    ours = descendants(os.getpid(), {pid: parent for pid, (parent, _, _) in processes.items()})
    browsers = [pid for pid in ours if "chrom" in processes[pid][1].lower()]
    return {"browsers": sum(processes[pid][2] for pid in browsers),
            "server": sum(processes[pid][2] for pid in servers if pid in processes)}


def descendants(root: int, parents: dict[int, int]) -> set[int]:
    """Every process below `root` (children, their children, ...), from a pid -> parent map."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def tracebacks(log_text: str) -> list[str]:
    """The first line after each 'Traceback' in a server log, with the exception's last line."""
    found, lines = [], log_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            tail = next((later for later in lines[i + 1 :] if later and not later.startswith(" ")), "?")
            found.append(tail)
    return found


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(results: list[SessionResult], log_text: str | None) -> tuple[str, bool]:
    latencies = [s for r in results for s in r.latencies]
    lines = [f"sessions: {len(results)}, clicks per session: {max((r.clicks for r in results), default=0)}"]
    if latencies:
        lines.append(f"click -> round shown: median {statistics.median(latencies):.2f} s, "
                     f"p95 {percentile(latencies, 0.95):.2f} s, max {max(latencies):.2f} s "
                     f"({len(latencies)} clicks)")
    ok = True
    for number, r in enumerate(results, start=1):
        same = r.rounds == r.clicks and r.error is None
        ok &= same
        flags = ("" if same else "  <- MISMATCH") + (f"  error: {r.error}" if r.error else "")
        lines.append(f"session {number}: {r.clicks} clicks, {r.rounds} rounds{flags}")
    if log_text is not None:
        found = tracebacks(log_text)
        ok &= not found
        lines.append(f"server log: {len(found)} traceback(s)" + "".join(f"\n  {t}" for t in found))
    return "\n".join(lines), ok


def machine() -> str:
    """The CPU's model name, its widest vector instructions and this machine's core count."""
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.exists() else ""
    name = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    flags = set(flags[1].split()) if flags else set()
    vectors = "AVX-512" if "avx512f" in flags else "AVX2 only" if "avx2" in flags else ""
    parts = (name[1] if name else "CPU", vectors, f"{os.cpu_count()} cores")
    return ", ".join(part for part in parts if part)


def table_row(sessions: int, results: list[SessionResult], cpu_ms: dict[str, float] | None,
              tracebacks_found: int | None, load: tuple[float, float]) -> str:
    """One Markdown table row: the run's figures, for docs/LOG.md."""
    latencies = [s for r in results for s in r.latencies]
    timing = (f"{statistics.median(latencies):.2f} s / {percentile(latencies, 0.95):.2f} s / "
              f"{max(latencies):.2f} s") if latencies else "–"
    cpu = f"{cpu_ms['browsers']:.0f} ms / {cpu_ms['server']:.0f} ms" if cpu_ms else "–"
    rounds = f"{sum(r.rounds for r in results)} of {sum(r.clicks for r in results)}"
    cells = [f"{sessions}", f"{len(latencies)}", timing, cpu, rounds,
             "–" if tracebacks_found is None else str(tracebacks_found), f"{load[0]:.2f} / {load[1]:.2f}"]
    return "| " + " | ".join(cells) + " |"


TABLE_HEADER = ("| sessions | clicks | click → round shown, median / p95 / max "
                "| CPU per click: browsers / server | rounds = clicks | tracebacks "
                "| load average (1 min) before / after |\n"
                "| --- | --- | --- | --- | --- | --- | --- |")


async def warm_up(url: str, params: dict[str, str]) -> float:
    """One session opens the round view and Steps once before anything is timed (the models load, the
    first round allocates), as a teacher does before class -> seconds until its round was shown."""
    from playwright.async_api import async_playwright

    started = time.perf_counter()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            page.set_default_timeout(FIRST_PAGE_TIMEOUT_MS)
            await page.goto(f"{url}/rounds?{urlencode(params)}")
            await page.locator(STEP_BUTTON).first.wait_for()
            await _idle(page)
            await page.evaluate(CLICK_AND_TIME, 1)
        finally:
            await browser.close()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", default="http://localhost:8501", help="a running app (default %(default)s)")
    where.add_argument("--start", action="store_true",
                       help="start the app here on a free port, warm it with one Step, stop it at the end")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--clicks", type=int, default=5, help="Steps per session (the run ends at 64 "
                        "tokens by default: about 12 Steps on code)")
    parser.add_argument("--repeat", type=int, default=1, help="run the class this many times, in fresh "
                        "sessions, and pool the clicks")
    parser.add_argument("--prompt", help="the round view's prompt (default: the page's own)")
    parser.add_argument("--temperature", type=float,
                        help="open the round view at this temperature (default: the app's own)")
    parser.add_argument("--server-log", type=Path, help="the server's output, searched for tracebacks")
    parser.add_argument("--long-prompt-chars", type=int, default=0,
                        help="one more session opens a prompt this long while the others step")
    parser.add_argument("--server-pid", type=int, action="append",
                        help="the server's process id (repeat it for each replica): also print "
                             "its CPU time per click")
    args = parser.parse_args(argv)
    params = {"seed": "0"} | ({"prompt": args.prompt} if args.prompt else {})
    if args.temperature is not None:  # 0: greedy rounds
        params["temperature"] = str(args.temperature)
    with contextlib.ExitStack() as stack:
        url, server_pids, log_path = args.url.rstrip("/"), args.server_pid, args.server_log
        if args.start:
            app = stack.enter_context(app_server(Path(tempfile.gettempdir()) / "specdec-load-test.log"))
            url, server_pids, log_path = app.url, [app.pid], app.log
            warm = asyncio.run(warm_up(url, params))
            print(f"started the app at {url}; it showed its first round in {warm:.1f} s (not counted)")
        load_before = os.getloadavg()[0]
        results, used, long_seconds = [], {"browsers": 0.0, "server": 0.0}, None
        for _ in range(args.repeat):
            cpu_marks: list[dict[str, float]] = []
            run, long_seconds = asyncio.run(run_load(
                url, args.sessions, args.clicks, params, args.long_prompt_chars, cpu_marks, server_pids))
            results += run
            if len(cpu_marks) == 2:
                used = {who: used[who] + cpu_marks[1][who] - cpu_marks[0][who] for who in used}
        load_after = os.getloadavg()[0]
        log_text = log_path.read_text(errors="replace") if log_path else None
    text, ok = report(results, log_text)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {machine()}; round view: {urlencode(params)}, animation off; "
          f"{args.sessions} session(s) at once, {args.repeat} run(s)")
    print(text)
    clicks = sum(r.clicks for r in results)
    cpu_ms = {who: 1000 * seconds / clicks for who, seconds in used.items()} if clicks else None
    if cpu_ms:
        print(f"CPU per click while stepping: this script's browsers {cpu_ms['browsers']:.0f} ms"
              + (f", server {cpu_ms['server']:.0f} ms" if server_pids else ""))
    if long_seconds is not None:
        print(f"meanwhile, a {args.long_prompt_chars:,}-character prompt was read in {long_seconds:.1f} s")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after\n")
    found = None if log_text is None else len(tracebacks(log_text))
    print(TABLE_HEADER)
    cpu_row = cpu_ms if server_pids else None
    print(table_row(args.sessions, results, cpu_row, found, (load_before, load_after)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
