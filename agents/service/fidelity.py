"""Simulator checks of the customer-service user (simulated or replayed).

Run over a finished session's state by the engine (``simulator_checks`` in
graphs/customer_service.py). They read what the user said, so they hold for the rule-based agenda
simulator (which must never trip them, tested over many goals), for an LLM user that words the
agenda, and for replayed MultiWOZ dialogues.

- ``_check_goal_leak`` (simulated users): the utterance exposes the hidden goal's internals (slot
  keys such as ``pricerange``/``bookpeople``, a dict or JSON dump, "my goal/task/instructions").
- ``_check_agent_voice``: the user answers as the agent ("how can I help", "I have booked",
  "your reference number is").
- ``misstated_values`` (simulated users, called by the user node on every simulated utterance):
  the text is parsed with the rule NLU's slot extraction (``agents/service/triage.py``: the
  domain's areas, price ranges, foods, types, stations, days, times, counts, names) and every
  slot the move informs is compared with the value the simulator meant to disclose (its gold
  state). A slot the parse finds with another value is a *misstatement* ("for 3 people" when the
  goal says 5); a slot the parse does not find is not (a paraphrase the rules cannot read). The
  node records the list in the user turn's ``meta.misstated`` and the evaluator's simulator check
  ``user_misstated`` flags the session ``simulator_failure``: the customer said something other
  than its goal, so what follows is not the agent's score.
- ``_check_replay_exhausted`` (replay): the recording ran out of user turns before the customer
  closed the dialogue (its last user turn is no goodbye/thanks), so the rest of the agent's
  behaviour was never exercised; typically a truncated dialogue or a prefix longer than it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from agents.service.triage import _book_slots, _find_name, _lexicon, _search_slots
from catalog.service.normalize import DONTCARE, canonical_name, normalize_value

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


def stated_values(text: str, domain: str, db) -> dict[str, str]:
    """The slot values of ``domain`` that the rule NLU reads in ``text`` (normalised)."""
    low = " " + text.lower().replace("’", "'") + " "
    lex = _lexicon(db)
    slots = dict(_search_slots(domain, low, lex))
    if domain != "attraction":
        slots.update(_book_slots(domain, low))
        # the rules read "for 16:30" as 16 people: counts are read with the clock times masked
        masked = _book_slots(domain, re.sub(r"\d{1,2}[:.]\d{2}", " ", low))
        for slot in ("bookpeople", "bookstay"):
            slots.pop(slot, None)
            if slot in masked:
                slots[slot] = masked[slot]
    named = _find_name(low, lex)
    if named and named[0] == domain:
        slots["name"] = canonical_name(named[1])
    return slots


# said by negation or paraphrase ("I won't have a car so parking is irrelevant"), which the rules
# misread: their parse would charge the NLU's error to the simulator, so they are not compared
UNCOMPARED = frozenset({"parking", "internet"})


def _same(slot: str, said: str, meant: str) -> bool:
    if slot == "name":
        strip = lambda v: re.sub(r"^the ", "", canonical_name(str(v)))  # noqa: E731
        return strip(said) == strip(meant)
    return normalize_value(slot, said) == normalize_value(slot, meant)


def misstated_values(text: str, out: Mapping, db) -> list[dict]:
    """``[{"slot", "meant", "said"}]``: slots the move informs that the text states with another
    value than the simulator meant (its gold state after the move); [] when all agree."""
    domain = out.get("gold_domain")
    if not text or domain not in ("restaurant", "hotel", "attraction", "train"):
        return []
    state = out.get("gold_state") or {}
    meant = {}
    for act in out.get("user_acts") or []:
        slot = act.get("slot")
        if act.get("intent") != "inform" or not slot or slot in UNCOMPARED or act.get("domain", domain) != domain:
            continue
        values = state.get(f"{domain}-{slot}") or []
        value = values[0] if isinstance(values, list) and values else values
        if value and value != DONTCARE:
            meant[slot] = str(value)
    if not meant:
        return []
    said = stated_values(text, domain, db)
    return [{"slot": slot, "meant": value, "said": said[slot]} for slot, value in meant.items()
            if said.get(slot) not in (None, DONTCARE) and not _same(slot, said[slot], value)]


CHECKS = (_check_goal_leak, _check_agent_voice, _check_replay_exhausted)


def service_simulator_checks(state: Mapping) -> list[dict]:
    """Every flag of every check (empty: the user, simulated or replayed, behaved)."""
    return [flag for check in CHECKS for flag in check(state)]
