"""Which layout and precision this machine runs a model fastest in, and what its passes cost: timed
once per machine and model at load, the figures kept for later processes (kept_timings.py);
specdec/models/loading.py applies them, and the engine reads only the pass costs, handed to it as
numbers.

The fastest layout for one token need not be the fastest for several: on some CPUs rows runs short
passes fastest and packed long ones (docs/LOG.md, "One layout per pass size"; scripts/round_breakdown.py
times them side by side). So the choice is made per pass size: one-token passes get the layout that
runs them fastest, and verification passes the layout, and the size it takes over from, that spends least over
passes of 2 to 8 tokens (VERIFIED_SIZES); where that is another layout the model gets a split layout such as
"rows/packed@4" (fewer than 4 token rows in rows, 4 and more packed). Plain decoding and drafting
then run in the first, long verification passes in the second, and target-only decoding, the
baseline every speed-up is measured against, runs as fast as this machine allows.
"""

from __future__ import annotations

import copy
import itertools
import os

import torch
from torch import nn
from transformers import DynamicCache

from specdec.clock import now
from specdec.kernels import kept_timings
from specdec.kernels.matmul import (
    INT8,
    ROWS,
    candidate_layouts,
    int8_available,
    layout_of,
    runnable,
    set_layout,
    split_layout,
    switch_layout,
)


@torch.inference_mode()
def _context(model: nn.Module, length: int = 128) -> DynamicCache:
    """A KV cache holding `length` tokens, for timing decoding steps after them."""
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.zeros((1, length), dtype=torch.long, device=model.device), cache=cache,
          use_cache=True, logits_to_keep=1)
    return cache


def warm_up(model: nn.Module, sizes: range = range(1, 10)) -> None:
    """One pass of each size the app uses (1 to the largest γ + 1 tokens), for a model on a GPU at load:
    the first timed measurement in a fresh server must not pay for CUDA's and cuBLAS's start-up, or
    for the kernels chosen at a shape's first use."""
    cache = _context(model)
    for tokens in sizes:
        _pass_seconds(model, tokens, repeats=1, cache=cache)


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
        start = now()
        model(input_ids=input_ids, cache=cache, use_cache=True)
        times.append(now() - start)
        cache.crop(-tokens)
    return min(times[warm_up:])


# Choices already made in this process, by (what was chosen, the model's config and dtype). Timing
# is noisy; a second load of the same model must not choose otherwise, or a seed would not replay
# exactly (the summation order, and with it a near-tie, would change).
_CHOSEN: dict[tuple[str, str, str], object] = {}


def once(what: str, model: nn.Module, decide):
    """`decide()` the first time `what` is asked for a model of this config and dtype in this process,
    unless this machine already timed it for this model (kept_timings: read, not timed); the same answer
    after that. A timing is kept for the next process unless the machine was busy while it ran."""
    key = (what, model.config.to_json_string(), str(model.dtype))
    if key in _CHOSEN:
        return _CHOSEN[key]
    label = kept_timings.model_label(model)
    if (kept := kept_timings.read(what, model)) is not None:
        _CHOSEN[key], timed_at = kept
        kept_timings.RECORDS.append(kept_timings.TimingRecord(what, label, kept_timings.READ, timed_at, 0.0))
        return _CHOSEN[key]
    started, cpu = now(), kept_timings.cpu_seconds()
    _CHOSEN[key] = decide()
    seconds, timed_at = now() - started, kept_timings.now_iso()
    if kept_timings.others_cores(cpu) > kept_timings.OTHERS_BUSY_CORES:
        source = kept_timings.NOT_KEPT
    else:
        source = kept_timings.TIMED_NOW
        kept_timings.write(what, model, _CHOSEN[key], timed_at)
    kept_timings.RECORDS.append(kept_timings.TimingRecord(what, label, source, timed_at, round(seconds, 2)))
    return _CHOSEN[key]


def forget_chosen() -> None:
    """Forget what this process chose: the next load asks again (kept_timings first)."""
    _CHOSEN.clear()


