"""Student mode in a real browser: a whole run answered with the mouse alone, from an instructor's link.

As a test it uses the tiny pair. As a script it takes the screenshots people look at, with the
bundled pair: a question, a reveal with right and wrong answers, the score after 5 rounds, the cache
strip after a rejection and after a bonus, the timeline after 10 rounds (test-artifacts/student-*.png):
    PYTHONPATH=.:scripts:tests/support python tests/browser/test_browser_student.py
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    browser_page,
    interesting_rounds,
    metric,
    set_animation,
    show_stage,
    streamlit_server,
    wait_idle,
)

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]


def open_link(page, base: str, params: dict[str, str]) -> None:
    page.goto(f"{base}/rounds?{urlencode(params)}")
    page.get_by_role("button", name=re.compile("Step")).wait_for()
    wait_idle(page)


def step(page) -> bool:
    """Click Step; True if the round asks a question (a round with no drafts has none)."""
    before = int(metric(page, "Rounds"))
    page.get_by_role("button", name=re.compile("Step")).click()
    page.get_by_text(re.compile(rf"^Round {before + 1} of")).wait_for()
    wait_idle(page)
    return page.get_by_text("Your turn.").count() > 0


def answer(page, tick: list[int] | None = None) -> None:
    """Tick the drafts numbered in `tick` (1-based) with the mouse, then Reveal."""
    for number in tick or []:
        page.get_by_role("button", name=re.compile(rf"^{number} · ")).click()
        wait_idle(page)
    page.get_by_role("button", name="Reveal", exact=True).click()
    page.get_by_text(re.compile(r"of \d+ drafts judged right")).wait_for()
    wait_idle(page)


def step_disabled(page) -> bool:
    return page.get_by_role("button", name=re.compile("Step")).is_disabled()


def test_a_whole_run_in_student_mode_with_the_mouse_alone(tiny_pair_dirs):
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    link = {"prompt": "def add(a, b):", "student": "1", "question": "tick", "hint": "p", "gamma": "3",
            "seed": "2", "max_new_tokens": "12"}
    with streamlit_server(env) as base, browser_page() as page:
        open_link(page, base, link)
        set_animation(page, False)
        asked = 0
        while not step_disabled(page):
            if step(page):
                assert step_disabled(page)  # no skipping the question
                answer(page, tick=[1])
                asked += 1
        page.screenshot(path=ARTIFACTS / "tiny-student-finished.png", full_page=True)
        assert asked >= 1 and metric(page, "Rounds answered") == str(asked)
        assert page.get_by_text("generation finished").count() == 1
        assert "student=True" in page.url and "question=tick" in page.url  # the link carries the mode


if __name__ == "__main__":  # screenshots for people to look at, with the bundled pair
    from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET

    ARTIFACTS.mkdir(exist_ok=True)
    params = {"prompt": "Write a Python function that checks whether a string is a palindrome.",
              "gamma": "4", "seed": "0", "temperature": "0.7", "drafter": BUNDLED_DRAFT}
    wanted = interesting_rounds(BUNDLED_TARGET, BUNDLED_DRAFT, params, chat=True)
    print("rounds worth a picture:", wanted)
    env = {"SPECDEC_TARGET": BUNDLED_TARGET, "SPECDEC_DRAFTER": BUNDLED_DRAFT, "SPECDEC_CHAT": "1"}
    with streamlit_server(env, timeout=180) as base, browser_page(height=1500) as page:
        open_link(page, base, params | {"student": "1", "question": "tick", "hint": "p"})
        set_animation(page, False)
        shots, score_shot = set(), False
        for index in range(10):
            asks = step(page)
            if asks:
                if "question" not in shots:
                    page.screenshot(path=ARTIFACTS / "student-question.png", full_page=True)
                    shots.add("question")
                if index == wanted.get("partial"):  # tick them all: the kept right, the rejected wrong
                    drafts = page.get_by_role("button", name=re.compile(r"^\d+ · ")).count()
                    answer(page, tick=list(range(1, drafts + 1)))
                    page.screenshot(path=ARTIFACTS / "student-reveal.png", full_page=True)
                    shots.add("reveal")
                else:
                    answer(page, tick=[1])
            for kind in ("rejection", "bonus"):
                if index == wanted.get(kind):
                    show_stage(page, "5 · Output")
                    page.screenshot(path=ARTIFACTS / f"student-cache-after-{kind}.png", full_page=True)
                    shots.add(f"cache-{kind}")
            if index == 4:
                page.get_by_text(re.compile(r"^Your score: ")).scroll_into_view_if_needed()
                page.screenshot(path=ARTIFACTS / "student-score-after-5.png", full_page=True)
                score_shot = True
        show_stage(page, "5 · Output")
        page.locator('[data-testid="stVegaLiteChart"]').first.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=ARTIFACTS / "student-timeline-after-10.png", full_page=True)
        print("taken:", sorted(shots), "score:", score_shot)
