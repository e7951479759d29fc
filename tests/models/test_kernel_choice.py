"""Which layout and precision a model gets at load, and what its passes cost: timed in turns, once per
process, and fixed by the environment (specdec/kernels/choice.py), with the timing faked where the
choice itself is tested."""

import copy
import itertools

import pytest
import torch

from specdec.kernels import choice, matmul

needs_int8 = pytest.mark.skipif(not matmul.int8_available(), reason="this torch has no int8 weight product")
needs_onednn = pytest.mark.skipif(not matmul.packed_available(), reason="this torch has no oneDNN")


@needs_int8
@pytest.mark.parametrize("int8_faster", [True, False])
def test_a_draft_keeps_int8_weights_only_where_they_draft_faster(tiny_target, monkeypatch, int8_faster,
                                                                 nothing_timed):
    model = copy.deepcopy(tiny_target)

    def fake_seconds(timed, **_):
        return 1.0 if (matmul.layout_of(timed) == matmul.INT8) == int8_faster else 2.0

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    kept = choice.faster_precision(model, int8=True)
    assert kept.dtype == torch.float32
    assert matmul.layout_of(kept) == (matmul.INT8 if int8_faster else matmul.COLUMNS)
    assert (kept is model) != int8_faster  # the int8 draft is a copy; the model was not changed
    assert matmul.layout_of(choice.faster_precision(copy.deepcopy(tiny_target))) != matmul.INT8  # not asked


def test_layout_choice_obeys_the_environment_and_spares_other_dtypes(tiny_target, monkeypatch):
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    assert choice.choose_layout(tiny_target) == matmul.COLUMNS == matmul.layout_of(tiny_target)
    monkeypatch.setenv("SPECDEC_MATMUL", "rows")
    assert choice.choose_layout(tiny_target) == matmul.ROWS == matmul.layout_of(tiny_target)
    if matmul.packed_available():
        for layout in (matmul.PACKED, "rows/packed@4"):
            monkeypatch.setenv("SPECDEC_MATMUL", layout)
            assert choice.choose_layout(tiny_target) == layout == matmul.layout_of(tiny_target)
        assert matmul.describe_layout("rows/packed@4") == "rows matmuls below 4 tokens, packed from 4"
    # int8 changes the numbers: never a target's layout, whatever the environment says
    for unknown in ("diagonal", "rows/diagonal@2", "rows/packed", "rows/rows@3", "rows/packed@1", "int8",
                    "rows/int8@2"):
        monkeypatch.setenv("SPECDEC_MATMUL", unknown)  # not a layout: timed instead
        matmul.set_layout(tiny_target, matmul.ROWS)
        assert choice.choose_layout(tiny_target) == matmul.layout_of(tiny_target) != unknown
    monkeypatch.delenv("SPECDEC_MATMUL")
    timed = choice.choose_layout(tiny_target)  # one layout, or one for one row and another for more
    assert timed in matmul.candidate_layouts() or set(timed.partition("@")[0].split("/")) <= set(
        matmul.candidate_layouts())
    half = copy.deepcopy(tiny_target).to(torch.float16)
    assert choice.choose_layout(half) == matmul.ROWS  # fp16 on a CPU is left alone
    matmul.set_layout(tiny_target, matmul.ROWS)



@pytest.mark.parametrize("bf16_faster", [True, False])
def test_a_draft_keeps_whichever_precision_runs_faster(tiny_target, monkeypatch, bf16_faster, nothing_timed):
    half = copy.deepcopy(tiny_target).to(torch.bfloat16)
    timed = []

    def fake_seconds(model, **_):
        timed.append(model.dtype)
        return 1.0 if (model.dtype == torch.bfloat16) == bf16_faster else 2.0

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    kept = choice.faster_precision(half)
    assert set(timed) == {torch.bfloat16, torch.float32}
    if bf16_faster:
        assert kept is half and matmul.layout_of(kept) == matmul.COLUMNS  # bf16 gets a layout too
    else:
        assert kept.dtype == torch.float32 and matmul.layout_of(kept) == matmul.COLUMNS
        assert half.dtype == torch.bfloat16  # the bf16 model itself was not converted in place


