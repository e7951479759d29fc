"""Sharing one server: the fair model lock, shared links read with notices, the model allow-list,
remembered load failures. Pure pieces first; the app's use of them is in test_app.py."""

import threading
import time

import pytest

from specdec.errors import SpecDecError
from specdec.paths import BUNDLED_DRAFT, BUNDLED_EXIT, BUNDLED_HEAD, BUNDLED_TARGET
from specdec.serving.allowed_models import LoadFailures, PairShelf, allowed_models, check_allowed
from specdec.serving.lock import ModelLock, locked_steps
from specdec.views.links import read_link

DEFAULTS = {"gamma": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 64, "chat": True, "target": "t"}
RANGES = {"gamma": (1, 8), "temperature": (0.0, 2.0), "top_p": (0.05, 1.0), "max_new_tokens": (1, 256)}


def test_model_lock_serves_in_arrival_order_and_counts_who_is_ahead():
    lock, order, seen_ahead = ModelLock(), [], {}
    lock.acquire()  # held: the threads below queue up behind it

    def request(name: str) -> None:
        with lock.hold(on_wait=lambda ahead: seen_ahead.setdefault(name, ahead)):
            order.append(name)

    threads = []
    for name in ["a", "b", "c"]:
        threads.append(threading.Thread(target=request, args=(name,)))
        threads[-1].start()
        while lock.waiting() < len(threads) + 1:  # wait until this one has its ticket
            time.sleep(0.01)
    assert lock.waiting() == 4 and lock.locked()
    lock.release()
    for thread in threads:
        thread.join(timeout=10)
    assert order == ["a", "b", "c"]
    assert seen_ahead == {"a": 1, "b": 2, "c": 3}  # the holder, then each earlier request
    assert not lock.locked()


def test_locked_steps_take_the_lock_per_item_and_release_it_between():
    lock = ModelLock()
    held_during = []

    def items():
        for i in range(3):
            held_during.append(lock.locked())
            yield i

    results = []
    for item, seconds in locked_steps(items(), lock):
        results.append(item)
        assert not lock.locked() and seconds >= 0
    assert results == [0, 1, 2] and held_during == [True] * 3


def test_a_link_out_of_range_is_clamped_and_said():
    link = {"gamma": "-1", "top_p": "0", "max_new_tokens": "999999", "temperature": "1e9"}
    values, notices = read_link(link, DEFAULTS, RANGES, max_prompt_chars=100)
    assert values == {"gamma": 1, "top_p": 0.05, "max_new_tokens": 256, "temperature": 2.0}
    assert len(notices) == 4
    assert "gamma=-1 is out of range: using the smallest allowed, 1" in notices
    assert any("max_new_tokens=999999" in n and "largest allowed, 256" in n for n in notices)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "abc", ""])
def test_a_link_value_that_is_no_number_falls_back_to_the_default_and_is_said(text):
    values, notices = read_link({"temperature": text}, DEFAULTS, RANGES, max_prompt_chars=100)
    assert "temperature" not in values and len(notices) == 1 and "using the default, 1.0" in notices[0]


def test_a_link_with_good_values_changes_nothing_silently():
    link = {"gamma": "3", "chat": "0", "target": "x", "prompt": "hi"}
    values, notices = read_link(link, DEFAULTS, RANGES, 100)
    assert values == {"gamma": 3, "chat": False, "target": "x", "prompt": "hi"} and notices == []
    values, notices = read_link({"chat": "maybe"}, DEFAULTS, RANGES, 100)
    assert values == {} and "chat='maybe'" in notices[0]


def test_a_link_prompt_over_the_cap_is_cut_and_said():
    values, notices = read_link({"prompt": "x" * 150}, DEFAULTS, RANGES, max_prompt_chars=100)
    assert values["prompt"] == "x" * 100 and "150 characters" in notices[0]


