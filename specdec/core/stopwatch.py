"""Where a round's time goes: named stages, timed only while someone measures (else free).

    with stopwatch.measuring() as seconds:   # {stage name: seconds}, summed over the stages run
        list(speculative_rounds(...))

The round loop marks its stages with `stopwatch.stage("verify")` etc. The totals live in a context
variable, so sessions measuring in other threads never mix their numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from specdec.clock import now

_totals: ContextVar[dict[str, float] | None] = ContextVar("stopwatch_totals", default=None)


@contextmanager
def stage(name: str) -> Iterator[None]:
    totals = _totals.get()
    if totals is None:
        yield
        return
    start = now()
    try:
        yield
    finally:
        totals[name] = totals.get(name, 0.0) + now() - start


@contextmanager
def measuring() -> Iterator[dict[str, float]]:
    totals: dict[str, float] = {}
    token = _totals.set(totals)
    try:
        yield totals
    finally:
        _totals.reset(token)
