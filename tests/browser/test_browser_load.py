"""A small classroom in CI: scripts/load_test.py drives three real browser sessions at once against
the app with the tiny pair. Asserts that every session shows exactly as many rounds as it clicked
and that the server logged no traceback; the latencies are printed, never asserted."""

import asyncio
from pathlib import Path

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, SERVER_LOG, load_test_module, streamlit_server

pytest.importorskip("playwright.async_api")
pytestmark = [
    pytest.mark.alone,  # three sessions' latencies on one server: the machine to itself
    pytest.mark.slow,  # a real server and real browsers
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]


def test_three_sessions_stepping_at_once_get_one_round_per_click(tiny_pair_dirs):
    load_test = load_test_module()
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0", "SPECDEC_ALLOWED_MODELS": ""}
    with streamlit_server(env) as base:
        results, _ = asyncio.run(load_test.run_load(base, 3, 3, {"prompt": "def add(a, b):", "seed": "0"},
                                                             failure_shots=ARTIFACTS))
    text, ok = load_test.report(results, SERVER_LOG.read_text(errors="replace"))
    print(text)
    assert [(r.clicks, r.rounds, r.error) for r in results] == [(3, 3, None)] * 3, text
    assert "0 traceback(s)" in text and ok


def test_the_report_finds_tracebacks_and_mismatches():
    load_test = load_test_module()
    log = "started\nTraceback (most recent call last):\n  File \"x.py\", line 1\nAttributeError: boom\nok\n"
    assert load_test.tracebacks(log) == ["AttributeError: boom"]
    good = load_test.SessionResult(clicks=2, rounds=2, latencies=[0.1, 0.3])
    extra = load_test.SessionResult(clicks=2, rounds=3, latencies=[0.2, 0.2])
    text, ok = load_test.report([good, extra], log)
    assert not ok and "MISMATCH" in text and "1 traceback(s)" in text
    assert "median 0.20 s" in text


def test_its_browsers_are_its_own_descendants_and_the_table_row_holds_the_figures():
    load_test = load_test_module()
    # 1 is this script, 2 its Playwright driver, 3-4 the driver's Chromium; 5 someone else's Chromium
    parents = {2: 1, 3: 2, 4: 3, 5: 9, 9: 0}
    assert load_test.descendants(1, parents) == {2, 3, 4}
    assert load_test.cpu_seconds(None)["server"] == 0.0  # no server named, none counted
    results = [load_test.SessionResult(clicks=3, rounds=3, latencies=[0.1, 0.2, 0.4])]
    row = load_test.table_row(1, results, {"browsers": 210.4, "server": 99.6}, 0, (0.5, 1.25))
    assert row == "| 1 | 3 | 0.20 s / 0.40 s / 0.40 s | 210 ms / 100 ms | 3 of 3 | 0 | 0.50 / 1.25 |"
    assert row.count("|") == load_test.TABLE_HEADER.splitlines()[0].count("|")
