"""The weight-on-the-left linear layers: the same numbers as nn.Linear, in whichever layout is picked."""

import copy
import itertools

import pytest
import torch
from torch import nn

from specdec.config import SamplingConfig
from specdec.core import matmul
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import ModelDrafter
from specdec.core.rounds import target_only_steps
from specdec.models.runs import _generator


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("bias", [False, True])
def test_column_linear_computes_what_linear_computes(rows, bias):
    layer = nn.Linear(48, 80, bias=bias)
    x = torch.randn(1, rows, 48)
    expected = layer(x)
    matmul.set_layout(layer, matmul.COLUMNS)
    assert isinstance(layer, matmul.ColumnLinear)
    got = layer(x)
    assert got.shape == expected.shape and got.is_contiguous()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_long_column_layer_multiplies_two_halves_of_its_inputs_over_three_rows_or_more():
    layer = nn.Linear(matmul.HALVES_FROM_INPUTS + 6, 40)
    matmul.set_layout(layer, matmul.COLUMNS)
    with torch.no_grad():
        for rows in (1, 2):
            x = torch.randn(rows, layer.in_features)
            torch.testing.assert_close(layer(x), nn.Linear.forward(layer, x), rtol=1e-5, atol=1e-5)
        assert layer not in matmul._REORDERED  # one or two rows multiply the whole weight
        x = torch.randn(4, layer.in_features)
        before = layer(x)
        first, second = matmul._REORDERED[layer][matmul.COLUMNS][1]
        assert first.is_contiguous() and torch.equal(torch.cat([first, second], dim=1), layer.weight)
        torch.testing.assert_close(before, nn.Linear.forward(layer, x), rtol=1e-5, atol=1e-5)
        layer.weight.mul_(2)  # changed in place: the halves must be made again
        torch.testing.assert_close(layer(x) - layer.bias, 2 * (before - layer.bias), rtol=1e-5, atol=1e-5)
    layer(x).sum().backward()  # with gradients on, the plain weight is used, so autograd works
    assert layer.weight.grad is not None
    matmul.set_layout(layer, matmul.ROWS)
    assert layer not in matmul._REORDERED


needs_onednn = pytest.mark.skipif(not matmul.packed_available(), reason="this torch has no oneDNN")
needs_mkl = pytest.mark.skipif(not matmul.mkl_available(), reason="this torch has no MKL")
bf16_math = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="no bf16 math")
REORDERED_LAYOUTS = [pytest.param(matmul.PACKED, marks=needs_onednn),
                     pytest.param(matmul.MKL, marks=needs_mkl)]


@pytest.mark.parametrize("layout", REORDERED_LAYOUTS)
@pytest.mark.parametrize("rows", [1, 2, 4, 5, 9, 17])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.bfloat16, marks=bf16_math)])
def test_a_reordered_linear_computes_what_linear_computes(layout, rows, bias, dtype):
    """For any number of rows, though each reordered copy is made for a typical number (_ROWS_HINT);
    MKL's packed product is fp32 only, so a bf16 layer in that layout multiplies its plain weight."""
    layer = nn.Linear(48, 80, bias=bias, dtype=dtype)
    x = torch.randn(2, rows, 48, dtype=dtype)
    with torch.inference_mode():
        expected = layer(x)
        matmul.set_layout(layer, layout)
        assert isinstance(layer, matmul._CLASSES[layout]) and matmul.layout_of(layer) == layout
        got = layer(x)
    assert got.shape == expected.shape and got.dtype == dtype
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)
    assert (layer in matmul._REORDERED) == (layout == matmul.PACKED or dtype == torch.float32)


needs_int8 = pytest.mark.skipif(not matmul.int8_available(), reason="this torch has no int8 weight product")


