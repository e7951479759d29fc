"""Linear layers on a CPU (fp32, or a bf16 draft) in the layout this machine multiplies fastest.

Four layouts compute the same numbers (only the summation order differs):
- rows: nn.Linear as it is, x @ Wᵀ;
- columns: the weight on the left, y = (W @ xᵀ)ᵀ (below); a layer with many inputs (an MLP's
  down-projection) multiplies 3 or more token rows as two halves of its inputs, summed, from a copy of
  its weight in two halves kept beside it (ColumnLinear);
- packed: oneDNN with the weight reordered once into its own blocked layout (`PackedLinear`);
- mkl: MKL's packed matrix product (cblas_sgemm_pack), fp32 only (`MklLinear`).

Decoding feeds a linear layer one to a few token rows, so its cost is reading the weights from
memory. Both forms are one BLAS call with the same numbers, but on the 2-core machine MKL reads the
weights far faster in the second: one token through SmolLM2-135M took 53 ms as `x @ Wᵀ` (a
single-threaded matrix-vector product) and 32 ms as `W @ xᵀ`, and a pass over 5 tokens 70 ms and
48 ms (the app's idle-machine page times the passes on any machine). Which form is faster depends on
the CPU and the BLAS, so the layout is picked per process by timing the model itself once at load, not
assumed; SPECDEC_MATMUL=rows, columns, packed, mkl (or a split, below) fixes it. Only the summation order
changes, by ~1e-5 in the logits, and a run keeps its layouts throughout, so a seed replays exactly.

Packed goes further: MKL multiplies a few columns at ~70 GFLOP/s here, a small part of what the
cores can do, so past 4 tokens a pass costs more with every token, while oneDNN's kernels for a
reordered weight stay near the memory's pace: a pass over 1 token took 24.5 ms packed, over 2 to 6
tokens 27-32 ms and over 8 32.7 ms, against 26.5, 26-44 and 51.9 ms in columns
(scripts/round_breakdown.py, 2026-12-02, the 2-core AMD EPYC with AVX-512; a later run: 23.7 ms for
one token, 24.5 for 6, 25.8 for 8). The reordered copy is made on first use and kept beside the
weight (which the tied embedding and training still read), so a model takes twice its weights' memory
in this layout.

MKL's own packed product (cblas_sgemm_pack, as PyTorch's compiler multiplies frozen fp32 models) keeps
passes over a few tokens nearer still to the pace of one: on a 2-core Intel Xeon with AVX2 kernels
(2026-12-03, scripts/round_breakdown.py) passes over 2 to 8 tokens took 51-63 ms in mkl, against
78-96 ms in rows and 67-105 ms packed, and one token 54.5 ms in rows. Its reordered copy is made for 8
rows, which multiplied the target's linear layers over 1 to 8 rows as fast as any other choice in a
timing of those layers alone; made for 2 or 4 rows, it ran 5 to 8 rows clearly slower there with AVX2
kernels. Like packed's, the copy
sits beside the weight: twice the weights' memory.

A draft may go further than a layout (`Int8Linear`, chosen by `faster_precision`, never by
choose_layout): its weights rounded to int8, one scale per row, a quarter of fp32's bytes to read per
token. That changes the draft's numbers, so q, and nothing else (the acceptance rule keeps the output the
target's); a target never gets it.

The fastest layout for one token need not be the fastest for several: on a 2-core Intel Xeon with
AVX-512 (2026-12-02, scripts/round_breakdown.py) passes over 1 and 2 tokens took 33.8 and 35.8 ms in
rows and 45.4 and 58.1 ms packed, while 5 and 12 tokens took 55.3 and 84.6 ms in rows and 53.8 and
61.8 ms packed. So the choice is made per pass size: one-token passes get the layout that runs them
fastest, and verification passes the layout, and the size it takes over from, that spends least over
passes of 2 to 8 tokens (VERIFIED_SIZES); where that is another layout the model gets a split layout such as
"rows/packed@4" (fewer than 4 token rows in rows, 4 and more packed). Plain decoding and drafting
then run in the first, long verification passes in the second, and target-only decoding, the
baseline every speed-up is measured against, runs as fast as this machine allows.
"""

from __future__ import annotations

import copy
import itertools
import os
import time
import weakref

import torch
from torch import nn
from transformers import DynamicCache

