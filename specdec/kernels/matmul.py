"""Linear layers on a CPU (fp32, or a bf16 draft) in the layout this machine multiplies fastest.

Four layouts compute the same numbers (only the summation order differs):
- rows: nn.Linear as it is, x @ Wᵀ;
- columns: the weight on the left, y = (W @ xᵀ)ᵀ (below); a layer with many inputs (an MLP's
  down-projection) multiplies 3 or more token rows as two halves of its inputs, summed, from a copy of
  its weight in two halves kept beside it (ColumnLinear);
- packed: oneDNN with the weight reordered once into its own blocked layout (`PackedLinear`);
- mkl: MKL's packed matrix product (cblas_sgemm_pack), fp32 only (`MklLinear`).

Decoding feeds a linear layer one to a few token rows, so its cost is reading the weights from
memory. Both forms are one BLAS call with the same numbers, but MKL may run the first for one token as
a single-threaded matrix-vector product and read the weights far faster in the second (docs/LOG.md,
"Rows or columns: where a round's time goes"; the app's idle-machine page times the passes on any
machine). Which form is faster depends on the CPU and the BLAS, so the layout is picked per process
by timing the model itself once at load (choice.py), not assumed; SPECDEC_MATMUL=rows, columns,
packed, mkl (or a split of two: choice.py) fixes it. Only the summation order changes, by ~1e-5 in the
logits, and a run keeps its layouts throughout, so a seed replays exactly.

Packed goes further: MKL multiplies a few columns at a small part of what the cores can do, so past a
few tokens a pass costs more with every token, while oneDNN's kernels for a reordered weight stay near
the memory's pace, so passes over 1 to 8 tokens cost about the same (docs/LOG.md, "Packed: oneDNN's
reordered weights"; docs/explanation/cpu-pass-cost.md, "Layouts"). The reordered copy is made on first
use and kept beside the weight (which the tied embedding and training still read), so a model takes
twice its weights' memory in this layout.

MKL's own packed product (cblas_sgemm_pack, as PyTorch's compiler multiplies frozen fp32 models) keeps
passes over a few tokens nearer still to the pace of one on some CPUs (docs/LOG.md, "MKL's packed
product: cheaper verification passes"). Its reordered copy is made for 8 rows, which multiplied the
target's linear layers over 1 to 8 rows as fast as any other choice in a timing of those layers alone;
made for 2 or 4 rows, it ran 5 to 8 rows clearly slower with AVX2 kernels. Like packed's, the copy
sits beside the weight: twice the weights' memory.

A draft may go further than a layout (`Int8Linear`, chosen by choice.faster_precision, never by
choice.choose_layout): its weights rounded to int8, one scale per row, a quarter of fp32's bytes to read per
token. That changes the draft's numbers, so q, and nothing else (the acceptance rule keeps the output the
target's); a target never gets it. `keep_int8_only` goes one step further for a drafter that never trains
and never changes layout (an early exit's adapter, its head rows and its rounded copy of the target's
shallow layers): the int8 rows are all it keeps, so its memory is a quarter of fp32's, not five quarters.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

ROWS, COLUMNS, PACKED, MKL = "rows", "columns", "packed", "mkl"
LAYOUTS = (ROWS, COLUMNS, PACKED, MKL)
INT8 = "int8"  # not a layout of the same numbers: a draft's weights rounded to 8 bits (Int8Linear)


def linear_columns(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`rows @ weight.T` computed as `(weight @ rows.T).T`: (n, in) x (out, in) -> (n, out), contiguous."""
    count = rows.shape[0]
    if count == 1:
        # Two identical columns take MKL's threaded matrix product, not its matrix-vector one. (cat, not
        # repeat: repeat's copy is dearer per linear layer; docs/LOG.md, "Rows or columns".)
        rows = torch.cat([rows, rows])
    elif count % 4 == 3:
        # MKL multiplies columns in blocks of four and is slow on a remainder of three, so a 3-token pass
        # padded to 4 costs less than unpadded (docs/LOG.md, "Rows or columns").
        rows = torch.cat([rows, rows[-1:]])
    # Contiguous output: the next layer must get rows in the usual layout, or MKL slows down again.
    return (weight @ rows.T).T[:count].contiguous()


# MKL multiplies a few columns slowly against a long inner dimension, as SmolLM2-135M's MLP
# down-projection (1536 inputs) has. Split into two halves of its inputs, summed, a columns pass over 3
# to 5 tokens ran faster than whole in two runs of three (docs/LOG.md, "Two halves of a long layer";
# docs/explanation/cpu-pass-cost.md).
# The halves must be contiguous copies (slices of the weight ran slower than the whole), so such a
# layer keeps them beside its weight. Layers with fewer inputs (576), and 1 or 2 tokens, stay whole:
# split, they ran slower.
HALVES_FROM_INPUTS = 1024


