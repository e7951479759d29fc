"""The one clock every measurement reads.

CUDA runs asynchronously: read right after a pass, a clock would time only the kernel launches, and
the pass itself would land in whatever is timed next. So on a GPU the clock first waits for the work
already queued. On a CPU it is `time.perf_counter()`.
"""

from __future__ import annotations

import functools
import time

import torch


@functools.cache
def _has_cuda() -> bool:
    return torch.cuda.is_available()


def now() -> float:
    """Seconds, after the GPU's queued work (if a GPU is in use) has finished."""
    if _has_cuda() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()