@needs_int8
@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("bias", [False, True])
def test_an_int8_linear_computes_nearly_what_linear_computes(rows, bias):
    layer = nn.Linear(32, 80, bias=bias)
    x = torch.randn(2, rows, 32)
    with torch.inference_mode():
        expected = layer(x)
        matmul.set_layout(layer, matmul.INT8)
        assert isinstance(layer, matmul.Int8Linear) and matmul.layout_of(layer) == matmul.INT8
        got = layer(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=0.05, atol=0.05)  # 8-bit weights, bf16 products
    assert not torch.equal(got, expected)  # other numbers, not another summation order: drafts only
    assert set(copy.deepcopy(layer).state_dict()) == set(layer.state_dict())  # the fp32 weight stays


def test_int8_weights_round_each_row_to_its_own_scale():
    weight = torch.randn(5, 16) * torch.tensor([1e-3, 1.0, 10.0, 100.0, 0.0])[:, None]  # a zero row too
    rounded, scales = matmul.int8_weights(weight)
    assert rounded.dtype == torch.int8 and scales.dtype == torch.bfloat16
    assert rounded[:4].abs().amax(dim=1).eq(127).all() and rounded[4].eq(0).all()
    error = (rounded.float() * scales.float()[:, None] - weight).abs().amax(dim=1)
    assert (error[:4] <= weight[:4].abs().amax(dim=1) / 127).all() and error[4] == 0  # within a step


@needs_int8
@pytest.mark.parametrize("int8_faster", [True, False])
def test_a_draft_keeps_int8_weights_only_where_they_draft_faster(tiny_target, monkeypatch, int8_faster):
    model = copy.deepcopy(tiny_target)

    def fake_seconds(timed, **_):
        return 1.0 if (matmul.layout_of(timed) == matmul.INT8) == int8_faster else 2.0

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    kept = matmul.faster_precision(model, int8=True)
    assert kept.dtype == torch.float32
    assert matmul.layout_of(kept) == (matmul.INT8 if int8_faster else matmul.COLUMNS)
    assert (kept is model) != int8_faster  # the int8 draft is a copy; the model was not changed
    assert matmul.layout_of(matmul.faster_precision(copy.deepcopy(tiny_target))) != matmul.INT8  # not asked


@needs_mkl
def test_mkl_is_a_candidate_for_fp32_models_only():
    assert matmul.MKL in matmul.candidate_layouts(torch.float32)
    assert matmul.MKL not in matmul.candidate_layouts(torch.bfloat16)


@needs_onednn
@needs_mkl
def test_a_layer_keeps_only_the_reordered_copies_its_layout_uses():
    layer = nn.Linear(48, 80)
    with torch.inference_mode():
        for layout, kept in (("packed/mkl@3", {matmul.PACKED, matmul.MKL}), (matmul.MKL, {matmul.MKL}),
                             ("rows/packed@2", {matmul.PACKED})):  # fmt: skip
            matmul.set_layout(layer, layout)
            for rows in (1, 4):
                layer(torch.randn(rows, 48))
            matmul.set_layout(layer, layout)  # as after timing, which switches layouts without it
            assert set(matmul._REORDERED.get(layer, {})) == kept
        matmul.set_layout(layer, matmul.ROWS)
    assert layer not in matmul._REORDERED


@pytest.mark.parametrize("layout", [pytest.param("rows/packed@2", marks=needs_onednn),
                                    pytest.param("packed/columns@4", marks=needs_onednn),
                                    pytest.param("rows/mkl@2", marks=needs_mkl)])
