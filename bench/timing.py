"""The one timing rule of the benchmark scripts: the median of repeated runs.

Wall time is what a user waits for; process CPU time (every thread of this process) is what the
work costs, and on a machine shared with other jobs it moves far less than wall time, so the
benches that compare in-process arms print both.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` calls of ``fn`` (seconds)."""
    return median_times(fn, repeat)[0]


def median_times(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall time and median process CPU time of ``repeat`` calls of ``fn`` (seconds)."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return statistics.median(walls), statistics.median(cpus)
