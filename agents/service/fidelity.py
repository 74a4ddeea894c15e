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
  slot it reads that the simulator has disclosed is compared with the value it meant (its gold
  state after the move), as is a value of the move said under another slot of its kind
  ("leaving after 06:45" for "arriving by 06:45"). A slot the parse finds with another value is a
  *misstatement* ("for 3 people" when the goal says 5); a slot the parse does not find is not (a
  paraphrase the rules cannot read). The
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

from convsim.agents.service.triage import DOMAIN_WORDS, _book_slots, _domain_of, _find_name, _lexicon, _search_slots
from convsim.catalog.service.normalize import DONTCARE, canonical_name, normalize_value

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
    """What the simulator said: scripted opening turns (convsim/running/prefix.py) are not its words."""
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


def _padded_lower(text: str) -> str:
    """The text as the rules read it: lower case, typographic apostrophes plain, a space each side."""
    return " " + text.lower().replace("’", "'") + " "


def stated_values(text: str, domain: str, db) -> dict[str, str]:
    """The slot values of ``domain`` that the rule NLU reads in ``text`` (normalised)."""
    low = _padded_lower(text)
    lex = _lexicon(db)
    slots = dict(_search_slots(domain, low, lex))
    # an area word inside a food, a venue name or a kind of place ("north american food", "granta
    # sports centre", "something like a sports centre") is no area: the area is read with those masked
    masked = re.sub(r"\b(sports?|leisure|shopping|arts|community|visitor) cent(re|er)\b", " ", low)
    for phrase in [f for f in lex["foods"] if f in low] + [n for n, _, _ in lex["names"] if n in low]:
        masked = re.sub(rf"\b{re.escape(phrase)}\b", " ", masked)
    slots.pop("area", None)
    if "area" in (area := _search_slots(domain, masked, lex)):
        slots["area"] = area["area"]
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


# a value said under another slot of its kind ("leaving after 06:45" for "arriving by 06:45",
# "a room for 3 nights" for "3 stars"): the parse reads the other slot with the meant value
SAME_KIND = {"arriveby": ("leaveat",), "leaveat": ("arriveby",), "stars": ("bookstay", "bookpeople"),
             "bookpeople": ("bookstay", "stars"), "bookstay": ("bookpeople", "stars")}


def misstated_values(text: str, out: Mapping, db) -> list[dict]:
    """``[{"slot", "meant", "said"}]``: values the text states other than the simulator meant, []
    when all agree. Compared: every slot the parse reads whose value the simulator has disclosed
    (its gold state after the move, so the move's own slots and the earlier ones: "from cambridge
    to ely" after "from london liverpool street" is a misstatement), and a value of the move said
    under another slot of its kind that the gold state lacks (``SAME_KIND``; ``said`` is then
    "<slot> <value>")."""
    domain = out.get("gold_domain")
    if not text or domain not in ("restaurant", "hotel", "attraction", "train"):
        return []
    state = out.get("gold_state") or {}

    def gold(slot: str) -> str | None:
        values = state.get(f"{domain}-{slot}") or []
        value = values[0] if isinstance(values, list) and values else values
        return str(value) if value and value != DONTCARE and slot not in UNCOMPARED else None

    other = misstated_domain(text, domain, db)
    if other is not None:  # its slots would be read as the other domain's: the domain says it all
        return [{"slot": "domain", "meant": domain, "said": other}]
    informed = [a.get("slot") for a in out.get("user_acts") or [] if a.get("intent") == "inform"
                and a.get("slot") and a.get("domain", domain) == domain and gold(a.get("slot"))]
    said = {k: v for k, v in stated_values(text, domain, db).items() if v not in (None, DONTCARE)}
    found = [{"slot": slot, "meant": gold(slot), "said": value} for slot, value in said.items()
             if gold(slot) and not _same(slot, value, gold(slot))]
    for slot in informed:
        if slot in said:
            continue
        other = next((o for o in SAME_KIND.get(slot, ()) if o in said and not gold(o)
                      and normalize_value(o, said[o]) == normalize_value(slot, gold(slot))), None)
        if other:
            found.append({"slot": slot, "meant": gold(slot), "said": f"{other} {said[other]}"})
    return found


TASK_DOMAINS = ("restaurant", "hotel", "attraction", "train")
_LANDMARK = re.compile(r"\b(?:near|close to|next to|around|by|as|from|to)\s+(?:the|that|my|our|this)\s+\w+"
                       r"(?:\s+(?:we|i)\s+(?:talked|spoke|asked)\s+about)?")


def misstated_domain(text: str, domain: str, db) -> str | None:
    """The other task domain an utterance asks for while naming nothing of the simulator's own ("a
    restaurant in the west" from a customer looking for an attraction), or None. Read with the
    triage rules' domain words and venue names; an utterance with no domain word (a day, a count,
    "yes, book it") or one that also names the simulator's domain is none."""
    low = _padded_lower(text)
    named = _find_name(low, _lexicon(db))
    # another domain named as a landmark ("near the attraction we talked about", "in that same
    # neighbourhood as the restaurant") is where, not what: masked
    low = _LANDMARK.sub(" ", low)
    if named and named[0] == domain or re.search(rf"\b(?:{DOMAIN_WORDS[domain]})", low):
        return None
    said = _domain_of(low, None, named)
    return said if said in TASK_DOMAINS and said != domain else None


CHECKS = (_check_goal_leak, _check_agent_voice, _check_replay_exhausted)


def service_simulator_checks(state: Mapping) -> list[dict]:
    """Every flag of every check (empty: the user, simulated or replayed, behaved)."""
    return [flag for check in CHECKS for flag in check(state)]
