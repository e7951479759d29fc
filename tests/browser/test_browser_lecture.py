"""Round by round on a projector, in a real browser (the tiny pair): presenter mode at 1920×1080 and
1280×720, stepped with the keyboard's → and ← as a clicker sends them. After every Step of four rounds
the round's stage is on screen without scrolling, and no counter gives the round away before its test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_driver import ARTIFACTS, CHROMIUM, browser_page, metric, streamlit_server, wait_idle

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,  # a real server and a real browser
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
# Where the round's view ends: the counters come right after it in presenter mode.
STAGE_VIEW_END = """() => {
    const counters = document.querySelector('[data-testid="stMetric"]');
    const heading = [...document.querySelectorAll('h3')].find(h => /^Round \\d+ of/.test(h.innerText));
    const stage = document.querySelector('[role="radio"][aria-checked="true"]');
    return {end: counters ? counters.getBoundingClientRect().top : null,
            heading: heading ? heading.innerText : null,
            stage: stage ? stage.innerText.trim() : null, scrolled: window.scrollY, height: innerHeight};
}"""
COUNTERS = ("Rounds", "Target passes", "Tokens emitted", "Acceptance so far", "Tokens per pass")


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 720)], ids=lambda size: f"{size[0]}x{size[1]}")
def test_each_stage_of_four_rounds_is_in_view_and_counted_only_after_its_test(tiny_pair_dirs, size):
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    width, height = size
    with streamlit_server(env) as base, browser_page(height) as page:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{base}/rounds?presenter=1&gamma=4&seed=3")
        page.locator(".st-key-b_step button").first.wait_for()
        wait_idle(page)
        assert not page.locator('[data-testid="stSidebarNav"]').is_visible()  # the sidebar starts folded
        before = {name: metric(page, name) for name in COUNTERS}
        for press in range(20):  # four rounds, one stage per press (presenter mode's pace)
            page.keyboard.press("ArrowRight")
            wait_idle(page)
            view = page.evaluate(STAGE_VIEW_END)
            round_number, stage = press // 5 + 1, press % 5 + 1
            assert view["heading"].startswith(f"Round {round_number} of"), view
            assert view["stage"].startswith(str(stage)), view
            assert view["scrolled"] == 0 and view["end"] <= height, (press, view)  # all of it on screen
            shown = {name: metric(page, name) for name in COUNTERS}
            if stage < 3:  # drafted and scored, not yet tested: the counters stand as before the Step
                assert shown == before, (press, shown, before)
            elif stage == 5:
                assert int(shown["Rounds"]) == round_number
                before = shown
            if press == 16:
                page.screenshot(path=ARTIFACTS / f"lecture-{width}x{height}-round4-stage2.png")
        page.keyboard.press("ArrowLeft")  # ← goes back a stage
        wait_idle(page)
        assert page.evaluate(STAGE_VIEW_END)["stage"].startswith("4")


def test_a_students_question_is_in_view_and_settings_survive_an_empty_prompt(tiny_pair_dirs):
    """At 1440×900 a student's question sits under the drafts, on screen without scrolling; the
    playback speed and the animation switch survive an empty prompt and its restoring; presenter mode
    keeps the settings line of Live speed-up (a caption elsewhere)."""
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0"}
    with streamlit_server(env) as base, browser_page(900) as page:
        page.set_viewport_size({"width": 1440, "height": 900})
        page.goto(f"{base}/rounds?student=1&question=tick&hint=p&gamma=4&seed=3&prompt=def%20add(a,%20b):")
        page.locator(".st-key-b_step button").first.wait_for()
        wait_idle(page)
        assert "Play" not in page.locator('[data-testid="stAlert"]').first.inner_text()
        for _ in range(4):
            page.keyboard.press("ArrowRight")
            wait_idle(page)
            if page.get_by_text("Your turn.").count():
                break
        question = page.get_by_text("Your turn.").first
        box = question.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900, box  # in view, no scroll
        assert page.evaluate("() => window.scrollY") == 0

        # Playback settings: "relaxed", animation on (a lost setting fell back to "slow" and off); an
        # empty prompt stops the page; the prompt comes back.
        page.goto(f"{base}/rounds?gamma=4&seed=3&prompt=def%20add(a,%20b):")
        page.locator(".st-key-b_step button").first.wait_for()
        wait_idle(page)
        assert page.get_by_role("switch", name="Animate stages").is_checked()
        slider = page.locator(".st-key-w_speed").get_by_role("slider")
        slider.focus()
        page.keyboard.press("Home")
        page.keyboard.press("ArrowRight")  # slow, relaxed, normal: the middle one
        wait_idle(page)
        assert page.get_by_text("speed: relaxed").count() == 1
        prompt = page.get_by_label("Prompt (changing it starts a fresh run)")
        prompt.fill("")
        prompt.press("Control+Enter")
        page.get_by_text("the prompt is empty").first.wait_for()
        prompt.fill("def add(a, b):")
        prompt.press("Control+Enter")
        page.locator(".st-key-b_step button").first.wait_for()
        wait_idle(page)
        assert page.get_by_role("switch", name="Animate stages").is_checked()
        assert page.get_by_text("speed: relaxed").count() == 1

        page.goto(f"{base}/speedup?presenter=1")
        page.get_by_text("Drafter:").first.wait_for()
        assert page.get_by_text("Drafter:").first.is_visible()
