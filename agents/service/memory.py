"""Memory agent: the accumulated belief state per domain, with cross-domain carry-over.

The belief is ``{domain: {slot: value}}``. New values overwrite old ones; a new ``name``
replaces the chosen entity. When the user refers back ("a hotel in the same area"), the
referred slots (area, pricerange: the transferable search constraints of MAS4CS) are copied
from the most recently active other domain that has them, and each copy is logged as a
transfer event ``{turn, from, to, slot, value}``.
"""
from __future__ import annotations

import copy

TRANSFERABLE_SLOTS = ("area", "pricerange")


def update_belief(belief: dict, *, domain: str | None, slots: dict[str, str],
                  refer: list[str], domain_history: list[str], turn: int) -> tuple[dict, list[dict]]:
    """The new belief and the transfer events of this turn (pure; ``belief`` is not mutated)."""
    new = copy.deepcopy(belief)
    events: list[dict] = []
    if not domain or domain == "general":
        return new, events
    frame = new.setdefault(domain, {})
    for slot in refer:
        if slot not in TRANSFERABLE_SLOTS or slot in slots:
            continue
        for source in reversed(domain_history):
            value = new.get(source, {}).get(slot)
            if source != domain and value:
                frame[slot] = value
                events.append({"turn": turn, "from": source, "to": domain, "slot": slot,
                               "value": value})
                break
    frame.update(slots)
    return new, events


def flat_belief(belief: dict) -> dict[str, str]:
    """``{'hotel': {'area': 'east'}}`` -> ``{'hotel-area': 'east'}`` (the metrics' format)."""
    return {f"{d}-{s}": v for d, slots in belief.items() for s, v in slots.items() if v}