def test_the_allow_list_by_default_is_the_bundled_models_and_the_server_start_models():
    allowed = allowed_models({"SPECDEC_TARGET": "/models/t", "SPECDEC_DRAFTER": "/models/d"})
    assert allowed == {BUNDLED_TARGET, BUNDLED_DRAFT, BUNDLED_HEAD, BUNDLED_EXIT, "ngram", "/models/t",
                       "/models/d"}
    check_allowed(BUNDLED_TARGET, "ngram", allowed)
    check_allowed(BUNDLED_TARGET, "ngram+" + BUNDLED_HEAD, allowed)
    with pytest.raises(SpecDecError, match="does not load the drafter 'gpt2'"):
        check_allowed(BUNDLED_TARGET, "gpt2", allowed)
    with pytest.raises(SpecDecError, match="does not load the target 'evil/model'"):
        check_allowed("evil/model", "ngram", allowed)


def test_the_allow_list_from_the_environment_replaces_the_default_and_star_allows_any():
    allowed = allowed_models({"SPECDEC_ALLOWED_MODELS": "org/a, org/b"})
    assert allowed == {"org/a", "org/b", "ngram", BUNDLED_TARGET}  # and what the server started with
    assert allowed_models({"SPECDEC_ALLOWED_MODELS": "*"}) is None
    check_allowed("anything", "else", None)


def test_load_failures_are_remembered_until_forgotten():
    failures = LoadFailures()
    assert failures.get(("t", "d")) is None
    failures.remember(("t", "d"), "could not load")
    assert failures.get(("t", "d")) == "could not load"
    failures.forget(("t", "d"))
    assert failures.get(("t", "d")) is None


def test_a_request_that_gives_up_waiting_never_blocks_the_ones_behind_it():
    """A page rerun interrupts a waiting Step (an exception from on_wait): its place is given up."""
    lock, order = ModelLock(), []
    lock.acquire()

    def impatient(ahead: int) -> None:
        raise RuntimeError("rerun")

    def request(name: str, on_wait=None) -> None:
        try:
            with lock.hold(on_wait=on_wait):
                order.append(name)
        except RuntimeError:
            order.append(f"{name} gave up")

    first = threading.Thread(target=request, args=("a", impatient))
    first.start()
    first.join(timeout=10)
    second = threading.Thread(target=request, args=("b",))
    second.start()
    while lock.waiting() < 2:
        time.sleep(0.01)
    lock.release()
    second.join(timeout=10)
    assert order == ["a gave up", "b"] and not lock.locked()


@pytest.mark.slow  # over a second on a 2-core machine: the whole suite runs it
def test_pair_shelf_loads_one_target_for_every_drafter(tiny_pair_dirs, monkeypatch):
    """A drafter switch loads only the drafter; switching back loads nothing; another target replaces
    the first (the server never holds two)."""
    from specdec.models import pair as pair_module
    from specdec.models.pair import LOOKUP_FIRST, NGRAM, ModelPair

    loads = []
    real_load_model = pair_module.load_model

    def counting_load_model(name, *args, **kwargs):
        loads.append(name)
        return real_load_model(name, *args, **kwargs)

    monkeypatch.setattr(pair_module, "load_model", counting_load_model)
    shelf = PairShelf(lambda target: ModelPair.load(target, NGRAM))
    target, draft, head = tiny_pair_dirs["target"], tiny_pair_dirs["draft"], tiny_pair_dirs["head"]

    with_draft = shelf.get(target, draft)
    assert loads == [target, draft]
    with_head = shelf.get(target, head)
    lookup_then_draft = shelf.get(target, LOOKUP_FIRST + draft)
    assert shelf.get(target, draft) is with_draft
    assert loads == [target, draft]  # the head is not a load_model load, and nothing loaded twice
    assert with_head.target is with_draft.target is lookup_then_draft.target
    assert lookup_then_draft.draft is with_draft.draft and with_head.head is not None
    assert shelf.target_names == [target]

    other = tiny_pair_dirs["padded_draft"]  # any other model folder serves as a second target
    assert shelf.get(other, NGRAM).target.name == other
    assert shelf.target_names == [other] and loads[-1] == other
    shelf.get(target, draft)  # back to the first target: loaded afresh, with its drafter
    assert loads[-2:] == [target, draft]