def test_a_second_load_keeps_the_first_choice_so_seeds_replay(tiny_target, monkeypatch, nothing_timed):
    """Timing is noisy: the same model loaded again in one process must get the same layout."""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    model = copy.deepcopy(tiny_target)
    faster = iter([matmul.COLUMNS, matmul.ROWS])  # the second timing would say the opposite

    def fake_seconds(timed, **_):
        return 1.0 if matmul.layout_of(timed) == current else 2.0

    current = next(faster)
    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    assert choice.choose_layout(model) == matmul.COLUMNS
    current = next(faster)
    again = copy.deepcopy(tiny_target)
    assert choice.choose_layout(again) == matmul.COLUMNS  # not timed again


@pytest.mark.parametrize("fastest", matmul.candidate_layouts())
def test_the_layout_timed_fastest_is_kept(tiny_target, monkeypatch, fastest, nothing_timed):
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    timed = []

    def fake_seconds(model, **_):
        timed.append(matmul.layout_of(model))
        return 1.0 if timed[-1] == fastest else 2.0

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    model = copy.deepcopy(tiny_target)
    assert choice.choose_layout(model) == fastest == matmul.layout_of(model)
    assert sorted(timed) == sorted(matmul.candidate_layouts() * 8 * 4)  # each at 1 to 8 tokens, 4 sweeps


@needs_onednn
def test_a_slow_moment_while_timing_does_not_decide_the_layout(tiny_target, monkeypatch, nothing_timed):
    """The machine busy during the first two passes timed: the candidates take turns and keep their
    fastest pass, so rows, truly the fastest, is kept. (Timed one after another, packed would win.)"""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    true_seconds = {matmul.ROWS: 1.0, matmul.COLUMNS: 1.5, matmul.PACKED: 1.2, matmul.MKL: 1.3}
    passes = itertools.count()

    def fake_seconds(model, **_):
        busy = next(passes) < 2
        return true_seconds[matmul.layout_of(model)] * (3.0 if busy else 1.0)

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    assert choice.choose_layout(copy.deepcopy(tiny_target)) == matmul.ROWS


@needs_onednn
@pytest.mark.parametrize(("few", "many", "many_from"), [("rows", "packed", 4), ("packed", "columns", 2),
                                                        ("rows", "packed", 5), ("packed", "packed", 2)])
def test_each_pass_size_gets_the_layout_timed_fastest_for_it(tiny_target, monkeypatch, few, many, many_from,
                                                             nothing_timed):
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)

    def fake_seconds(model, tokens=1, **_):
        fastest = many if tokens >= many_from else few
        return 1.0 if matmul.layout_of(model) == fastest else 2.0

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    model = copy.deepcopy(tiny_target)
    expected = few if few == many else f"{few}/{many}@{many_from}"
    assert choice.choose_layout(model) == expected == matmul.layout_of(model)


def layout_chosen_from(tiny_target, monkeypatch, seconds: dict[str, list[float]]) -> str:
    """The layout choose_layout keeps where a pass over n tokens takes seconds[layout][n - 1] (the
    test that calls it asks for `nothing_timed`)."""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(choice, "_pass_seconds",
                        lambda model, tokens=1, **_: seconds[matmul.layout_of(model)][tokens - 1])
    return choice.choose_layout(copy.deepcopy(tiny_target))


@needs_onednn
def test_verification_passes_get_the_layout_that_spends_least_over_them(tiny_target, monkeypatch,
                                                                       nothing_timed):
    """Packed a tenth faster over 2 to 4 tokens and level with rows at 5 (as with AVX2 kernels on the
    Intel Xeon): packed takes over from 2 tokens. Read off the 5-token pass alone, rows would stay."""
    seconds = {matmul.ROWS: [1.0, 1.7, 1.7, 1.7, 1.80, 1.9, 2.0, 2.1],
               matmul.PACKED: [1.3, 1.5, 1.5, 1.5, 1.81, 1.9, 2.0, 2.1],
               matmul.COLUMNS: [3.0] * 8, matmul.MKL: [3.0] * 8}
    assert layout_chosen_from(tiny_target, monkeypatch, seconds) == "rows/packed@2"


