"""What a process timed is kept per machine and model (specdec/kernels/kept_timings.py): the next
process reads it, a changed key times afresh, a busy timing is not kept, --retime replaces it."""

import copy
import json
import os

import pytest
import torch

from specdec.kernels import choice, kept_timings


@pytest.fixture
def timings(tmp_path, monkeypatch):
    """An empty store, nothing chosen in this process, a quiet machine, a log of what was timed."""
    monkeypatch.setenv("SPECDEC_TIMINGS", str(tmp_path / "kept"))
    monkeypatch.delenv("SPECDEC_RETIME", raising=False)
    monkeypatch.setattr(choice, "_CHOSEN", {})
    monkeypatch.setattr(kept_timings, "RECORDS", [])
    monkeypatch.setattr(kept_timings, "others_cores", lambda before: 0.0)  # the other test worker
    return tmp_path / "kept"


def new_process(monkeypatch):
    """What a fresh process starts with: nothing chosen, no records (the disk is left as it is)."""
    monkeypatch.setattr(choice, "_CHOSEN", {})
    monkeypatch.setattr(kept_timings, "RECORDS", [])


def ask(model, answer, calls: list):
    def decide():
        calls.append(answer)
        return answer

    return choice.once("layout", model, decide)


def test_a_second_process_reads_what_the_first_timed(tiny_target, timings, monkeypatch):
    calls = []
    assert ask(tiny_target, "packed", calls) == "packed" and calls == ["packed"]
    assert [r.source for r in kept_timings.RECORDS] == [kept_timings.TIMED_NOW]
    new_process(monkeypatch)
    assert ask(tiny_target, "rows", calls) == "packed"  # read, not timed: decide is not called
    assert calls == ["packed"]
    assert [r.source for r in kept_timings.RECORDS] == [kept_timings.READ]
    assert kept_timings.summary().startswith("read from the cache (timed 20")
    # Pass costs come back as the tuple they were.
    choice.once("pass costs", tiny_target, lambda: (1.0, 1.2))
    new_process(monkeypatch)
    assert choice.once("pass costs", tiny_target, lambda: (9.0,)) == (1.0, 1.2)


@pytest.mark.parametrize("change", ["cpu", "torch", "cores", "kernels"])
def test_a_changed_machine_key_times_afresh(tiny_target, timings, monkeypatch, change):
    calls = []
    ask(tiny_target, "packed", calls)
    new_process(monkeypatch)
    if change == "cpu":
        monkeypatch.setattr(kept_timings, "_cpu", lambda: ("Another CPU", "fpu sse avx2"))
    elif change == "torch":
        monkeypatch.setattr(torch, "__version__", "9.9.9")
    elif change == "cores":
        monkeypatch.setattr(os, "cpu_count", lambda: 64)
    else:
        monkeypatch.setattr(kept_timings, "_kernels_version", lambda: "another")
    assert ask(tiny_target, "rows", calls) == "rows" and calls == ["packed", "rows"]
    assert len(list(timings.glob("*.json"))) == 2  # each machine keeps its own entry


def test_another_model_of_the_same_shape_times_afresh(tiny_target, timings, monkeypatch):
    calls = []
    ask(tiny_target, "packed", calls)
    other = copy.deepcopy(tiny_target)
    with torch.no_grad():
        next(other.parameters()).mul_(2)  # other weights, the same config and dtype
    new_process(monkeypatch)
    assert ask(other, "rows", calls) == "rows" and calls == ["packed", "rows"]
    assert kept_timings.model_key(other) != kept_timings.model_key(tiny_target)


