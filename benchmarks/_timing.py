"""Repeated timings reported as a median with their spread, for the standalone bench scripts.

A single best-of figure hides how much a measurement moves on a shared machine.
``Spread`` keeps every run, so a table can show the median and the range (or IQR)
next to each other. ``paired`` times two callables in alternation, one of each
per round, so a ratio is taken between runs made under the same load: the ratio's
spread is that of the per-round ratios, not of two independent medians.

Times are the process's CPU time (``time.process_time``: user + system, page
faults included), not wall time: on a machine shared with other jobs, time spent
waiting for a core is noise that wall clocks add and CPU time does not. Code
that waits (I/O, other processes) must be timed with a wall clock instead.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """Values of one measurement over repeated runs (seconds, or ratios)."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def iqr(self) -> tuple[float, float]:
        """First and third quartiles (the middle half of the runs lies between them)."""
        if len(self.values) < 2:
            return self.low, self.high
        q1, _, q3 = statistics.quantiles(self.values, n=4, method="inclusive")
        return q1, q3

    def map(self, fn: Callable[[float], float]) -> Spread:
        """The same runs through ``fn`` (e.g. seconds to frames per second)."""
        return Spread(tuple(fn(v) for v in self.values))

    def show(self, scale: float = 1.0, digits: int = 2) -> str:
        """``median [q1-q3] (min-max)``, every value times ``scale``."""
        q1, q3 = self.iqr
        f = f"{{:.{digits}f}}"
        return (
            f"{f.format(self.median * scale)} [{f.format(q1 * scale)}-{f.format(q3 * scale)}]"
            f" ({f.format(self.low * scale)}-{f.format(self.high * scale)})"
        )


def timed(fn: Callable[[], object]) -> float:
    """CPU seconds of one call of ``fn`` (see the module's docstring)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def repeat(fn: Callable[[], object], runs: int, warmup: int = 1) -> Spread:
    """Seconds per call of ``fn`` over ``runs`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    return Spread(tuple(timed(fn) for _ in range(runs)))


def alternating(fns: list[Callable[[], object]], runs: int, warmup: int = 1) -> list[Spread]:
    """Seconds per call of each of ``fns``, timed in turn, one call of each per round,
    so runs of different callables at the same index were made side by side."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, out in zip(fns, times):
            out.append(timed(fn))
    return [Spread(tuple(t)) for t in times]


def per_round(first: Spread, second: Spread) -> Spread:
    """second / first of each round (see alternating): with times, how many times faster ``first`` runs."""
    return Spread(tuple(y / x for x, y in zip(first.values, second.values)))


def paired(
    first: Callable[[], object], second: Callable[[], object], runs: int, warmup: int = 1
) -> tuple[Spread, Spread, Spread]:
    """(seconds of first, seconds of second, per-round ratio second / first): the two
    alternate, one call each per round, so each ratio compares runs made side by side.
    With times, second / first is how many times faster ``first`` runs."""
    a, b = alternating([first, second], runs, warmup)
    return a, b, per_round(a, b)
