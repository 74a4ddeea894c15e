"""Entity checks over the *response text*: what the system actually said, not what it planned.

The structured DB-grounding metric checks the action the response was written from; an LLM
response writer can still name a venue that does not exist ("I recommend The Golden Dragon,
phone: 123-456-7890"). ``text_mentions(text, db)`` finds, in the reply:

* **entity names**: every restaurant, hotel or attraction name of the database (canonical form,
  ``convsim.catalog.service.normalize.canonical_name``) and every train id (``TR1234``) -> grounded;
  plus **candidate names** the database does not know: a run of capitalised words after an
  offering cue ("I recommend", "try", "called", "booked at", "how about", ...), or a run of two
  or more capitalised words anywhere (not at a sentence start), that is not a known word of the
  domain (days, areas, foods, stations, Cambridge...). A candidate is grounded when it matches a
  database name by rapidfuzz token-set ratio >= 90 (the ``find_entity`` rule), else invented;
* **attributes**: phone numbers, postcodes and train prices/ids stated in the text, attributed
  to the nearest entity named before them (else the action's entity); grounded when they equal
  that entity's database value after normalisation; when no entity is known, grounded when any
  record of the database has that value.

``text_hallucination_turn(mentions)`` = ungrounded mentions / mentions (None without mentions).
Templates are lower-case DB names, LLM replies are usually title-cased: both are matched.
"""
from __future__ import annotations

import re

from rapidfuzz import fuzz

from convsim.catalog.service.db import ServiceDB
from convsim.catalog.service.normalize import canonical_name
from convsim.lazy import cached_once

ENTITY_DOMAINS = ("restaurant", "hotel", "attraction")
CUES = (r"(?:recommend|suggest|try|called|named|booked (?:you )?(?:a table |a room )?(?:at|in)|"
        r"booking at|reservation at|stay at|visit|how about|there is|there's|i found|offer)")
CAPWORD = r"(?:[A-Z][\w'&\-]*|&)"
CANDIDATE_AFTER_CUE = re.compile(rf"\b{CUES}\s+(?:the\s+|The\s+)?({CAPWORD}(?:\s+{CAPWORD})*)")
CAP_RUN = re.compile(rf"(?<![.!?]\s)(?<!^)\b({CAPWORD}(?:\s+{CAPWORD})+)")
PHONE = re.compile(r"(?<!\d)(\+?\d[\d\s\-()]{8,15}\d)(?!\d)")
POSTCODE = re.compile(r"\b(c\.?\s?b\.?\s?\d{1,2}\s?,?\s?\d\s?[a-z]\.?\s?[a-z]\.?)(?![a-z])", re.I)
STREET = re.compile(r"\b(street|road|lane|avenue|way|drive|hill|row|square|court|close|walk|parade|"
                    r"green|terrace|crescent|st|rd)\.?$", re.I)
TRAIN_ID = re.compile(r"\b(tr\s?\d{4})\b", re.I)
COMMON = {"i", "i'm", "i'd", "i'll", "the", "a", "an", "your", "you", "yes", "no", "sure", "great",
          "thank", "thanks", "welcome", "hello", "hi", "goodbye", "bye", "please", "cambridge",
          "centre", "center", "north", "south", "east", "west", "monday", "tuesday", "wednesday",
          "thursday", "friday", "saturday", "sunday", "reference", "number", "ref", "train", "hotel",
          "restaurant", "attraction", "guesthouse", "guest", "house", "is", "there", "anything",
          "else", "would", "like", "me", "to", "book", "it", "for", "and", "of", "in", "at", "on",
          "wifi", "free", "parking", "star", "stars", "british", "english", "uk", "gbp"}


@cached_once(maxsize=8)
def _names(db: ServiceDB) -> dict:
    table = {}
    for domain in ENTITY_DOMAINS:
        for record in db.records.get(domain, []):
            table[canonical_name(record["name"])] = (domain, record)
    vocab = set(COMMON)
    for domain, slot in (("restaurant", "food"), ("attraction", "type"), ("train", "departure"),
                         ("train", "destination"), ("hotel", "type")):
        for value in db.values(domain, slot):
            vocab.update(value.split())
    ordered = sorted(table, key=len, reverse=True)
    return {"table": table, "ordered": ordered, "vocab": frozenset(vocab)}


def _match_name(candidate: str, names: dict) -> tuple[str, dict] | None:
    key = canonical_name(candidate)
    key = re.sub(r"^the ", "", key)
    for k in (key, "the " + key):
        if k in names["table"]:
            return names["table"][k]
    best = max(names["table"], key=lambda n: fuzz.token_set_ratio(n, key))
    if len(key) > 3 and fuzz.token_set_ratio(best, key) >= 90:
        return names["table"][best]
    return None


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