ROWS, COLUMNS, PACKED, MKL = "rows", "columns", "packed", "mkl"
LAYOUTS = (ROWS, COLUMNS, PACKED, MKL)
INT8 = "int8"  # not a layout of the same numbers: a draft's weights rounded to 8 bits (Int8Linear)


def linear_columns(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`rows @ weight.T` computed as `(weight @ rows.T).T`: (n, in) x (out, in) -> (n, out), contiguous."""
    count = rows.shape[0]
    if count == 1:
        # Two identical columns take MKL's threaded matrix product, not its matrix-vector one. (cat, not
        # repeat: repeat's copy cost ~10 µs more per linear layer, 2-3 ms of a 30 ms SmolLM2-135M step.)
        rows = torch.cat([rows, rows])
    elif count % 4 == 3:
        # MKL multiplies columns in blocks of four and is slow on a remainder of three: a pass over
        # SmolLM2-135M took 40.7 ms for 3 tokens and 38.0 ms for 4 (61 ms for 7, 57 ms for 8).
        rows = torch.cat([rows, rows[-1:]])
    # Contiguous output: the next layer must get rows in the usual layout, or MKL slows down again.
    return (weight @ rows.T).T[:count].contiguous()


# MKL multiplies a few columns slowly against a long inner dimension, as SmolLM2-135M's MLP
# down-projection (1536 inputs) has. Split into two halves of its inputs, summed, a columns pass over 3
# to 5 tokens took 34-35, 34-36 and 42-44 ms against 39, 39 and 45-48 whole
# (scripts/round_breakdown.py, 2026-12-06, the 2-core AMD EPYC with AVX-512, held to AVX2 and not; a
# third run, in a noisy hour, went the other way: README, "Two halves of a long layer").
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
                                                 self.bias, "none", [], "")  # fmt: skip
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
    (`faster_precision`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _plain_weight_needed(self, x):
            return nn.Linear.forward(self, x)
        weight, scales = _reordered(self, INT8)
        out = torch._weight_int8pack_mm(x.reshape(-1, x.shape[-1]).bfloat16(), weight, scales).to(x.dtype)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


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


def _valid(layout: str) -> bool:
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
    _switch(model, layout)
    used = set(layout.partition("@")[0].split("/"))
    for module in model.modules():
        copies = _REORDERED.get(module, {})
        for unused in set(copies) - used:
            del copies[unused]
        if not copies:
            _REORDERED.pop(module, None)


def _switch(model: nn.Module, layout: str) -> None:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.__class__ = _class_of(layout)


def layout_of(model: nn.Module) -> str:
    names = {cls: name for name, cls in _CLASSES.items()}
    return next((names[type(m)] for m in model.modules() if names.get(type(m), ROWS) != ROWS), ROWS)


@torch.inference_mode()
def _context(model: nn.Module, length: int = 128) -> DynamicCache:
    """A KV cache holding `length` tokens, for timing decoding steps after them."""
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.zeros((1, length), dtype=torch.long, device=model.device), cache=cache,
          use_cache=True, logits_to_keep=1)  # fmt: skip
    return cache


def cache_sweeper() -> torch.Tensor:
    """A buffer larger than a CPU's caches (64 MiB): touching it before a pass (`_pass_seconds`) reads and
    writes more memory than they hold, as the target's verification pass does (hundreds of megabytes of
    weights) between one round's drafting and the next."""
    return torch.zeros(16 << 20)


@torch.inference_mode()
def _pass_seconds(model: nn.Module, tokens: int = 1, repeats: int = 3,
                  cache: DynamicCache | None = None, warm_up: bool = True,
                  sweeper: torch.Tensor | None = None) -> float:
    """A decoding step as the engine runs it: `tokens` new tokens after the cached ones, fastest of
    `repeats` after one to warm up (a fresh context unless `cache` is given; it is left as it was).
    With a `sweeper` (cache_sweeper), each pass comes after touching it: the pass finds its weights in
    memory, not in the caches, as a draft's first step of a round does."""
    cache = cache if cache is not None else _context(model)
    input_ids = torch.zeros((1, tokens), dtype=torch.long, device=model.device)
    times = []
    for _ in range(repeats + warm_up):
        if sweeper is not None:
            sweeper.add_(1.0)
        start = time.perf_counter()
        model(input_ids=input_ids, cache=cache, use_cache=True)
        times.append(time.perf_counter() - start)
        cache.crop(-tokens)
    return min(times[warm_up:])


