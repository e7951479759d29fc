"""A class answering together, in real browsers: one instructor page and ten student pages (each its
own browser context, so its own cookies) on the app served as a class is served. The instructor opens
the lesson's check question, the students answer (one twice, one after reloading its page), the
server is restarted half-way, and the projector's tally (count, bars, verdict) must equal the answers
sent, with no traceback anywhere."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from browser_driver import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    free_port,
    metric,
    streamlit_server,
    wait_idle,
)

from specdec.classroom.store import ClassStore
from specdec.views.class_questions import CHECK

pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.alone,  # times a tally's lag; ten browsers and two replicas: the machine to itself
    pytest.mark.slow,  # a server started twice and eleven browser pages
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium at /usr/bin/chromium"),
]
STUDENTS = 10
TALLY_SECONDS = 2  # the instructor's panel polls the store every 1.5 s
OUT = ARTIFACTS / "class-poll"


def new_page(browser, width: int = 1280, height: int = 900):
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(120_000)
    return page


def open_student(page, base: str, code: str) -> None:
    page.goto(f"{base}/?class={code}")
    page.get_by_text(CHECK.text).first.wait_for()


def send(page, option: int) -> None:
    """A student's answer: an option, then the form's button; its confirmation on the page."""
    chosen = f"{chr(65 + option)}. {CHECK.options[option]}"
    page.get_by_text(chosen, exact=True).click()
    page.get_by_role("radio", name=chosen, checked=True).wait_for()
    page.get_by_role("button", name=re.compile("Send my answer|Change my answer")).click()
    page.get_by_text(f"Your answer is in ({chosen})").wait_for()  # the panel's next poll reads it back


def instructor_count(page) -> int:
    return int(metric(page, "Answers in"))


def wait_for_count(page, count: int) -> float:
    """Seconds until the instructor's panel shows `count` answers, without any click on its page."""
    began = time.perf_counter()
    while instructor_count(page) != count:
        assert time.perf_counter() - began < 30, f"the tally stayed at {instructor_count(page)}"
        page.wait_for_timeout(100)
    return time.perf_counter() - began


def bar_counts(page) -> list[int]:
    """The numbers drawn on the projector's bars, top to bottom (one per option)."""
    chart = page.locator('[data-testid="stPlotlyChart"]').last
    chart.locator(".main-svg").first.wait_for()
    texts = chart.locator("g.point text").evaluate_all("texts => texts.map(t => t.textContent)")
    return [int(t) for t in texts]


