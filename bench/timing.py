"""The one timing rule of the benchmark scripts: the median of repeated runs.

Wall time is what a user waits for; process CPU time (every thread of this process) is what the
work costs, and on a machine shared with other jobs it moves far less than wall time, so the
benches that compare in-process arms print both, and the least CPU time of the repeats.
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


def interleaved_medians(arms: dict[str, Callable[[], object]], repeat: int
                        ) -> dict[str, tuple[float, float, float]]:
    """Median wall, median CPU and least CPU time of every arm, the arms taking turns (round ``i``
    runs each arm once): a burst of load from other jobs then slows every arm a little rather than
    one arm a lot. The least CPU time is the least disturbed run (as ``timeit`` reports)."""
    walls: dict[str, list[float]] = {name: [] for name in arms}
    cpus: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(repeat):
        for name, fn in arms.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpus[name].append(time.process_time() - c0)
            walls[name].append(time.perf_counter() - w0)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name]), min(cpus[name]))
            for name in arms}