def test_a_split_layout_multiplies_few_rows_in_one_layout_and_more_in_the_other(layout, monkeypatch):
    few, many = layout.partition("@")[0].split("/")
    many_from = int(layout.partition("@")[2])
    layer = nn.Linear(48, 80)
    used = []
    for name in (few, many):  # record which layout's forward each call goes through
        cls = matmul._CLASSES[name]
        recorded = lambda self, x, f=cls.forward, n=name: used.append(n) or f(self, x)  # noqa: E731
        monkeypatch.setattr(cls, "forward", recorded)
    with torch.inference_mode():
        matmul.set_layout(layer, layout)
        assert isinstance(layer, matmul.SplitLinear) and matmul.layout_of(layer) == layout
        for rows in (1, many_from - 1, many_from, 7):
            x = torch.randn(1, rows, 48)
            got = layer(x)
            assert used[-1] == (many if rows >= many_from else few)
            torch.testing.assert_close(got, nn.Linear.forward(layer, x), rtol=1e-5, atol=1e-5)
        matmul.set_layout(layer, matmul.ROWS)
        assert type(layer) is nn.Linear and layer not in matmul._REORDERED  # its packed copy let go


@pytest.mark.parametrize("layout", REORDERED_LAYOUTS)
def test_a_reordered_linear_follows_its_weight_and_trains_through_it(layout):
    layer = nn.Linear(16, 8)
    matmul.set_layout(layer, layout)
    x = torch.randn(3, 16)
    with torch.no_grad():
        before = layer(x)
        layer.weight.mul_(2)  # changed in place: the reordered copy must be made again
        after = layer(x)
    torch.testing.assert_close(after - layer.bias, 2 * (before - layer.bias), rtol=1e-5, atol=1e-5)
    copied = copy.deepcopy(layer)  # the reordered copy stays out of deep copies and state dicts
    assert set(copied.state_dict()) == {"weight", "bias"}
    with torch.no_grad():
        torch.testing.assert_close(copied(x), after)
    layer(x).sum().backward()  # with gradients on, the plain weight is used, so autograd works
    assert layer.weight.grad is not None and layer.weight.grad.shape == layer.weight.shape
    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16):  # as feature extraction runs
        autocast = layer(x)
    assert autocast.dtype == torch.bfloat16
    torch.testing.assert_close(autocast.float(), after, rtol=2e-2, atol=2e-2)


def test_layout_choice_obeys_the_environment_and_spares_other_dtypes(tiny_target, monkeypatch):
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    assert matmul.choose_layout(tiny_target) == matmul.COLUMNS == matmul.layout_of(tiny_target)
    monkeypatch.setenv("SPECDEC_MATMUL", "rows")
    assert matmul.choose_layout(tiny_target) == matmul.ROWS == matmul.layout_of(tiny_target)
    if matmul.packed_available():
        for layout in (matmul.PACKED, "rows/packed@4"):
            monkeypatch.setenv("SPECDEC_MATMUL", layout)
            assert matmul.choose_layout(tiny_target) == layout == matmul.layout_of(tiny_target)
        assert matmul.describe_layout("rows/packed@4") == "rows matmuls below 4 tokens, packed from 4"
    # int8 changes the numbers: never a target's layout, whatever the environment says
    for unknown in ("diagonal", "rows/diagonal@2", "rows/packed", "rows/rows@3", "rows/packed@1", "int8",
                    "rows/int8@2"):
        monkeypatch.setenv("SPECDEC_MATMUL", unknown)  # not a layout: timed instead
        matmul.set_layout(tiny_target, matmul.ROWS)
        assert matmul.choose_layout(tiny_target) == matmul.layout_of(tiny_target) != unknown
    monkeypatch.delenv("SPECDEC_MATMUL")
    timed = matmul.choose_layout(tiny_target)  # one layout, or one for one row and another for more
    assert timed in matmul.candidate_layouts() or set(timed.partition("@")[0].split("/")) <= set(
        matmul.candidate_layouts())
    half = copy.deepcopy(tiny_target).to(torch.float16)
    assert matmul.choose_layout(half) == matmul.ROWS  # fp16 on a CPU is left alone
    matmul.set_layout(tiny_target, matmul.ROWS)


@pytest.mark.parametrize("layout", [matmul.COLUMNS, pytest.param(matmul.PACKED, marks=needs_onednn),
                                    pytest.param("rows/packed@3", marks=needs_onednn),
                                    pytest.param(matmul.MKL, marks=needs_mkl),
                                    pytest.param("rows/mkl@2", marks=needs_mkl)])