class ColumnLinear(nn.Linear):
    """nn.Linear with the weight on the left (see the module's docstring); same weights, same results
    but for the summation order of a long layer over 3 or more tokens (HALVES_FROM_INPUTS)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > 2 and self.in_features >= HALVES_FROM_INPUTS and not _plain_weight_needed(self, x):
            first, second = _reordered(self, COLUMNS)  # its weight in two halves
            half = first.shape[1]
            out = linear_columns(rows[:, :half], first) + linear_columns(rows[:, half:], second)
        else:
            out = linear_columns(rows, self.weight)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


# Each packed layer's reordered weights by layout (packed, mkl), with the weight each was made from
# (its storage and version): kept out of the module so that state dicts and deep copies see a plain
# nn.Linear.
_REORDERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Both libraries pick their blocked format for a typical number of rows. oneDNN: 4 (a verification
# pass) ran 1 to 16 rows as fast as any other hint here, 1 ran more than one row slower. MKL: 8 ran 1 to
# 8 rows as fast as any other; 2 or 4 ran 5 to 8 rows slower (module docstring).
_ROWS_HINT = {PACKED: 4, MKL: 8}


def packed_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def mkl_available() -> bool:
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


def _plain_weight_needed(layer: nn.Linear, x: torch.Tensor) -> bool:
    """Training or autocast (autograd and autocast know the plain weight), or another dtype."""
    return ((torch.is_grad_enabled() and layer.weight.requires_grad) or x.dtype != layer.weight.dtype
            or torch.is_autocast_enabled(x.device.type))


class PackedLinear(nn.Linear):
    """nn.Linear through oneDNN with a reordered copy of the weight (see the module's docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _plain_weight_needed(self, x):
            return nn.Linear.forward(self, x)
        out = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), _reordered(self, PACKED),
                                                 self.bias, "none", [], "")
        return out.reshape(*x.shape[:-1], self.out_features)


class MklLinear(nn.Linear):
    """nn.Linear through MKL's packed fp32 product with a reordered copy of the weight (as PyTorch's
    compiler multiplies frozen fp32 models); other dtypes multiply the plain weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _plain_weight_needed(self, x) or x.dtype != torch.float32:
            return nn.Linear.forward(self, x)
        rows = x.reshape(-1, x.shape[-1])
        # The copy serves any number of rows; the op multiplies with it when told it was made for as
        # many rows as it gets (else it falls back to the plain weight).
        out = torch.ops.mkl._mkl_linear(rows, _reordered(self, MKL), self.weight, self.bias, rows.shape[0])
        return out.reshape(*x.shape[:-1], self.out_features)


class Int8Linear(nn.Linear):
    """nn.Linear with its weight rounded to int8, one scale per output row, multiplied in bf16
    (`torch._weight_int8pack_mm`, the product PyTorch's compiler lowers weight-only int8 linears to on a
    CPU). Not the same numbers: for drafts only, whose numbers change q and nothing else
    (choice.faster_precision)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _plain_weight_needed(self, x):
            return nn.Linear.forward(self, x)
        return _int8_product(self, x, *_reordered(self, INT8))


class Int8OnlyLinear(nn.Linear):
    """An Int8Linear that kept only its int8 rows and scales (`keep_int8_only`): its `weight` is a
    stand-in of the right shape that takes no memory, so it cannot train, change layout or be read."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            raise RuntimeError("an int8-only layer kept no weights to train")
        return _int8_product(self, x, self.int8_rows, self.int8_scales)


def _int8_product(layer: nn.Linear, x: torch.Tensor, rows: torch.Tensor, scales: torch.Tensor
                  ) -> torch.Tensor:
    """x (..., in) times the layer's int8 `rows` and bf16 `scales`, multiplied in bf16, plus its bias."""
    out = torch._weight_int8pack_mm(x.reshape(-1, x.shape[-1]).bfloat16(), rows, scales).to(x.dtype)
    if layer.bias is not None:
        out = out + layer.bias
    return out.reshape(*x.shape[:-1], layer.out_features)


