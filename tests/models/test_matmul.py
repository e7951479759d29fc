"""The linear layers of each layout (specdec/kernels/matmul.py): the same numbers as nn.Linear, and greedy
speculation unchanged in any of them."""

import copy

import pytest
import torch
from torch import nn

from specdec.config import SamplingConfig
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import ModelDrafter
from specdec.core.rounds import target_only_steps
from specdec.kernels import matmul
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


@needs_int8
@pytest.mark.parametrize("bias", [False, True])
def test_an_int8_only_linear_computes_what_int8_computes_and_keeps_no_fp32_weight(bias):
    """An early exit's layers keep their int8 rows alone: the same numbers as Int8Linear, a quarter of
    the bytes, and no plain weight to train through or to lay out again."""
    layer = nn.Linear(32, 80, bias=bias)
    x = torch.randn(2, 3, 32)
    with torch.inference_mode():
        matmul.set_layout(layer, matmul.INT8)
        expected = layer(x)
        matmul.keep_int8_only(layer)
        got = layer(x)
    assert isinstance(layer, matmul.Int8OnlyLinear) and matmul.layout_of(layer) == matmul.INT8
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert layer.weight.shape == (80, 32) and layer.weight.untyped_storage().nbytes() == 4  # a stand-in
    assert layer.int8_rows.dtype == torch.int8 and layer.int8_rows.numel() == 80 * 32
    matmul.set_layout(layer, matmul.PACKED)  # a layout change passes it by: it has no weight to lay out
    assert isinstance(layer, matmul.Int8OnlyLinear)
    with pytest.raises(RuntimeError, match="no weights to train"):
        layer(x.requires_grad_())


def test_int8_weights_round_each_row_to_its_own_scale():
    weight = torch.randn(5, 16) * torch.tensor([1e-3, 1.0, 10.0, 100.0, 0.0])[:, None]  # a zero row too
    rounded, scales = matmul.int8_weights(weight)
    assert rounded.dtype == torch.int8 and scales.dtype == torch.bfloat16
    assert rounded[:4].abs().amax(dim=1).eq(127).all() and rounded[4].eq(0).all()
    error = (rounded.float() * scales.float()[:, None] - weight).abs().amax(dim=1)
    assert (error[:4] <= weight[:4].abs().amax(dim=1) / 127).all() and error[4] == 0  # within a step


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
                             ("rows/packed@2", {matmul.PACKED})):
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