# Choices already timed in this process, by (what was chosen, the model's config and dtype). Timing
# is noisy; a second load of the same model must not choose otherwise, or a seed would not replay
# exactly (the summation order, and with it a near-tie, would change).
_CHOSEN: dict[tuple[str, str, str], object] = {}


def once(what: str, model: nn.Module, decide):
    """`decide()` the first time `what` is asked for a model of this config and dtype in this process;
    the same answer after that."""
    key = (what, model.config.to_json_string(), str(model.dtype))
    if key not in _CHOSEN:
        _CHOSEN[key] = decide()
    return _CHOSEN[key]


def faster_precision(model: nn.Module, int8: bool = False) -> nn.Module:
    """A draft on a CPU in whichever precision drafts a token fastest here (a draft feeds one token at a
    time): fp32, bf16 where the CPU has bf16 math (`model` is given in bf16 only there), and with `int8`
    int8 weights (`Int8Linear`), each of the first two in its fastest layout; timed once per process and
    model, the candidates in turns, each pass after a sweep of the CPU's caches (`decide` below). On the
    Intel Xeon the bundled draft took 1.4 ms a token in bf16 packed, 1.7 ms in bf16 rows and 1.8-2.0 ms
    in fp32 (2026-12-02); on the AMD EPYC with AVX2 only, int8 weights won, a drafted token costing
    0.07-0.09 target steps against 0.09-0.14 in fp32 (bench's c, 2026-12-03); on the AMD EPYC with
    AVX-512 held to AVX2 kernels, 0.084-0.090 on code against 0.114 in fp32 (2026-12-05). A draft's
    numbers change q and nothing else: the acceptance rule keeps the output the target's whatever the
    precision. `model` itself is returned or left as it was."""
    fp32 = model if model.dtype == torch.float32 else copy.deepcopy(model).float()
    candidates = {"float32": fp32}
    if model.dtype == torch.bfloat16:
        candidates["bfloat16"] = model
    if int8 and int8_available():
        candidates["int8"] = copy.deepcopy(fp32)
        set_layout(candidates["int8"], INT8)
    for name, candidate in candidates.items():
        if name != "int8":
            choose_layout(candidate)
    if len(candidates) == 1:
        return fp32

    def decide() -> str:
        # The candidates take turns, so a slow moment touches each alike (timed one after the other, the
        # AMD EPYC held to AVX2 kernels kept fp32 in one process and int8 in the next). Each pass comes
        # after a sweep of the CPU's caches: in a round the target's pass has swept out the draft's
        # weights before the draft's first step.
        contexts = {name: _context(candidate) for name, candidate in candidates.items()}
        sweeper = cache_sweeper()
        fastest = dict.fromkeys(candidates, float("inf"))
        for _ in range(9):
            for name, candidate in candidates.items():
                seconds = _pass_seconds(candidate, repeats=1, cache=contexts[name], sweeper=sweeper)
                fastest[name] = min(fastest[name], seconds)
        return min(fastest, key=fastest.get)

    return candidates[once("precision" + " int8" * int8, model, decide)]


def candidate_layouts(dtype: torch.dtype = torch.float32) -> tuple[str, ...]:
    """The layouts this process can run for a model of `dtype` (MKL's packed product is fp32 only)."""
    return (ROWS, COLUMNS, *((PACKED,) if packed_available() else ()),
            *((MKL,) if mkl_available() and dtype == torch.float32 else ()))  # fmt: skip


def choose_layout(model: nn.Module) -> str:
    """Give a model on a CPU (fp32, or bf16 where the CPU has bf16 math) the layout that runs a 1-token
    pass fastest, split (module docstring) where another runs passes of 2 to 8 tokens faster; timed once per
    process and model, the candidates taking turns on the same context (`_fastest_layout`). Other
    models are left alone. SPECDEC_MATMUL fixes it (rows, columns, packed, mkl, or a split such as
    rows/packed@4)."""
    forced = os.environ.get("SPECDEC_MATMUL")
    if model.device.type != "cpu" or model.dtype not in (torch.float32, torch.bfloat16):
        layout = ROWS  # GPU kernels are fine as they are
    elif forced and _valid(forced):
        layout = forced
    else:
        layout = once("layout", model, lambda: _fastest_layout(model))
    set_layout(model, layout)
    return layout


