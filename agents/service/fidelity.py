"""Simulator checks of the customer-service user (simulated or replayed).

Run over a finished session's state by the engine (``simulator_checks`` in
graphs/customer_service.py). They read what the user said, so they hold for the rule-based agenda
simulator (which must never trip them, tested over many goals), for an LLM user that words the
agenda, and for replayed MultiWOZ dialogues.

- ``_check_goal_leak`` (simulated users): the utterance exposes the hidden goal's internals (slot
  keys such as ``pricerange``/``bookpeople``, a dict or JSON dump, "my goal/task/instructions").
- ``_check_agent_voice``: the user answers as the agent ("how can I help", "I have booked",
  "your reference number is").
- ``_check_replay_exhausted`` (replay): the recording ran out of user turns before the customer
  closed the dialogue (its last user turn is no goodbye/thanks), so the rest of the agent's
  behaviour was never exercised; typically a truncated dialogue or a prefix longer than it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

GOAL_INTERNALS = re.compile(
    r"\b(pricerange|bookpeople|booktime|bookday|bookstay|leaveat|arriveby|fail_book|fail_info)\b|"
    r"[{}]|\bmy (hidden )?(goal|task|instructions)\b|\b(goal|task)\s*:", re.IGNORECASE)
AGENT_VOICE = re.compile(
    r"^\s*(system|assistant|agent)\s*:|\bhow (can|may) i (help|assist)\b|"
    r"\bis there anything else (i|we) can\b|\bi(?: have|'ve) (booked|reserved|made (a|the|your) (booking|reservation))\b|"
    r"\byour reference (number|code) is\b|\bbooking was successful\b", re.IGNORECASE)
CLOSING = re.compile(r"\b(bye|goodbye|thanks?|thank you|that'?s all|that is all|nothing else|no,? that)\b",
                     re.IGNORECASE)


def _user_turns(state: Mapping) -> list[dict]:
    """What the simulator said: scripted opening turns (convsim/prefix.py) are not its words."""
    return [t for t in state.get("transcript") or [] if str(t.get("speaker", "")).lower() == "user"
            and not (t.get("meta") or {}).get("scripted")]


def _first_user_match(state: Mapping, pattern: re.Pattern, check: str, what: str) -> list[dict]:
    """A flag for the first user turn ``pattern`` finds (``what``: how the detail names it)."""
    for t in _user_turns(state):
        m = pattern.search(t.get("text") or "")
        if m:
            return [{"check": check, "detail": f"turn {t.get('turn')}: the user {what} ({m.group(0).strip()!r})"}]
    return []


def _check_goal_leak(state: Mapping) -> list[dict]:
    if state.get("mode") != "simulate":
        return []  # a replayed customer states its own goal; nothing is hidden
    return _first_user_match(state, GOAL_INTERNALS, "_check_goal_leak", "exposes its goal")


def _check_agent_voice(state: Mapping) -> list[dict]:
    return _first_user_match(state, AGENT_VOICE, "_check_agent_voice", "speaks as the agent")


def _check_replay_exhausted(state: Mapping) -> list[dict]:
    if state.get("mode") != "replay" or state.get("termination") != "replay_end":
        return []
    turns = (state.get("replay") or {}).get("turns") or []
    last = (turns[-1].get("user") or "") if turns else ""
    if not last.strip() or CLOSING.search(last):  # no recorded words to judge, or the customer closed
        return []
    return [{"check": "_check_replay_exhausted",
             "detail": f"the recording ran out after {len(turns)} user turn(s) without the customer closing "
                       f"(last: {last[:80]!r})"}]


CHECKS = (_check_goal_leak, _check_agent_voice, _check_replay_exhausted)


def service_simulator_checks(state: Mapping) -> list[dict]:
    """Every flag of every check (empty: the user, simulated or replayed, behaved)."""
    return [flag for check in CHECKS for flag in check(state)]
