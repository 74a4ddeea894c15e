"""Simulator health of one CRS session and of a run: is the simulated dialogue one a metric can
read? (docs/crs_shift.md "Simulator health").

A simulator that piles up constraints until one film satisfies them makes every recommender
repeat that film; a "shift" that keeps the anchor or asks for a value already required is no
shift; a user that reacts to the recommender breaks the pairing of sessions across variants.
These figures make each of those visible:

* ``health_candidates_ge3_share``: share of recommender turns whose user constraints (the
  simulator's gold constraints of the user turn answered) are satisfied by >= 3 catalog films;
  ``health_candidates_min``: the fewest such films in any turn.
* ``health_repeat_rate``: share of films named by the recommender that it had already named
  earlier in the session.
* ``health_shifts_focus_changed`` / ``health_shifts_anchor_changed``: shifts whose new focus
  value was not already required (and differs from the old focus) / whose anchor film changed,
  out of ``health_n_shifts``.
* ``health_first_reaction_turn``: the first user turn that depended on what the recommender
  said (an accepted title); paired users are identical before it. None = never (strict pairing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

CANDIDATE_FLOOR = 3


def _meta(turn: Mapping) -> dict:
    return turn.get("meta") or {}


def _user(turn: Mapping) -> bool:
    return str(turn.get("speaker", "")).lower() == "user"


def candidates_of(meta: Mapping, catalog=None) -> int | None:
    """Films satisfying the user's gold constraints of a turn (logged by the simulator, else
    counted in ``catalog`` when given)."""
    if meta.get("n_satisfying") is not None:
        return int(meta["n_satisfying"])
    if catalog is not None and isinstance(meta.get("constraints"), dict):
        return len(catalog.search(meta["constraints"]))
    return None


def shift_changed_focus(event: Mapping, required_before: Mapping) -> bool:
    """A shift changes the focus when its new focus value differs from the old focus and was not
    already one of the user's required values."""
    field, value = event["to_focus"]
    if list(event["to_focus"]) == list(event["from_focus"]):
        return False
    return str(required_before.get(field)) != str(value)


def session_health(transcript: Sequence[Mapping], catalog=None) -> dict:
    counts, named, repeats, seen = [], 0, 0, set()
    n_shifts = focus_changed = anchor_changed = 0
    first_reaction = None
    previous_constraints: dict = {}
    pending = None
    for turn in transcript:
        meta = _meta(turn)
        if _user(turn):
            pending = meta
            shift = meta.get("shift")
            if shift:
                n_shifts += 1
                focus_changed += shift_changed_focus(shift, previous_constraints)
                anchor_changed += shift.get("from_anchor") != shift.get("to_anchor")
            if meta.get("reaction") and first_reaction is None:
                first_reaction = meta.get("turn", turn.get("turn"))
            previous_constraints = dict(meta.get("constraints") or {})
            continue
        if pending is not None:
            counts.append(candidates_of(pending, catalog))
            pending = None
        for film in meta.get("mentioned_ids") or []:
            named += 1
            repeats += film in seen
            seen.add(film)
    known = [c for c in counts if c is not None]
    return {
        "health_candidates_ge3_share": (sum(c >= CANDIDATE_FLOOR for c in known) / len(known)
                                        if known else None),
        "health_candidates_min": min(known) if known else None,
        "health_repeat_rate": repeats / named if named else None,
        "health_n_shifts": n_shifts,
        "health_shifts_focus_changed": focus_changed,
        "health_shifts_anchor_changed": anchor_changed,
        "health_first_reaction_turn": first_reaction,
        "_candidates": known, "_named": named, "_repeats": repeats,
    }


def health_metrics(transcript: Sequence[Mapping], catalog=None) -> dict:
    """The per-session figures (dialogue metrics), without the pooled counts."""
    return {k: v for k, v in session_health(transcript, catalog).items() if not k.startswith("_")}


class HealthTally:
    """Run-level health, one session at a time (see :func:`pooled_health`): only counts are kept."""

    def __init__(self, catalog=None) -> None:
        self.catalog = catalog
        self.cands: list[int] = []
        self.named = self.repeats = self.shifts = self.focus = self.anchor = 0
        self.reactions: list[int] = []

    def add(self, record: Mapping) -> None:
        h = session_health(record.get("transcript") or [], self.catalog)
        self.cands += h["_candidates"]
        self.named += h["_named"]
        self.repeats += h["_repeats"]
        self.shifts += h["health_n_shifts"]
        self.focus += h["health_shifts_focus_changed"]
        self.anchor += h["health_shifts_anchor_changed"]
        if h["health_first_reaction_turn"] is not None:
            self.reactions.append(h["health_first_reaction_turn"])

    def result(self) -> dict:
        cands, reactions = self.cands, sorted(self.reactions)
        return {
            "health_candidates_ge3_share": (sum(c >= CANDIDATE_FLOOR for c in cands) / len(cands)
                                            if cands else None),
            "health_candidates_le1_share": sum(c <= 1 for c in cands) / len(cands) if cands else None,
            "health_repeat_rate": self.repeats / self.named if self.named else None,
            "health_shifts_total": self.shifts,
            "health_shifts_focus_changed": self.focus,
            "health_shifts_anchor_changed": self.anchor,
            "pairing": "strict" if not reactions else "reactive",
            "pairing_sessions_reacting": len(reactions),
            "pairing_first_divergence_turn_min": reactions[0] if reactions else None,
            "pairing_first_divergence_turn_median": reactions[len(reactions) // 2] if reactions else None,
        }


def pooled_health(records: Iterable[Mapping], catalog=None) -> dict:
    """Run-level health: figures pooled over all turns / shifts / films of all sessions, and the
    pairing design actually achieved (``strict`` when no simulated user ever reacted to the
    recommender, so paired users are identical through the whole session)."""
    tally = HealthTally(catalog)
    for r in records:
        tally.add(r)
    return tally.result()