def test_a_timing_on_a_busy_machine_is_used_but_not_kept(tiny_target, timings, monkeypatch):
    monkeypatch.setattr(kept_timings, "others_cores", lambda before: 1.0)  # another process on a core
    calls = []
    assert ask(tiny_target, "packed", calls) == "packed"
    assert [r.source for r in kept_timings.RECORDS] == [kept_timings.NOT_KEPT]
    assert "not kept" in kept_timings.summary()
    assert not list(timings.glob("*.json"))
    monkeypatch.setattr(kept_timings, "others_cores", lambda before: 0.0)
    new_process(monkeypatch)
    assert ask(tiny_target, "rows", calls) == "rows" and calls == ["packed", "rows"]  # timed again


def test_other_processes_cpu_is_measured_not_this_ones():
    before = kept_timings.cpu_seconds()
    deadline = before[0] + 0.3
    while kept_timings.cpu_seconds()[0] < deadline:  # this process busy: not counted as another's
        pass
    assert 0.0 <= kept_timings.others_cores(before) < 2.5


def test_retime_times_afresh_and_replaces_what_was_kept(tiny_target, timings, monkeypatch):
    calls = []
    ask(tiny_target, "packed", calls)
    new_process(monkeypatch)
    monkeypatch.setenv("SPECDEC_RETIME", "1")
    assert ask(tiny_target, "rows", calls) == "rows"
    monkeypatch.delenv("SPECDEC_RETIME")
    new_process(monkeypatch)
    assert ask(tiny_target, "columns", calls) == "rows" and calls == ["packed", "rows"]


def test_a_damaged_store_is_timed_afresh_and_forget_drops_it(tiny_target, timings, monkeypatch):
    calls = []
    ask(tiny_target, "packed", calls)
    [kept] = timings.glob("*.json")
    kept.write_text("{not json")
    new_process(monkeypatch)
    assert ask(tiny_target, "rows", calls) == "rows"
    assert json.loads(kept.read_text())["machine"] == kept_timings.machine_key()
    kept_timings.forget()
    new_process(monkeypatch)
    assert ask(tiny_target, "columns", calls) == "columns" and calls == ["packed", "rows", "columns"]


def test_a_loaded_model_reads_its_layout_and_pass_costs_back(tiny_pair_dirs, timings, monkeypatch):
    """The real path: load_model times the layout and pass costs once, a second process reads both."""
    from specdec.models.loading import load_model

    monkeypatch.delenv("SPECDEC_PASS_COSTS", raising=False)
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    first = load_model(tiny_pair_dirs["target"])
    costs = first.pass_costs
    assert {r.source for r in kept_timings.RECORDS} == {kept_timings.TIMED_NOW}
    new_process(monkeypatch)
    monkeypatch.setattr(choice, "_pass_seconds", lambda *_, **__: pytest.fail("timed again"))
    second = load_model(tiny_pair_dirs["target"])
    assert second.pass_costs == costs
    assert {r.source for r in kept_timings.RECORDS} == {kept_timings.READ}


def test_a_load_time_is_kept_for_the_next_start_estimate(timings):
    assert kept_timings.load_seconds("target drafter") is None
    kept_timings.note_load_seconds("target drafter", 3.14)
    assert kept_timings.load_seconds("target drafter") == 3.1
    assert kept_timings.load_seconds("target other") is None


def test_the_kernels_hash_follows_their_code_not_their_comments(tmp_path, monkeypatch):
    """A changed comment or docstring keeps every machine's timings; a changed line of code does not."""
    from specdec.kernels import kept_timings

    kernel = tmp_path / "matmul.py"
    monkeypatch.setattr(kept_timings, "KERNELS", tmp_path)
    version = kept_timings._kernels_version.__wrapped__

    kernel.write_text('"""Rows or columns."""\n\ndef cost(n):\n    return 2 * n  # measured\n')
    first = version()
    kernel.write_text('"""Rows, columns or packed."""\n\ndef cost(n):\n    # why: the pass\n'
                      '    return 2 * n\n')
    assert version() == first
    kernel.write_text('"""Rows or columns."""\n\ndef cost(n):\n    return 3 * n  # measured\n')
    assert version() != first
