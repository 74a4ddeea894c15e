"""Response grounding: does the reply *text* state the acts of the action it was written from?

The simulated customer reads the structured action, and task success, task completion and the
heuristic judge's "requested fact answered" check read the structured ``informed`` dict, so a
response writer whose every reply is "Sorry, I cannot help with that. Goodbye." scored exactly as
the templates did (an audit: task success 0.933, heuristic quality 4.96). This check reads the text.

``response_grounding(text, action, text_mentions=...)`` lists the *checkable acts* of the executed
action and whether each is stated in the reply:

* ``entity``: the offered or booked entity (venue name or train id) is named: its canonical name
  (leading "the" optional, ``&`` = "and", case and punctuation ignored) is in the text, or the text
  checker (``text_check.text_mentions``) found a mention of it; for an offer, not in a sentence
  that says it is not there ("There are no available rooms at River Hotel.": ``NOT_OFFERED``);
* ``reference``: a booking's reference number is in the text (case, spaces and punctuation ignored);
* ``fact:<slot>``: every informed fact (``ref`` excepted: it is the reference) is in the text, not
  as the booking reference ("The reference number is 01223291308." states no phone): a phone by
  its digits, a postcode by its letters and digits, ``parking``/``internet`` by the word
  (``parking``; ``internet``/``wifi``), an address by at least half of its words, a price or fee by
  all of its numbers in a sentence that names a price ("leaving at 16.50" is a time), any other
  value with digits by all of its numbers, else the value itself (``centre``/``center`` alike);
* ``request:<slot>``: a slot the system asks for is asked about: a cue word of the slot
  (``bookpeople`` "people/how many/guests/party", ``booktime`` "time/when", ...) in a sentence that
  asks (a question, or "not sure", "don't know", "let me know", ...: ``ASKING``);
* ``nooffer``/``nobook``: the reply says there is none / it failed (no, not, sorry, unfortunately,
  cannot, unable, ...).

``bye``, ``welcome`` and the refusal ``unsupported`` have no checkable act. The turn's
``response_grounding`` = stated acts / checkable acts (None without any); a reply that states
none of its (one or more) checkable acts is *ungrounded* (``response_ungrounded`` = 1).
"""
from __future__ import annotations

import re

from convsim.catalog.service.normalize import canonical_name

SLOT_CUES = {
    "area": r"area|part of (the )?town|where|north|south|east|west|centre|center",
    "pricerange": r"price|budget|cheap|expensive|moderate|cost",
    "food": r"food|cuisine|type|kind|eat",
    "bookday": r"\bday|when|date",
    "bookpeople": r"people|how many|guests|party|persons|person",
    "bookstay": r"nights?|how long|stay",
    "booktime": r"time|when|o'?clock",
    "departure": r"depart|from|leaving|origin|where",
    "destination": r"destination|going|heading|where|travel",
    "day": r"\bday|when|date",
    "leaveat": r"leave|leaving|depart|time|when",
    "arriveby": r"arriv|time|when|by",
    "type": r"type|kind|sort",
    "name": r"name|which|called",
    "stars": r"stars?|rating",
    "parking": r"parking",
    "internet": r"internet|wi-?fi",
}
# a value said as a booking reference ("The reference number is 01223291308.") is not the fact:
# the label and what follows it up to the next , ; . ! ? or "and" are left out when facts are read
REFERENCE_LABELLED = re.compile(r"\b(?:reference|ref)\b(?: number| code| no)?\s*(?:is|:)?\s*"
                                r"[a-z0-9][a-z0-9 -]*?(?=[,;!?]|\.(?!\d)|\band\b|$)")
# a price or fee is said as one: "16.50" in "Your train is leaving at 16.50." is a time
PRICE_CUE = re.compile(r"\b(pounds?|gbp|price|prices|cost|costs|fee|fare|pay|charge)\b|£")
# a request is asked: a question, or a sentence that says what it does not know yet
ASKING = re.compile(r"\?|\b(not sure|don'?t know|do not know|(like|want|need) to know|let me know|tell me|"
                    r"please (say|give|provide))\b")
# an entity named as not there ("I can't find a room at the old Peter Hall.") is not offered
NOT_OFFERED = re.compile(r"\b(can'?t|cannot|couldn'?t|could not|unable to) (find|offer)\b|\bnot available\b|"
                         r"\bunavailable\b|\bthere (is|are) no\b|\bno (available|free)\b|\bfully booked\b")
NEGATIVE = re.compile(r"\b(no|not|none|nothing|sorry|unfortunately|couldn'?t|can'?t|cannot|unable|"
                      r"unavailable|fully booked|isn'?t|aren'?t|wasn'?t)\b")
NUMBER = re.compile(r"\d+(?:[.:]\d+)?")


def _lower(text: str) -> str:
    return re.sub(r"\s+", " ", (text or "").lower().replace("’", "'"))