def faster_precision(model: nn.Module, int8: bool = False) -> nn.Module:
    """A draft on a CPU in whichever precision drafts a token fastest here (a draft feeds one token at a
    time): fp32, bf16 where the CPU has bf16 math (`model` is given in bf16 only there), and with `int8`
    int8 weights (`Int8Linear`), each of the first two in its fastest layout; timed once per machine and
    model, the candidates in turns, each pass after a sweep of the CPU's caches (`decide` below): which
    one wins differs from CPU to CPU (docs/LOG.md, "Packed weights, and longer drafts", "Int8 draft
    weights" and "A drafted token's price within rounds" have the figures). A draft's
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
        # The candidates take turns, so a slow moment touches each alike (timed one after the other, one
        # process could keep another precision than the next: docs/LOG.md, "A drafted token's price
        # within rounds"). Each pass comes after a sweep of the CPU's caches: in a round the target's pass
        # has swept out the draft's weights before the draft's first step.
        contexts = {name: _context(candidate) for name, candidate in candidates.items()}
        sweeper = cache_sweeper()
        fastest = dict.fromkeys(candidates, float("inf"))
        for _ in range(9):
            for name, candidate in candidates.items():
                seconds = _pass_seconds(candidate, repeats=1, cache=contexts[name], sweeper=sweeper)
                fastest[name] = min(fastest[name], seconds)
        return min(fastest, key=fastest.get)

    return candidates[once("precision" + " int8" * int8, model, decide)]


def choose_layout(model: nn.Module) -> str:
    """Give a model on a CPU (fp32, or bf16 where the CPU has bf16 math) the layout that runs a 1-token
    pass fastest, split (module docstring) where another runs passes of 2 to 8 tokens faster; timed once per
    machine and model, the candidates taking turns on the same context (`_fastest_layout`). Other
    models are left alone. SPECDEC_MATMUL fixes it (rows, columns, packed, mkl, or a split such as
    rows/packed@4)."""
    forced = os.environ.get("SPECDEC_MATMUL")
    if model.device.type != "cpu" or model.dtype not in (torch.float32, torch.bfloat16):
        layout = ROWS  # GPU kernels are fine as they are
    elif forced and runnable(forced):
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
                switch_layout(model, layout)  # packed copies are kept while the layouts take turns
                seconds = _pass_seconds(model, tokens=size, repeats=1, cache=cache, warm_up=False)
                fastest[layout, size] = min(fastest[layout, size], seconds)
    return fastest


# The verification passes a layout is chosen for: at the default γ 6 a round verifies up to 7 tokens, and
# code's rounds often do. Choosing over shorter passes only can keep a layout that ties at the largest
# size looked at and loses on the 6- and 7-token passes rounds pay for (docs/LOG.md, "Second choices
# beside the drafts", "A layout fix found on the way").
VERIFIED_SIZES = range(2, 9)


def _fastest_layout(model: nn.Module, sweeps: int = 4) -> str:
    """The layout (or split) to keep, from every candidate's passes over 1 to 8 tokens, timed in turns
    (`_fastest_passes`): timed one layout after another, processes in a row could each choose another
    layout (docs/LOG.md, "One layout per pass size", "With the layouts chosen by turns")."""
    layouts, sizes = candidate_layouts(model.dtype), range(1, VERIFIED_SIZES.stop)
    fastest = _fastest_passes(model, layouts, sizes, sweeps)
    few = min(layouts, key=lambda layout: fastest[layout, 1])

    def verification_seconds(split: tuple[str, int]) -> float:
        many, many_from = split
        return sum(fastest[few if size < many_from else many, size] for size in sizes[1:])

    # The layout for verification passes and the size it takes over from: whichever spends least over
    # passes of 2 to 8 tokens. (Read off one size, where two layouts can run level within the noise,
    # the choice flips between them and may keep one that loses on the sizes around it.)
    many, many_from = min(itertools.product(layouts, VERIFIED_SIZES), key=verification_seconds)
    return split_layout(few, many, many_from)


# Sweeps over the pass sizes when their costs are timed. The costs are kept per machine, and a timing's
# noise with them, which code's long drafts feel (docs/LOG.md, "Start in seconds"): eight sweeps, paid
# once a machine.
COST_SWEEPS = 8


def pass_costs(model: nn.Module, max_tokens: int, sweeps: int = COST_SWEEPS) -> tuple[float, ...]:
    """What a decoding pass over 1, 2, ..., `max_tokens` new tokens costs on this machine, in passes
    over one token, in the model's layout(s); timed once per machine and model (kept_timings). What a
    draft adds to its verification pass is read off it (core.drafters.stop_thresholds).

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