@needs_onednn
def test_the_longest_verification_passes_count_too(tiny_target, monkeypatch, nothing_timed):
    """Columns and packed level over 2 to 5 tokens, packed a tenth cheaper over 6 to 8 (as with AVX2
    kernels on the AMD EPYC with AVX-512): packed takes over from 5. Timed to 5 tokens only, columns
    would stay, and code's rounds, which often verify 7 tokens, would pay for it."""
    seconds = {matmul.COLUMNS: [1.0, 1.0, 1.3, 1.3, 1.56, 1.86, 1.98, 1.98],
               matmul.PACKED: [1.3, 1.3, 1.4, 1.4, 1.56, 1.65, 1.75, 1.75],
               matmul.ROWS: [3.0] * 8, matmul.MKL: [3.0] * 8}
    assert layout_chosen_from(tiny_target, monkeypatch, seconds) == "columns/packed@5"


def test_pass_costs_are_timed_per_size_relative_to_one_token_and_never_fall(tiny_target, monkeypatch,
                                                                            nothing_timed):
    monkeypatch.delenv("SPECDEC_PASS_COSTS", raising=False)
    sizes = []
    seconds = {1: [0.011, 0.010], 2: [0.016, 0.015], 3: [0.014, 0.014], 4: [0.030, 0.020]}

    def fake_seconds(model, tokens=1, **_):
        sizes.append(tokens)
        return seconds[tokens][sizes.count(tokens) - 1]

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    costs = choice.pass_costs(tiny_target, 4, sweeps=2)
    assert sizes == [1, 2, 3, 4] * 2  # the sizes take turns
    assert costs == pytest.approx((1.0, 1.5, 1.5, 2.0))  # each its fastest / one token's; 3 not below 2
    assert choice.pass_costs(tiny_target, 4, sweeps=2) == costs and len(sizes) == 8  # timed once


def test_pass_costs_really_timed_on_a_model_and_fixed_by_the_environment(tiny_target, monkeypatch,
                                                                         nothing_timed):
    monkeypatch.delenv("SPECDEC_PASS_COSTS", raising=False)
    costs = choice.pass_costs(tiny_target, 5)
    assert len(costs) == 5 and costs[0] == 1.0 and list(costs) == sorted(costs)
    monkeypatch.setenv("SPECDEC_PASS_COSTS", "1,1.5,1.55")
    assert choice.pass_costs(tiny_target, 5) == (1.0, 1.5, 1.55)
    for invalid in ("", "fast", "1,0.5", "0.5", "1,inf", "1,,2"):
        monkeypatch.setenv("SPECDEC_PASS_COSTS", invalid)
        assert choice.pass_costs(tiny_target, 5) == costs  # ignored: the timed ones


def test_pass_costs_are_not_timed_for_a_half_precision_model(tiny_target):
    assert choice.pass_costs(copy.deepcopy(tiny_target).half(), 5) == ()


@needs_int8
def test_draft_precisions_are_timed_in_turns_each_after_a_sweep_of_the_caches(tiny_target, monkeypatch,
                                                                              nothing_timed):
    timed = []

    def fake_seconds(model, sweeper=None, **_):
        timed.append((matmul.layout_of(model) == matmul.INT8, sweeper is not None))
        return 1.0

    monkeypatch.setattr(choice, "_pass_seconds", fake_seconds)
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    choice.faster_precision(copy.deepcopy(tiny_target), int8=True)
    assert all(swept for _, swept in timed)
    assert [int8 for int8, _ in timed] == [False, True] * (len(timed) // 2)  # fp32, int8, fp32, ...


def test_a_swept_pass_sweeps_the_caches_before_each_pass(tiny_target):
    sweeper = choice.cache_sweeper()
    assert sweeper.numel() * sweeper.element_size() == 64 << 20  # more than a CPU's caches hold
    choice._pass_seconds(tiny_target, repeats=3)
    choice._pass_seconds(tiny_target, repeats=3, sweeper=sweeper)
    assert torch.equal(sweeper, torch.full_like(sweeper, 4.0))  # the warm-up pass and the three timed ones
