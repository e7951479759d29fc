"""Time estimates from measurement: what a page says a run will take, never a fixed guess.

A long run is a list of steps of known relative size (their weights: samples, rows × tokens, ...).
While it runs, the time left is the seconds spent so far per unit of weight done, times the weight
still to do. Before it runs, a page can only quote a pace measured earlier on this machine (the last
run of the same kind), scaled to the run's weight. No Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    """Seconds per unit of weight, measured over `weight` units of a finished or running run."""

    seconds_per_unit: float
    weight: float  # how much work the measurement covered

    def seconds_for(self, weight: float) -> float:
        return self.seconds_per_unit * weight


def pace(elapsed: float, weight_done: float) -> Pace | None:
    """The pace so far; None before any work is done (nothing measured yet)."""
    if weight_done <= 0 or elapsed < 0:
        return None
    return Pace(elapsed / weight_done, weight_done)


def seconds_left(elapsed: float, weights: Sequence[float], steps_done: int) -> float | None:
    """The time left after `steps_done` of the steps with these weights, at the pace of those done;
    None before the first step (no measurement yet)."""
    measured = pace(elapsed, sum(weights[:steps_done]))
    return None if measured is None else measured.seconds_for(sum(weights[steps_done:]))


def say_seconds(seconds: float) -> str:
    """A duration as a person reads it: '8 s', '40 s', '1 min 30 s', '4 min'."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{max(1, math.ceil(seconds))} s"
    if seconds < 60:
        return f"{round(seconds / 5) * 5:.0f} s"
    minutes, rest = divmod(round(seconds / 10) * 10, 60)
    return f"{minutes:.0f} min" + (f" {rest:.0f} s" if rest and minutes < 5 else "")