def _fastest_passes(model: nn.Module, layouts: tuple[str, ...], sizes: range, sweeps: int) -> dict:
    """(layout, size) -> the fastest of `sweeps` passes over `size` new tokens in that layout, on one
    cached context (its keys and values do not depend on the layout). The layouts take turns at each
    size and the sizes take turns, `sweeps` times over (the first sweep warms up), so a moment when the
    machine is slow touches every layout and size alike."""
    cache = _context(model)
    fastest = dict.fromkeys(itertools.product(layouts, sizes), float("inf"))
    for _ in range(sweeps):
        for size in sizes:
            for layout in layouts:
                _switch(model, layout)  # packed copies are kept while the layouts take turns
                seconds = _pass_seconds(model, tokens=size, repeats=1, cache=cache, warm_up=False)
                fastest[layout, size] = min(fastest[layout, size], seconds)
    return fastest


# The verification passes a layout is chosen for: at the default γ 6 a round verifies up to 7 tokens, and
# code's rounds often do. (Timed over 2 to 5 tokens only, with AVX2 kernels on the AMD EPYC with AVX-512
# columns and packed ran level at 5 and the choice flipped between them, though packed ran passes over 6
# and 7 tokens a tenth cheaper: 1.65-1.77 one-token passes against 1.86-1.98, 2026-12-05.)
VERIFIED_SIZES = range(2, 9)


def _fastest_layout(model: nn.Module, sweeps: int = 4) -> str:
    """The layout (or split) to keep, from every candidate's passes over 1 to 8 tokens, timed in turns
    (`_fastest_passes`). (Timed one layout after another, two passes each, three processes in a row on
    the Intel Xeon with AVX2 kernels chose three different layouts.)"""
    layouts, sizes = candidate_layouts(model.dtype), range(1, VERIFIED_SIZES.stop)
    fastest = _fastest_passes(model, layouts, sizes, sweeps)
    few = min(layouts, key=lambda layout: fastest[layout, 1])

    def verification_seconds(split: tuple[str, int]) -> float:
        many, many_from = split
        return sum(fastest[few if size < many_from else many, size] for size in sizes[1:])

    # The layout for verification passes and the size it takes over from: whichever spends least over
    # passes of 2 to 8 tokens. (Read off one size, the 5-token pass, where two layouts ran level within
    # the noise, the choice flipped between rows throughout and packed from 2, which ran 2 to 4 tokens
    # a tenth faster with AVX2 kernels.)
    many, many_from = min(itertools.product(layouts, VERIFIED_SIZES), key=verification_seconds)
    return split_layout(few, many, many_from)


def pass_costs(model: nn.Module, max_tokens: int, sweeps: int = 4) -> tuple[float, ...]:
    """What a decoding pass over 1, 2, ..., `max_tokens` new tokens costs on this machine, in passes
    over one token, in the model's layout(s); timed once per process and model. What a draft adds to
    its verification pass is read off it (core.drafters.stop_thresholds).

    The sizes take turns, `sweeps` times over, and each keeps its fastest pass (`_fastest_passes`), so
    a moment when the machine is slow touches every size alike. A pass over more tokens never
    counts as cheaper than one over fewer (noise must not make a draft look free). Empty off the CPU
    and for other dtypes: on a GPU a pass over a few tokens costs about one token's; nothing is timed.
    SPECDEC_PASS_COSTS fixes them (e.g. "1,1.5,1.55"; "1": every pass as cheap as one token's), so two
    processes draft alike; a value that is not such a list is ignored and the passes are timed.
    """
    if model.device.type != "cpu" or model.dtype not in (torch.float32, torch.bfloat16):
        return ()
    if forced := _parse_costs(os.environ.get("SPECDEC_PASS_COSTS", "")):
        return forced

    layout = layout_of(model)

    def measure() -> tuple[float, ...]:
        sizes = range(1, max_tokens + 1)
        fastest = _fastest_passes(model, (layout,), sizes, sweeps)
        seconds = [fastest[layout, size] for size in sizes]
        return tuple(itertools.accumulate((s / seconds[0] for s in seconds), max))

    return once(f"pass costs up to {max_tokens} ({layout})", model, measure)


def _parse_costs(text: str) -> tuple[float, ...]:
    """"1,1.5,1.55" -> (1.0, 1.5, 1.55); () unless every word is a number >= 1 and none is below the
    one before (a pass over more tokens costs at least as much)."""
    try:
        costs = tuple(float(word) for word in text.split(","))
    except ValueError:
        return ()
    ordered = all(1 <= a <= b < float("inf") for a, b in itertools.pairwise((1.0, *costs)))
    return costs if ordered else ()