def test_greedy_speculation_matches_plain_decoding_in_each_layout(tiny_target, vocab, layout):
    """One run, one layout: speculative and plain decoding agree token for token (in a split layout,
    plain decoding multiplies one row in the first layout and verification passes in the second)."""
    from tiny_models import perturbed_copy

    from specdec.config import Settings
    from specdec.core.rounds import speculative_rounds

    draft = perturbed_copy(tiny_target, scale=0.6, seed=7)
    for model in (tiny_target, draft):
        matmul.set_layout(model, layout)
    try:
        greedy = SamplingConfig(temperature=0)
        prompt = [3, 17, 42, 5]
        plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), prompt, greedy,
                                                    _generator(0), 30)]
        traces = speculative_rounds(CachedModel(tiny_target, vocab), ModelDrafter(draft, vocab), prompt,
                                    Settings(4, greedy, 30), _generator(0))
        assert [t for trace in traces for t in trace.emitted_tokens] == plain
    finally:
        matmul.set_layout(tiny_target, matmul.ROWS)


@needs_int8
def test_greedy_speculation_with_an_int8_draft_matches_plain_decoding(tiny_target, vocab):
    """An int8 draft (its reduced head following it into int8) changes q only; the target's output stays."""
    from tiny_models import perturbed_copy

    from specdec.config import Settings
    from specdec.core.cached_model import ReducedHead
    from specdec.core.rounds import speculative_rounds

    draft = perturbed_copy(tiny_target, scale=0.6, seed=7)
    head = ReducedHead.of(draft, list(range(0, vocab, 2)))  # every other token
    matmul.set_layout(draft, matmul.INT8)
    greedy = SamplingConfig(temperature=0)
    prompt = [3, 17, 42, 5]
    plain = [s.token for s in target_only_steps(CachedModel(tiny_target, vocab), prompt, greedy,
                                                _generator(0), 30)]
    drafter = ModelDrafter(draft, vocab, head=head)
    traces = list(speculative_rounds(CachedModel(tiny_target, vocab), drafter, prompt,
                                     Settings(4, greedy, 30), _generator(0)))
    assert [t for trace in traces for t in trace.emitted_tokens] == plain
    assert isinstance(head.layer, matmul.Int8Linear)  # the head multiplied in its draft's precision
    assert sum(trace.num_accepted for trace in traces) > 0  # the int8 draft did draft something useful


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return len(tokenizer)


@pytest.mark.parametrize("bf16_faster", [True, False])
def test_a_draft_keeps_whichever_precision_runs_faster(tiny_target, monkeypatch, bf16_faster):
    half = copy.deepcopy(tiny_target).to(torch.bfloat16)
    timed = []

    def fake_seconds(model, **_):
        timed.append(model.dtype)
        return 1.0 if (model.dtype == torch.bfloat16) == bf16_faster else 2.0

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    monkeypatch.setattr(matmul, "_CHOSEN", {})  # nothing timed yet in this process
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    kept = matmul.faster_precision(half)
    assert set(timed) == {torch.bfloat16, torch.float32}
    if bf16_faster:
        assert kept is half and matmul.layout_of(kept) == matmul.COLUMNS  # bf16 gets a layout too
    else:
        assert kept.dtype == torch.float32 and matmul.layout_of(kept) == matmul.COLUMNS
        assert half.dtype == torch.bfloat16  # the bf16 model itself was not converted in place


def test_a_second_load_keeps_the_first_choice_so_seeds_replay(tiny_target, monkeypatch):
    """Timing is noisy: the same model loaded again in one process must get the same layout."""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    model = copy.deepcopy(tiny_target)
    faster = iter([matmul.COLUMNS, matmul.ROWS])  # the second timing would say the opposite

    def fake_seconds(timed, **_):
        return 1.0 if matmul.layout_of(timed) == current else 2.0

    current = next(faster)
    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    assert matmul.choose_layout(model) == matmul.COLUMNS
    current = next(faster)
    again = copy.deepcopy(tiny_target)
    assert matmul.choose_layout(again) == matmul.COLUMNS  # not timed again


