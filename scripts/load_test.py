"""A classroom against one server: N real browser sessions step through rounds at the same time.

    .venv/bin/python scripts/load_test.py --url http://localhost:8501 --sessions 8 --clicks 5 \
        --server-log server.log

Each session opens the round view (animation off); once all are open, each clicks Step `--clicks`
times, each click as soon as the previous round is shown and the page is idle, and times click ->
round shown on the page's own clock. It prints the
latency per click (median, p95, max), rounds against clicks per session, and every traceback in the
server's log (the server's stdout and stderr, if given). Exit status 1 if a session's rounds differ
from its clicks or the log holds a traceback. No timing goal is asserted here: the numbers are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PROMPT = "Write a Python function that checks whether a string is a palindrome."
ROUND_SHOWN_TIMEOUT_MS = 120_000
# Click Step and time, on the page's own clock, until the heading of round `number` is in the page:
# what a student waits for, without the test driver's own overhead in the number.
CLICK_AND_TIME = """(number) => new Promise((resolve, reject) => {
    const step = [...document.querySelectorAll('button')].find(b => b.innerText.includes('Step'));
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
                      ) -> SessionResult:  # fmt: skip
    """Open the round view, then (once every session is open, if `ready` is given) click Step."""
    result = SessionResult()
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(ROUND_SHOWN_TIMEOUT_MS)
    try:
        await page.goto(f"{url}/rounds?{urlencode(params)}")
        step = page.get_by_role("button", name=re.compile("Step"))
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
        await page.get_by_role("button", name=re.compile("Step")).wait_for()
        await _idle(page)
        return time.perf_counter() - start
    finally:
        await page.close()


async def run_load(url: str, sessions: int, clicks: int, params: dict[str, str],
                   long_prompt_chars: int = 0, cpu_marks: list | None = None,
                   server_pid: int | None = None) -> tuple[list[SessionResult], float | None]:  # fmt: skip
    """-> (each stepping session's result, seconds the long-prompt session took to open, if any).
    `cpu_marks` gets the CPU times (cpu_seconds) when the stepping starts and when it ends."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ready = asyncio.Barrier(sessions)
            done = asyncio.Barrier(sessions)
            steppers = [run_session(browser, url, clicks, params, ready, cpu_marks, server_pid, done)
                        for _ in range(sessions)]  # fmt: skip
            if not long_prompt_chars:
                return list(await asyncio.gather(*steppers)), None
            long_one = asyncio.create_task(open_long_prompt(browser, url, params, long_prompt_chars))
            await asyncio.sleep(2.0)  # its prompt is being read when the others start stepping
            results = await asyncio.gather(*steppers)
            return list(results), await long_one
        finally:
            await browser.close()


def cpu_seconds(server_pid: int | list[int] | None) -> dict[str, float]:
    """CPU time used so far by every Chromium process and by the server (Linux /proc), in seconds.
    Several server ids (replicas behind a balancer, scripts/serve_class.py) count together."""
    clock = os.sysconf("SC_CLK_TCK")
    servers = {server_pid} if isinstance(server_pid, int) else set(server_pid or ())
    used = {"browsers": 0.0, "server": 0.0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / clock  # utime + stime
        if int(entry.name) in servers:
            used["server"] += seconds
        elif "chrom" in name.lower():
            used["browsers"] += seconds
    return used


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
                     f"({len(latencies)} clicks)")  # fmt: skip
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8501")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--clicks", type=int, default=5)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--temperature", type=float,
                        help="open the round view at this temperature (default: the app's own)")  # fmt: skip
    parser.add_argument("--server-log", type=Path, help="the server's output, searched for tracebacks")
    parser.add_argument("--long-prompt-chars", type=int, default=0,
                        help="one more session opens a prompt this long while the others step")  # fmt: skip
    parser.add_argument("--server-pid", type=int, action="append",
                        help="the server's process id (repeat it for each replica): also print "
                             "its CPU time per click")  # fmt: skip
    args = parser.parse_args(argv)
    params = {"prompt": args.prompt, "seed": "0"}
    if args.temperature is not None:  # 0: greedy rounds, with second choices beside the drafts
        params["temperature"] = str(args.temperature)
    cpu_marks: list[dict[str, float]] = []
    results, long_seconds = asyncio.run(
        run_load(args.url.rstrip("/"), args.sessions, args.clicks, params, args.long_prompt_chars,
                 cpu_marks, args.server_pid)
    )
    log_text = args.server_log.read_text(errors="replace") if args.server_log else None
    text, ok = report(results, log_text)
    print(text)
    clicks = sum(r.clicks for r in results)
    if len(cpu_marks) == 2 and clicks:
        start, end = cpu_marks
        per_click = {who: 1000 * (end[who] - start[who]) / clicks for who in start}
        print(f"CPU per click while stepping: browsers {per_click['browsers']:.0f} ms"
              + (f", server {per_click['server']:.0f} ms" if args.server_pid else ""))
    if long_seconds is not None:
        print(f"meanwhile, a {args.long_prompt_chars:,}-character prompt was read in {long_seconds:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