def assert_clean(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.locator("body").inner_text()


def test_ten_students_answer_the_instructor_reveals_across_a_restart(tiny_pair_dirs, tmp_path):
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0", "SPECDEC_ALLOWED_MODELS": "", "SPECDEC_CLASS_DB": url}
    invite = ClassStore(url).open_class()  # as `python -m specdec class open` does
    choices = [(3 * i + 1) % 4 for i in range(STUDENTS)]
    figures = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        with streamlit_server(env, timeout=120) as base:
            teacher = new_page(browser, 1920, 1080)
            teacher.goto(f"{base}/?class={invite.code}&key={invite.key}&presenter=1")
            teacher.locator(".st-key-b_class_check_open button").click()
            teacher.get_by_text("Open: students are answering").wait_for()
            wait_idle(teacher)
            assert "key=" not in teacher.url and f"class={invite.code}" in teacher.url
            students = [new_page(browser) for _ in range(STUDENTS)]
            began = time.perf_counter()
            for page in students[: STUDENTS // 2]:
                open_student(page, base, invite.code)
            figures["first five pages opened (s)"] = round(time.perf_counter() - began, 2)
            began = time.perf_counter()
            for page, option in zip(students[: STUDENTS // 2], choices, strict=False):
                send(page, option)
            send(students[0], choices[0])  # sent twice: counted once
            students[1].reload()  # a reload is the same browser (its cookie): its answer is still one
            students[1].get_by_text(f"Your answer is in ({chr(65 + choices[1])}.").wait_for()
            send(students[1], choices[1])
            figures["first five answered, one twice and one after a reload (s)"] = round(
                time.perf_counter() - began, 2)
            figures["tally caught up (s)"] = round(wait_for_count(teacher, STUDENTS // 2), 2)
            assert_clean(teacher)
        # The server restarted: the class, its open question and the answers are all still there.
        with streamlit_server(env, timeout=120) as base:
            teacher.goto(f"{base}/?class={invite.code}&key={invite.key}&presenter=1")
            teacher.get_by_text("Open: students are answering").wait_for()
            assert instructor_count(teacher) == STUDENTS // 2
            began = time.perf_counter()
            for page in students[STUDENTS // 2 :]:
                open_student(page, base, invite.code)
            figures["last five pages opened (s)"] = round(time.perf_counter() - began, 2)
            began = time.perf_counter()
            for page, option in zip(students[STUDENTS // 2 :], choices[STUDENTS // 2 :], strict=True):
                send(page, option)
            figures["last five answered, one after another (s)"] = round(time.perf_counter() - began, 2)
            lag = wait_for_count(teacher, STUDENTS)
            figures["tally caught up after the last (s)"] = round(lag, 2)
            assert lag <= TALLY_SECONDS + 1  # one poll, plus the browser's own drawing
            teacher.locator(".st-key-b_class_check_close button").click()
            teacher.get_by_text("The room's answers").first.wait_for()
            wait_idle(teacher)
            expected = [choices.count(option) for option in range(len(CHECK.options))]
            assert bar_counts(teacher) == expected
            teacher.locator(".st-key-b_class_check_reveal button").click()
            right = expected[CHECK.correct[0]]
            teacher.get_by_text(f"{right} of {STUDENTS} chose it").wait_for()
            wait_idle(teacher)
            teacher.locator(".st-key-class_instructor_check").scroll_into_view_if_needed()
            teacher.screenshot(path=str(OUT / "instructor-revealed.png"))  # the projector, 1920x1080
            students[-1].get_by_text(f"{right} of {STUDENTS} chose it").wait_for()  # students see it too
            wait_idle(students[-1])
            students[-1].screenshot(path=str(OUT / "student-revealed.png"))
            for page in [teacher, *students[STUDENTS // 2 :]]:  # the first half's server is gone
                assert_clean(page)
            assert all("key=" not in page.url for page in students)
        browser.close()
    result = ClassStore(url).tally(invite.code, "check")
    assert result.count == STUDENTS and list(result.per_option) == expected
    (OUT / "figures.json").write_text(json.dumps(figures, indent=1))
    print(figures)


@contextlib.contextmanager
def two_replicas(env: dict[str, str], log_dir: Path):
    """scripts/serve_class.sh --replicas 2 behind HAProxy on loopback; -> (url, {replica: pid})."""
    port = free_port()
    out = open(log_dir / "launcher.out", "w+")  # noqa: SIM115 - closed below
    command = ["scripts/serve_class.sh", "--replicas", "2", "--port", str(port), "--address", "127.0.0.1",
               "--log-dir", str(log_dir)]
    launcher = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "Ctrl-C stops everything." not in (text := (log_dir / "launcher.out").read_text()):
            assert launcher.poll() is None and time.monotonic() < deadline, f"no banner:\n{text}"
            time.sleep(0.5)
        pids = {name: int(pid) for name, pid in re.findall(r"replica (r\d): \S+\s+pid (\d+)", text)}
        yield f"http://127.0.0.1:{port}", pids
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGINT)
            launcher.wait(timeout=30)
        out.close()


def test_two_replicas_one_tally_and_a_replica_killed_half_way(tiny_pair_dirs, tmp_path):
    """Answers through both replicas land in one tally; a replica killed half-way loses nothing:
    its students come back on the other replica, still in the class, their answers still counted."""
    from playwright.sync_api import sync_playwright

    log_dir = OUT / "replicas"
    log_dir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    env = {"SPECDEC_TARGET": tiny_pair_dirs["target"], "SPECDEC_DRAFTER": tiny_pair_dirs["draft"],
           "SPECDEC_CHAT": "0", "SPECDEC_ALLOWED_MODELS": "", "SPECDEC_CLASS_DB": url}
    store = ClassStore(url)
    invite = store.open_class()
    store.open_question(invite.code, invite.key, CHECK)  # as the instructor's Open does
    choices = [(i + 2) % 4 for i in range(STUDENTS)]
    with two_replicas(env, log_dir) as (base, pids), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        students, homes = [], []
        for _ in range(STUDENTS):
            page, seen = new_page(browser), []
            page.on("response", lambda reply, seen=seen: seen.append(reply.headers.get("x-specdec-replica")))
            open_student(page, base, invite.code)
            students.append(page)
            homes.append(next(r for r in seen if r))
        assert set(homes) == {"r1", "r2"}, homes
        for page, option in zip(students[: STUDENTS // 2], choices, strict=False):
            send(page, option)
        assert store.tally(invite.code, "check").count == STUDENTS // 2
        os.killpg(pids["r1"], signal.SIGKILL)
        for page, home in zip(students, homes, strict=True):
            if home == "r1":  # its student reloads: the page comes from r2, the link still in the class
                page.reload()
                # The surviving replica serves every student now, and may still be loading its models.
                page.get_by_text(CHECK.text).first.wait_for(timeout=180_000)
                assert f"class={invite.code}" in page.url
        for page, home, option in zip(students[: STUDENTS // 2], homes, choices, strict=False):
            if home == "r1":  # answered before the kill: the answer is still there (the same cookie)
                page.get_by_text(f"Your answer is in ({chr(65 + option)}.").wait_for()
        for page, option in zip(students[STUDENTS // 2 :], choices[STUDENTS // 2 :], strict=True):
            send(page, option)
        teacher = new_page(browser, 1920, 1080)
        teacher.goto(f"{base}/?class={invite.code}&key={invite.key}&presenter=1")
        wait_for_count(teacher, STUDENTS)
        for page in [teacher, *students]:
            assert_clean(page)
        browser.close()
    result = store.tally(invite.code, "check")
    assert result.count == STUDENTS
    assert list(result.per_option) == [choices.count(option) for option in range(len(CHECK.options))]