@pytest.mark.parametrize("fastest", matmul.candidate_layouts())
def test_the_layout_timed_fastest_is_kept(tiny_target, monkeypatch, fastest):
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    timed = []

    def fake_seconds(model, **_):
        timed.append(matmul.layout_of(model))
        return 1.0 if timed[-1] == fastest else 2.0

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    model = copy.deepcopy(tiny_target)
    assert matmul.choose_layout(model) == fastest == matmul.layout_of(model)
    assert sorted(timed) == sorted(matmul.candidate_layouts() * 8 * 4)  # each at 1 to 8 tokens, 4 sweeps


@needs_onednn
def test_a_slow_moment_while_timing_does_not_decide_the_layout(tiny_target, monkeypatch):
    """The machine busy during the first two passes timed: the candidates take turns and keep their
    fastest pass, so rows, truly the fastest, is kept. (Timed one after another, packed would win.)"""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    true_seconds = {matmul.ROWS: 1.0, matmul.COLUMNS: 1.5, matmul.PACKED: 1.2, matmul.MKL: 1.3}
    passes = itertools.count()

    def fake_seconds(model, **_):
        busy = next(passes) < 2
        return true_seconds[matmul.layout_of(model)] * (3.0 if busy else 1.0)

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    assert matmul.choose_layout(copy.deepcopy(tiny_target)) == matmul.ROWS


@needs_onednn
@pytest.mark.parametrize(("few", "many", "many_from"), [("rows", "packed", 4), ("packed", "columns", 2),
                                                        ("rows", "packed", 5), ("packed", "packed", 2)])
def test_each_pass_size_gets_the_layout_timed_fastest_for_it(tiny_target, monkeypatch, few, many, many_from):
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})

    def fake_seconds(model, tokens=1, **_):
        fastest = many if tokens >= many_from else few
        return 1.0 if matmul.layout_of(model) == fastest else 2.0

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    model = copy.deepcopy(tiny_target)
    expected = few if few == many else f"{few}/{many}@{many_from}"
    assert matmul.choose_layout(model) == expected == matmul.layout_of(model)


