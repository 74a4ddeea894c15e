"""Fields the CRS living spec names that are not TAS fields: ``name`` (titles) and ``plot`` / ``plot_kw``
(plot keywords). The original system's simulator states constraints and shifts its focus on them
(20,657 ``plot`` and 1,820 ``name`` constraints in 600 logged sessions; 882 turns focused on
them). An imported log keeps them (``user_meta.excluded_constraints``, ``focus_excluded``), they
are left out of TAS and the DST-style gold (the CRS living spec: "excluded from TAS by default and only used
for appendix/debug"), and they are counted per dialogue (:func:`excluded_counts`). Including them
in TAS is not implemented: the concept extractor has no plot-keyword or title field.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

EXCLUDED_FIELDS = ("name", "plot", "plot_kw")


def split_constraints(constraints: Mapping) -> tuple[dict, dict]:
    """``(TAS constraints, excluded constraints)``: the excluded fields moved out, each kept as given."""
    kept = {k: v for k, v in constraints.items() if k not in EXCLUDED_FIELDS}
    excluded = {k: v for k, v in constraints.items() if k in EXCLUDED_FIELDS}
    return kept, excluded


def excluded_counts(transcript: Sequence[Mapping]) -> dict:
    """Per dialogue: the excluded constraint values stated over the user turns (a list value counts
    each item), per field, and the user turns whose focus was an excluded field."""
    out = {f"constraints_excluded_{f}": 0 for f in ("name", "plot")}
    focus = 0
    for e in transcript:
        if e.get("speaker") != "user":
            continue
        meta = e.get("meta") or {}
        for field, value in (meta.get("excluded_constraints") or {}).items():
            key = f"constraints_excluded_{'plot' if field == 'plot_kw' else field}"
            out[key] += len(value) if isinstance(value, list) else 1
        focus += bool(meta.get("focus_excluded"))
    out["focus_excluded_turns"] = focus
    return out
