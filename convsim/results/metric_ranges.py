"""The ranges a graph file declares for its metrics (``METRIC_RANGES``), and what they are for.

A graph file may declare the range of its dialogue metrics::

    METRIC_RANGES = {"accuracy": (0.0, 1.0), "answer_words": (0.0, None), "W*": (0.0, 1.0)}

``(low, high)``: numbers, ``None`` for an unbounded side. A name may hold ``*``, which matches any
run of characters (``"W*"``: ``W1``, ``W2``, ``W1_all_members``); no other character is special. The
exact name wins over a pattern, and among patterns the first one declared that matches. Declare
only what follows from a metric's definition (a share is in [0, 1], Cohen's kappa in [-1, 1]): a
range is a promise about every value the metric can take.

What the engine does with it:

* a mean's confidence interval is clipped to the range (:func:`clip_to`, ``ci_clipped: true``
  beside ``ci_method``; ``false`` when the interval was inside it already). The true mean of a
  metric in [low, high] lies in [low, high], so the clipped interval contains it whenever the
  unclipped one did: its coverage is unchanged, and it no longer reaches impossible values (a
  Student t interval of a share ending at 1.005). This is the standard remedy for an interval that
  leaves the parameter space (Mandelkern 2002, "Setting confidence intervals for bounded
  parameters", Statistical Science 17:149);
* a difference of two means of a metric in [low, high] lies in [low - high, high - low]
  (:func:`difference_range`), and its interval is clipped to that when both sides are bounded;
* a value outside the declared range is a bug in the metric (or in the declaration): the run's
  warnings name the metric, the variant and the sessions, and that variant's interval is left as
  computed (clipping rests on the range holding, which the values just disproved). Values within
  ``RANGE_TOLERANCE`` (1e-6, relative) of a bound count as inside: float32 rounding (an embedding
  cosine of 1.0000000715) is not a bug.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from convsim.errors import ConvsimError

Range = tuple[float | None, float | None]
FIELD = "METRIC_RANGES"
# a value this close to a bound, relative to max(1, |bound|), is inside: floating-point rounding must not
# read as a bug in the metric (the float32 cosine of an embedding with itself is 1.0000000715, seen on the
# parrot reference's tas_cas_cross_coherence; float32 carries ~7 significant digits)
RANGE_TOLERANCE = 1e-6


def _bound(value: Any, name: str, side: str, file: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ConvsimError(f"{name!r}: the {side} bound must be a finite number or None, got {value!r}",
                           file=file, field=FIELD)
    return float(value)


def check_metric_ranges(declared: Any, *, file: object = None) -> dict[str, Range]:
    """``METRIC_RANGES`` as ``{name: (low, high)}`` with float bounds, or one ConvsimError naming the
    file, the field and the entry that is wrong (bad input: exit 2). ``None`` or absent: ``{}``."""
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise ConvsimError(f"must be a dict {{metric: (low, high)}}, got {type(declared).__name__}",
                           file=file, field=FIELD)
    out: dict[str, Range] = {}
    for name, bounds in declared.items():
        if not isinstance(name, str) or not name.strip():
            raise ConvsimError(f"a metric name must be a non-empty string, got {name!r}", file=file, field=FIELD)
        if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
            raise ConvsimError(f"{name!r}: must be a pair (low, high), None for an unbounded side, got {bounds!r}",
                               file=file, field=FIELD)
        low, high = _bound(bounds[0], name, "low", file), _bound(bounds[1], name, "high", file)
        if low is not None and high is not None and not low < high:
            raise ConvsimError(f"{name!r}: low must be below high, got ({low:g}, {high:g})", file=file, field=FIELD)
        out[name] = (low, high)
    return out


def metric_ranges(module: Any) -> dict[str, Range]:
    """A graph module's checked ``METRIC_RANGES`` (``{}`` when it declares none, or for no module)."""
    if module is None:
        return {}
    return check_metric_ranges(getattr(module, FIELD, None), file=getattr(module, "__file__", None))


@functools.lru_cache(maxsize=1024)
def _pattern(name: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in name.split("*")) + r"\Z")


def range_of(ranges: Mapping[str, Range], metric: str) -> Range | None:
    """The declared range of ``metric``: its exact name, else the first ``*`` pattern that matches;
    None when nothing is declared for it (or both sides are unbounded)."""
    found = ranges.get(metric)
    if found is None:
        found = next((r for name, r in ranges.items() if "*" in name and _pattern(name).match(metric)), None)
    if found is None or found == (None, None):
        return None
    return found


def hull(*ranges: Range | None) -> Range | None:
    """The smallest range holding every one given (None when any is None: one side is undeclared)."""
    if not ranges or any(r is None for r in ranges):
        return None
    lows, highs = [r[0] for r in ranges], [r[1] for r in ranges]
    return (None if None in lows else min(lows), None if None in highs else max(highs))


def difference_range(bounds: Range | None) -> Range | None:
    """The range of a difference of two means of a metric in [low, high]: [low - high, high - low];
    None unless both sides are bounded."""
    if bounds is None or bounds[0] is None or bounds[1] is None:
        return None
    return (bounds[0] - bounds[1], bounds[1] - bounds[0])


def outside(values: Iterable[float] | np.ndarray, bounds: Range | None) -> np.ndarray:
    """A boolean mask of the finite values outside ``bounds`` by more than ``RANGE_TOLERANCE``."""
    xs = np.asarray(values, dtype=float)
    mask = np.zeros(xs.shape, dtype=bool)
    if bounds is None:
        return mask
    low, high = bounds
    with np.errstate(invalid="ignore"):
        if low is not None:
            mask |= xs < low - RANGE_TOLERANCE * max(1.0, abs(low))
        if high is not None:
            mask |= xs > high + RANGE_TOLERANCE * max(1.0, abs(high))
    return mask


def clip_to(ci: dict, bounds: Range | None) -> dict:
    """``ci`` (a dict with ``ci_low`` and ``ci_high``) with its interval clipped to ``bounds``, and
    ``ci_clipped``: True when an end moved, False when it was inside already (or there is no
    interval). ``bounds`` None: ``ci`` unchanged, no ``ci_clipped``. Changes ``ci`` in place."""
    if bounds is None:
        return ci
    low, high = ci.get("ci_low"), ci.get("ci_high")
    ci["ci_clipped"] = False
    if low is None or high is None:
        return ci
    lo, hi = (-math.inf if bounds[0] is None else bounds[0]), (math.inf if bounds[1] is None else bounds[1])
    new_low, new_high = min(max(low, lo), hi), max(min(high, hi), lo)
    if (new_low, new_high) != (low, high):
        ci.update(ci_low=float(new_low), ci_high=float(new_high), ci_clipped=True)
    return ci


def describe_range(bounds: Range) -> str:
    """``[0, 1]``, ``[0, ∞)``: a range as the warnings print it."""
    low = "(-∞" if bounds[0] is None else f"[{bounds[0]:g}"
    high = "∞)" if bounds[1] is None else f"{bounds[1]:g}]"
    return f"{low}, {high}"


def out_of_range_warning(variant: str, metric: str, sessions: int, bounds: Range) -> str:
    """The run's warning for ``sessions`` sessions of ``variant`` with a ``metric`` value outside
    its declared range."""
    return (f"variant {variant}: metric {metric}: {sessions} session{'s' * (sessions != 1)} with a value "
            f"outside its declared range {describe_range(bounds)} (METRIC_RANGES): a bug in the metric or "
            "the declaration; its interval is not clipped")
