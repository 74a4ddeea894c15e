"""Fields the CRS living spec names that are not TAS fields: ``name`` (titles) and ``plot`` / ``plot_kw``
(plot keywords). The original system's simulator states constraints and shifts its focus on them
(20,657 ``plot`` and 1,820 ``name`` constraints in 600 logged sessions; 882 turns focused on
them). An imported log keeps them (``user_meta.excluded_constraints``, ``focus_excluded``), they
are left out of TAS and the DST-style gold (the CRS living spec: "excluded from TAS by default and only used
for appendix/debug"), and they are counted per dialogue (:func:`excluded_counts`).

Enabled (the crs_shift param ``tas_plot_name: true``, ``TASSettings.plot_name``), they are TAS
concepts beside the catalog fields, in CC, CR and TAS of every turn and so in ``tas_grounded`` and
the segment metrics (the DST gold stays the catalog fields'). :func:`excluded_concepts` finds them
in a text:

* ``("name", title)``: each catalog film the text names (the extractor's title match), and each
  ``name`` constraint of the user turn that the text holds (casefolded, a film outside the catalog);
* ``("plot", keyword)``: each ``plot`` / ``plot_kw`` constraint of the user turn that the text
  holds as a word or phrase (casefolded, at word boundaries).

The same user turn's constraints are looked for in the user's text and in the reply, so a reply
that takes up the user's plot keyword or names the film the user named shares that concept.
:class:`ExcludedIdf` weighs them as the catalog weighs its fields, ln((1+N)/(1+df)) + 1: a title
names one film (df 1), a plot keyword is in the plots of df films.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

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


def _values(value) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [v.strip() for v in items if isinstance(v, str) and v.strip()]


def _has_phrase(text_folded: str, phrase: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase.casefold()) + r"(?!\w)", text_folded) is not None


def excluded_constraint_values(user: Mapping) -> tuple[list[str], list[str]]:
    """``(names, plot keywords)`` the user turn states (``meta.excluded_constraints``)."""
    meta = user.get("meta") or {}
    inner = meta.get("user_meta") if isinstance(meta.get("user_meta"), dict) else meta
    excluded = inner.get("excluded_constraints") or {}
    names = _values(excluded.get("name", []))
    plots = _values(excluded.get("plot", [])) + _values(excluded.get("plot_kw", []))
    return names, list(dict.fromkeys(plots))


def excluded_concepts(text: str, user: Mapping, extractor) -> set[tuple[str, str]]:
    """The ``name`` and ``plot`` concepts of ``text`` (module docstring) given the user turn ``user``."""
    folded = text.casefold()
    names, plots = excluded_constraint_values(user)
    out: set[tuple[str, str]] = set()
    by_id = extractor.catalog.by_id
    for i in extractor.extract_titles(text):
        if i in by_id:
            out.add(("name", by_id[i].title.casefold()))
    out.update(("name", n.casefold()) for n in names if _has_phrase(folded, n))
    out.update(("plot", k.casefold()) for k in plots if _has_phrase(folded, k))
    return out


class ExcludedIdf:
    """The catalog's idf (``MovieCatalog.idf``) with the ``name`` and ``plot`` fields added: a
    title's df is 1, a plot keyword's the number of films whose plot holds it (0 for none)."""

    def __init__(self, catalog, base: Callable[[str, object], float] | None = None):
        self.catalog = catalog
        self.base = base if base is not None else catalog.idf
        self._plots = [m.plot.casefold() for m in catalog.movies]
        self._memo: dict[str, float] = {}

    def __call__(self, field: str, value) -> float:
        n = len(self.catalog.movies)
        if field == "name":
            return math.log((1 + n) / 2) + 1.0
        if field == "plot":
            w = self._memo.get(value)
            if w is None:
                df = sum(_has_phrase(p, str(value)) for p in self._plots)
                w = self._memo[value] = math.log((1 + n) / (1 + df)) + 1.0
            return w
        return self.base(field, value)