def _compact(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def _sentences(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, sentence)`` of a text, lower-cased, each with its end mark (a decimal point
    ends no sentence: "16.50 pounds")."""
    low = (text or "").lower().replace("’", "'")
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r".+?(?:[!?;]|\.(?!\d)|$)", low, re.S)
            if m.group().strip()]


def _numbers(s: str) -> set[str]:
    """Numbers of a string, leading zeros dropped ("06:43" and "6:43" alike)."""
    return {n.lstrip("0") or "0" for n in NUMBER.findall(s)}


def _names(text: str, probe: str) -> bool:
    said = " " + re.sub(r"[^a-z0-9' ]", " ", canonical_name(text)) + " "
    return bool(probe) and re.search(rf"(?<![\w']){re.escape(probe)}(?![\w'])", re.sub(r"\s+", " ", said)) is not None


def entity_stated(text: str, entity: str, mentions: list[dict] | None = None, *, offered: bool = True) -> bool:
    """The entity (venue name or train id) is named in the text; with ``offered``, not only in a
    sentence that says it is not there ("There are no available rooms at River Hotel.")."""
    if not entity:
        return False
    full = canonical_name(str(entity))
    name = re.sub(r"^the ", "", full)
    # a one-word name ("the place") is matched with its article, as the triage does
    probe = re.sub(r"[^a-z0-9' ]", " ", name if " " in name or full == name else full).strip()
    target = {name, "the " + name}
    text = text or ""
    pieces = [(0, len(text), text)]
    if offered and NOT_OFFERED.search(_lower(text)):
        pieces = [(a, b, p) for a, b, p in _sentences(text) if not NOT_OFFERED.search(p)]
    for start, end, piece in pieces:
        if _names(piece, probe) or any(
                m.get("kind") == "entity" and m.get("grounded") and canonical_name(str(m.get("name", ""))) in target
                and (m.get("position") is None or start <= m["position"] < end) for m in mentions or []):
            return True
    return False


def value_stated(slot: str, value, text: str) -> bool:
    """One informed fact's value is in the text (rules in the module docstring)."""
    low, v = REFERENCE_LABELLED.sub(" ", _lower(text)), _lower(str(value))
    if slot == "phone":
        digits = re.sub(r"\D", "", v)
        return bool(digits) and digits in re.sub(r"\D", "", low)
    if slot == "postcode":
        return bool(_compact(v)) and _compact(v) in _compact(low)
    if slot in ("parking", "internet"):
        return bool(re.search(SLOT_CUES[slot], low))
    if slot == "address":
        words = [w for w in re.findall(r"[a-z0-9]+", v)]
        said = set(re.findall(r"[a-z0-9]+", low))
        return bool(words) and sum(w in said for w in words) * 2 >= len(words)
    if NUMBER.search(v) and slot in ("price", "entrancefee"):
        return any(_numbers(v) <= _numbers(p) and PRICE_CUE.search(p) for _, _, p in _sentences(low))
    if NUMBER.search(v):
        return _numbers(v) <= _numbers(low)
    if v in ("centre", "center"):
        return bool(re.search(r"\bcent(re|er)\b", low))
    return bool(_compact(v)) and _compact(v) in _compact(low)


def requested_asked(slot: str, text: str) -> bool:
    """The reply asks about the slot: a cue word of it (or the slot's own name) in a sentence
    that asks (a question, or "I'm not sure about the day")."""
    cue = SLOT_CUES.get(slot, re.escape(slot))
    return any(ASKING.search(p) and re.search(rf"(?:{cue})", p) for _, _, p in _sentences(text))


def response_grounding(text: str, action: dict, *, text_mentions: list[dict] | None = None) -> dict:
    """``{"items": [{"act", "value", "stated"}], "checked", "stated", "score", "ungrounded"}``."""
    kind = action.get("kind")
    items: list[dict] = []
    if kind in ("bye", "welcome", "unsupported", None):
        return {"items": [], "checked": 0, "stated": 0, "score": None, "ungrounded": None}
    entity = action.get("entity")
    if entity:
        stated = entity_stated(text, entity, text_mentions, offered=kind not in ("nooffer", "nobook"))
        items.append({"act": "entity", "value": entity, "stated": stated})
    if kind == "book" and action.get("reference"):
        ref = str(action["reference"])
        items.append({"act": "reference", "value": ref, "stated": _compact(ref) in _compact(text or "")})
    for slot, value in (action.get("informed") or {}).items():
        if slot == "ref" or value in (None, ""):
            continue
        items.append({"act": f"fact:{slot}", "value": value, "stated": value_stated(slot, value, text)})
    for slot in action.get("requested") or []:
        items.append({"act": f"request:{slot}", "value": slot, "stated": requested_asked(slot, text)})
    if kind in ("nooffer", "nobook"):
        items.append({"act": kind, "value": None, "stated": bool(NEGATIVE.search(_lower(text)))})
    checked, stated = len(items), sum(i["stated"] for i in items)
    return {"items": items, "checked": checked, "stated": stated,
            "score": stated / checked if checked else None,
            "ungrounded": None if not checked else int(stated == 0)}