def layout_chosen_from(tiny_target, monkeypatch, seconds: dict[str, list[float]]) -> str:
    """The layout choose_layout keeps where a pass over n tokens takes seconds[layout][n - 1]."""
    monkeypatch.delenv("SPECDEC_MATMUL", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    monkeypatch.setattr(matmul, "_pass_seconds",
                        lambda model, tokens=1, **_: seconds[matmul.layout_of(model)][tokens - 1])
    return matmul.choose_layout(copy.deepcopy(tiny_target))


@needs_onednn
def test_verification_passes_get_the_layout_that_spends_least_over_them(tiny_target, monkeypatch):
    """Packed a tenth faster over 2 to 4 tokens and level with rows at 5 (as with AVX2 kernels on the
    Intel Xeon): packed takes over from 2 tokens. Read off the 5-token pass alone, rows would stay."""
    seconds = {matmul.ROWS: [1.0, 1.7, 1.7, 1.7, 1.80, 1.9, 2.0, 2.1],
               matmul.PACKED: [1.3, 1.5, 1.5, 1.5, 1.81, 1.9, 2.0, 2.1],
               matmul.COLUMNS: [3.0] * 8, matmul.MKL: [3.0] * 8}  # fmt: skip
    assert layout_chosen_from(tiny_target, monkeypatch, seconds) == "rows/packed@2"


@needs_onednn
def test_the_longest_verification_passes_count_too(tiny_target, monkeypatch):
    """Columns and packed level over 2 to 5 tokens, packed a tenth cheaper over 6 to 8 (as with AVX2
    kernels on the AMD EPYC with AVX-512): packed takes over from 5. Timed to 5 tokens only, columns
    would stay, and code's rounds, which often verify 7 tokens, would pay for it."""
    seconds = {matmul.COLUMNS: [1.0, 1.0, 1.3, 1.3, 1.56, 1.86, 1.98, 1.98],
               matmul.PACKED: [1.3, 1.3, 1.4, 1.4, 1.56, 1.65, 1.75, 1.75],
               matmul.ROWS: [3.0] * 8, matmul.MKL: [3.0] * 8}  # fmt: skip
    assert layout_chosen_from(tiny_target, monkeypatch, seconds) == "columns/packed@5"


def test_pass_costs_are_timed_per_size_relative_to_one_token_and_never_fall(tiny_target, monkeypatch):
    monkeypatch.delenv("SPECDEC_PASS_COSTS", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    sizes = []
    seconds = {1: [0.011, 0.010], 2: [0.016, 0.015], 3: [0.014, 0.014], 4: [0.030, 0.020]}

    def fake_seconds(model, tokens=1, **_):
        sizes.append(tokens)
        return seconds[tokens][sizes.count(tokens) - 1]

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    costs = matmul.pass_costs(tiny_target, 4, sweeps=2)
    assert sizes == [1, 2, 3, 4] * 2  # the sizes take turns
    assert costs == pytest.approx((1.0, 1.5, 1.5, 2.0))  # each its fastest / one token's; 3 not below 2
    assert matmul.pass_costs(tiny_target, 4, sweeps=2) == costs and len(sizes) == 8  # timed once


def test_pass_costs_really_timed_on_a_model_and_fixed_by_the_environment(tiny_target, monkeypatch):
    monkeypatch.delenv("SPECDEC_PASS_COSTS", raising=False)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    costs = matmul.pass_costs(tiny_target, 5)
    assert len(costs) == 5 and costs[0] == 1.0 and list(costs) == sorted(costs)
    monkeypatch.setenv("SPECDEC_PASS_COSTS", "1,1.5,1.55")
    assert matmul.pass_costs(tiny_target, 5) == (1.0, 1.5, 1.55)
    for invalid in ("", "fast", "1,0.5", "0.5", "1,inf", "1,,2"):
        monkeypatch.setenv("SPECDEC_PASS_COSTS", invalid)
        assert matmul.pass_costs(tiny_target, 5) == costs  # ignored: the timed ones


def test_pass_costs_are_not_timed_for_a_half_precision_model(tiny_target):
    assert matmul.pass_costs(copy.deepcopy(tiny_target).half(), 5) == ()


@needs_int8
def test_draft_precisions_are_timed_in_turns_each_after_a_sweep_of_the_caches(tiny_target, monkeypatch):
    timed = []

    def fake_seconds(model, sweeper=None, **_):
        timed.append((matmul.layout_of(model) == matmul.INT8, sweeper is not None))
        return 1.0

    monkeypatch.setattr(matmul, "_pass_seconds", fake_seconds)
    monkeypatch.setattr(matmul, "_CHOSEN", {})
    monkeypatch.setenv("SPECDEC_MATMUL", "columns")
    matmul.faster_precision(copy.deepcopy(tiny_target), int8=True)
    assert all(swept for _, swept in timed)
    assert [int8 for int8, _ in timed] == [False, True] * (len(timed) // 2)  # fp32, int8, fp32, ...


def test_a_swept_pass_sweeps_the_caches_before_each_pass(tiny_target):
    sweeper = matmul.cache_sweeper()
    assert sweeper.numel() * sweeper.element_size() == 64 << 20  # more than a CPU's caches hold
    matmul._pass_seconds(tiny_target, repeats=3)
    matmul._pass_seconds(tiny_target, repeats=3, sweeper=sweeper)
    assert torch.equal(sweeper, torch.full_like(sweeper, 4.0))  # the warm-up pass and the three timed ones