def _compact(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


SAME = {"phone": lambda db_value, said: _digits(db_value) == _digits(said),
        "postcode": lambda db_value, said: _compact(db_value) == _compact(said),
        # the street named must be part of the record's address ("regent street city centre")
        "address": lambda db_value, said: bool(_compact(said)) and
        _compact(re.sub(r"\b(st|rd)\.?$", "", said.lower())) in _compact(db_value)}


def text_mentions(text: str, db: ServiceDB, *, action_entity: tuple[str, str] | None = None) -> list[dict]:
    """Entity and attribute mentions of one reply, each ``{kind, domain, name, slot, value,
    position, grounded}``; ``action_entity`` = ``(domain, name)`` the action was about."""
    names = _names(db)
    lower = " " + text.lower().replace("’", "'") + " "
    mentions: list[dict] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    for key in names["ordered"]:
        short = re.sub(r"^the ", "", key)
        probe = short if " " in short or len(short) > 5 else key
        for m in re.finditer(rf"(?<![\w']){re.escape(probe)}(?![\w'])", lower):
            a, b = m.start() - 1, m.end() - 1
            if free(a, b):
                domain, record = names["table"][key]
                taken.append((a, b))
                mentions.append({"kind": "entity", "domain": domain, "name": record["name"], "slot": "name",
                                 "value": text[a:b], "position": a, "grounded": True, "record": record})
    for m in TRAIN_ID.finditer(text):
        record = db.find_entity("train", m.group(1).replace(" ", "").upper())
        taken.append(m.span())
        mentions.append({"kind": "entity", "domain": "train", "name": m.group(1), "slot": "trainid",
                         "value": m.group(1), "position": m.start(), "grounded": record is not None,
                         "record": record})
    addresses: list[tuple[str, int]] = []
    candidates = [(m.group(1), m.start(1)) for m in CANDIDATE_AFTER_CUE.finditer(text)]
    candidates += [(m.group(1), m.start(1)) for m in CAP_RUN.finditer(text)]
    for cand, pos in candidates:
        cand = re.sub(r"^(The|A|An)\s+", "", cand).strip()
        words = [w for w in cand.lower().split() if w not in names["vocab"]]
        if not words or not free(pos, pos + len(cand)) or TRAIN_ID.fullmatch(cand):
            continue
        taken.append((pos, pos + len(cand)))
        if STREET.search(cand):  # an address, checked as an attribute below
            addresses.append((cand, pos))
            continue
        hit = _match_name(cand, names)
        mentions.append({"kind": "entity", "domain": hit[0] if hit else None,
                         "name": hit[1]["name"] if hit else cand, "slot": "name", "value": cand,
                         "position": pos, "grounded": hit is not None, "record": hit[1] if hit else None})
    mentions.sort(key=lambda x: x["position"])
    fallback = None
    if action_entity and action_entity[1]:
        record = db.find_entity(*action_entity)
        fallback = {"domain": action_entity[0], "name": action_entity[1], "record": record}
    found = [("address", cand, pos) for cand, pos in addresses]
    found += [(slot, m.group(1), m.start()) for slot, pattern in (("phone", PHONE), ("postcode", POSTCODE))
              for m in pattern.finditer(text)]
    entities = [x for x in mentions if x["kind"] == "entity"]
    for slot, value, pos in found:
        if slot == "phone" and len(_digits(value)) < 10:
            continue
        same = SAME[slot]
        owner = next((x for x in reversed(entities) if x["position"] < pos), fallback)
        if owner and owner.get("record") is not None:
            grounded = same(str(owner["record"].get(slot, "")), value)
        elif owner:  # attached to an invented entity: the fact is as invented as the name
            grounded = False
        else:
            grounded = any(same(str(r.get(slot, "")), value)
                           for d in ENTITY_DOMAINS for r in db.records.get(d, []))
        mentions.append({"kind": "attribute", "domain": owner and owner["domain"],
                         "name": owner and owner["name"], "slot": slot, "value": value,
                         "position": pos, "grounded": grounded, "record": None})
    return [{k: v for k, v in x.items() if k != "record"} for x in sorted(mentions, key=lambda x: x["position"])]


def text_hallucination_turn(mentions: list[dict]) -> float | None:
    """Text hallucination rate = ungrounded mentions / mentions in the reply; None without any."""
    if not mentions:
        return None
    return sum(not x["grounded"] for x in mentions) / len(mentions)
