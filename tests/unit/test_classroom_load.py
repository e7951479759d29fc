"""A room answering at once: 50 students through the store's answer call, the one the page makes (one
store per server process, shared by its sessions' threads), each answer counted exactly once."""

import random
import threading
import time

import pytest

from specdec.classroom.questions import Question
from specdec.classroom.store import ClassStore

STUDENTS = 50
GOAL_SECONDS = 10
CHOICE = Question("check", "Why?", options=("a", "b", "c", "d"))
SLIDERS = Question("code-vs-prose", "?", low=0, high=100, step=5, parts=("code", "prose"), unit="%")


def answer_all(stores: list[ClassStore], code: str, plan: dict[str, tuple], repeats: int) -> float:
    """Every browser answers `repeats` times (a double click, a replayed request), all at once, each
    through one of `stores` in turn (replicas sharing one database); the seconds it took."""
    errors, start = [], threading.Barrier(len(plan))

    def student(index: int, browser: str, values: tuple) -> None:
        start.wait()
        store = stores[index % len(stores)]
        for _ in range(repeats):
            try:
                store.answer(code, values[0], browser, values[1:], nickname=f"s{index}")
            except Exception as error:  # noqa: BLE001 - counted, and the test fails on any
                errors.append(repr(error))

    threads = [threading.Thread(target=student, args=(i, b, v)) for i, (b, v) in enumerate(plan.items())]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    return time.perf_counter() - began


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 2])
def test_fifty_students_answer_at_once_each_counted_once(tmp_path, replicas):
    url = f"sqlite:///{tmp_path / 'class.sqlite'}"
    stores = [ClassStore(url) for _ in range(replicas)]
    invite = stores[0].open_class()
    stores[-1].open_question(invite.code, invite.key, CHOICE)
    stores[0].open_question(invite.code, invite.key, SLIDERS)
    rng = random.Random(7)
    choices = {f"browser-{i:04d}": ("check", float(rng.randrange(4))) for i in range(STUDENTS)}
    sliders = {f"browser-{i:04d}": ("code-vs-prose", float(rng.randrange(0, 101, 5)), 40.0)
               for i in range(STUDENTS)}
    seconds = answer_all(stores, invite.code, choices, repeats=2)
    seconds += answer_all(stores, invite.code, sliders, repeats=1)
    assert seconds < GOAL_SECONDS, f"{STUDENTS} students took {seconds:.1f} s"
    read = time.perf_counter()
    result = stores[-1].tally(invite.code, "check")  # what the instructor's panel reads each poll
    read = time.perf_counter() - read
    expected = [sum(v[1] == option for v in choices.values()) for option in range(4)]
    assert result.count == STUDENTS and list(result.per_option) == expected
    sliders_result = stores[0].tally(invite.code, "code-vs-prose")
    assert sliders_result.count == STUDENTS
    assert sorted(sliders_result.values[0]) == sorted(v[1] for v in sliders.values())
    assert read < 2, f"a tally took {read:.2f} s to read"
    print(f"\n{replicas} store(s): {3 * STUDENTS} answers from {STUDENTS} threads in {seconds:.2f} s; "
          f"a tally read in {1000 * read:.1f} ms")


@pytest.mark.slow
def test_answers_racing_a_close_are_kept_or_refused_never_half(tmp_path):
    """Students answering while the instructor closes: each answer is in the tally or was refused."""
    store = ClassStore(f"sqlite:///{tmp_path / 'class.sqlite'}")
    invite = store.open_class()
    store.open_question(invite.code, invite.key, CHOICE)
    kept, refused, start = [], [], threading.Barrier(STUDENTS + 1)

    def student(i: int) -> None:
        start.wait()
        try:
            store.answer(invite.code, "check", f"browser-{i:04d}", (1.0,))
            kept.append(i)
        except Exception as error:  # noqa: BLE001
            refused.append(str(error))

    threads = [threading.Thread(target=student, args=(i,)) for i in range(STUDENTS)]
    for thread in threads:
        thread.start()
    start.wait()
    store.close_question(invite.code, invite.key, "check")
    for thread in threads:
        thread.join()
    assert set(refused) <= {"this question is closed: answers are no longer taken"}
    assert store.tally(invite.code, "check").count == len(kept) and len(kept) + len(refused) == STUDENTS