def keep_int8_only(model: nn.Module) -> None:
    """Round every linear layer of `model` to int8 (as Int8Linear does) and let go of its plain weight:
    for a drafter whose weights never change and which never trains. Its memory is the int8 rows alone."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and not isinstance(module, Int8OnlyLinear):
            rows, scales = int8_weights(module.weight.detach())
            module.register_buffer("int8_rows", rows)
            module.register_buffer("int8_scales", scales)
            stand_in = torch.zeros((), dtype=module.weight.dtype, device=module.weight.device)
            module.weight = nn.Parameter(stand_in.expand(module.out_features, module.in_features),
                                         requires_grad=False)
            module.__class__ = Int8OnlyLinear
            _REORDERED.pop(module, None)


def int8_weights(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) -> int8 rows and bf16 scales, each row's largest magnitude mapped to 127."""
    scales = weight.float().abs().amax(dim=1).clamp(min=1e-12) / 127
    rounded = torch.round(weight.float() / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return rounded, scales.bfloat16()


def input_halves(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) -> its first and second half of the inputs, (out, in // 2) and the rest, each contiguous
    (ColumnLinear's copy of a long layer)."""
    half = weight.shape[1] // 2
    return weight[:, :half].contiguous(), weight[:, half:].contiguous()


def int8_available() -> bool:
    return hasattr(torch, "_weight_int8pack_mm")


_REORDER = {PACKED: lambda weight: torch.ops.mkldnn._reorder_linear_weight(weight, _ROWS_HINT[PACKED]),
            MKL: lambda weight: torch.ops.mkl._mkl_reorder_linear_weight(weight, _ROWS_HINT[MKL]),
            INT8: int8_weights,
            COLUMNS: input_halves}


def _reordered(layer: nn.Linear, layout: str) -> torch.Tensor:
    """The layer's weight in `layout`'s blocked form, reordered on first use and after every change."""
    made_from = (layer.weight.data_ptr(), _version(layer.weight))
    copies = _REORDERED.setdefault(layer, {})
    kept = copies.get(layout)
    if kept is None or kept[0] != made_from:  # first use, or the weight changed since
        kept = copies[layout] = (made_from, _REORDER[layout](layer.weight.detach()))
    return kept[1]


def _version(tensor: torch.Tensor) -> int:
    """How many times the tensor was changed in place (0 for an inference tensor, which cannot be)."""
    try:
        return tensor._version
    except RuntimeError:
        return 0


_CLASSES = {ROWS: nn.Linear, COLUMNS: ColumnLinear, PACKED: PackedLinear, MKL: MklLinear, INT8: Int8Linear}


class SplitLinear(nn.Linear):
    """Fewer than `many_from` token rows (decoding, drafting) in one layout, more (a verification pass)
    in another; each split layout is a subclass naming the two (`_class_of`)."""

    few: type[nn.Linear]
    many: type[nn.Linear]
    many_from: int

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        return (self.many if rows >= self.many_from else self.few).forward(self, x)


def split_layout(few: str, many: str, many_from: int) -> str:
    """The layout that multiplies fewer than `many_from` rows in `few` and more in `many`: "rows/packed@4"."""
    return few if few == many else f"{few}/{many}@{many_from}"


def describe_layout(layout: str) -> str:
    """"packed" -> "packed matmuls"; "rows/packed@4" -> "rows matmuls below 4 tokens, packed from 4"."""
    if layout in LAYOUTS:
        return f"{layout} matmuls"
    if layout == INT8:
        return "int8 weights"
    few, many, many_from = _parse_split(layout)
    return f"{few} matmuls below {many_from} tokens, {many} from {many_from}"


def _parse_split(layout: str) -> tuple[str, str, int]:
    """ "rows/packed@4" -> ("rows", "packed", 4); ValueError if it is not a split of two known layouts."""
    layouts, _, many_from = layout.partition("@")
    few, many = layouts.split("/")
    if {few, many} - set(LAYOUTS) or few == many or int(many_from) < 2:
        raise ValueError(layout)
    return few, many, int(many_from)


def _class_of(layout: str) -> type[nn.Linear]:
    if layout not in _CLASSES:
        few, many, many_from = _parse_split(layout)
        _CLASSES[layout] = type(f"{few.title()}{many.title()}From{many_from}Linear", (SplitLinear,),
                                {"few": _CLASSES[few], "many": _CLASSES[many], "many_from": many_from})
    return _CLASSES[layout]


def runnable(layout: str) -> bool:
    """A layout this process can run: one of candidate_layouts(), or a split of two of them."""
    if layout in candidate_layouts():
        return True
    try:
        return set(_parse_split(layout)[:2]) <= set(candidate_layouts())
    except ValueError:
        return False


def set_layout(model: nn.Module, layout: str) -> None:
    """Switch every linear layer of `model` to one layout (the weights are not touched), letting go of
    the layers' reordered copies that the layout does not use."""
    switch_layout(model, layout)
    used = set(layout.partition("@")[0].split("/"))
    for module in model.modules():
        copies = _REORDERED.get(module, {})
        for unused in set(copies) - used:
            del copies[unused]
        if not copies:
            _REORDERED.pop(module, None)


def switch_layout(model: nn.Module, layout: str) -> None:
    """As set_layout, but keeping every reordered copy (while layouts take turns being timed)."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and not isinstance(module, Int8OnlyLinear):  # it has no weights
            module.__class__ = _class_of(layout)


def layout_of(model: nn.Module) -> str:
    names = {cls: name for name, cls in _CLASSES.items()} | {Int8OnlyLinear: INT8}
    return next((names[type(m)] for m in model.modules() if names.get(type(m), ROWS) != ROWS), ROWS)


def candidate_layouts(dtype: torch.dtype = torch.float32) -> tuple[str, ...]:
    """The layouts this process can run for a model of `dtype` (MKL's packed product is fp32 only)."""
    return (ROWS, COLUMNS, *((PACKED,) if packed_available() else ()),
            *((MKL,) if mkl_available() and dtype == torch.float32 else ()))
