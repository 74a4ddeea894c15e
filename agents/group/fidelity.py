"""Simulator checks of the simulated group members (graphs/group_planning.py).

- ``_check_member_profile``: a member's preference turn does not state the option its own profile
  holds for that slot, or asks for the option it rejects ("no Seafood" in its profile, "Seafood
  please" said). The rule-based members speak their profile's own text, so they never trip it;
  it is there for members worded by a model.

Ending early or never, and speaking as the agent, do not apply: members speak once per slot on the
planner's schedule and never converse freely.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from convsim.agents.group.members import ROOM_TYPE_TEXT


def _spoken_forms(option: str) -> set[str]:
    """How an option may be said: as is, with spaces for underscores, or the room type's phrase."""
    phrase = ROOM_TYPE_TEXT.get(option, "")
    phrase = re.sub(r"^(an?|the)\s+", "", phrase.lower())
    return {f for f in (option.lower(), option.lower().replace("_", " "), phrase) if f}


def _check_member_profile(state: Mapping) -> list[dict]:
    for t in state.get("member_turns") or []:
        meta, text = t.get("meta") or {}, (t.get("text") or "").lower()
        option, reject = meta.get("preference_option"), meta.get("preference_reject")
        if option and not any(form in text for form in _spoken_forms(str(option))):
            return [{"check": "_check_member_profile",
                     "detail": f"{t.get('speaker')} on {meta.get('slot')}: does not state its option {option!r}"}]
        if reject and re.search(rf"\b(want|like|prefer|love)\s+(some\s+|a\s+)?{re.escape(str(reject).lower())}\b", text):
            return [{"check": "_check_member_profile",
                     "detail": f"{t.get('speaker')} on {meta.get('slot')}: asks for {reject!r}, which it rejects"}]
    return []


def group_simulator_checks(state: Mapping) -> list[dict]:
    return _check_member_profile(state)
