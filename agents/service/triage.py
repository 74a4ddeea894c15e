"""Triage agent: domain, intent, dialogue act and slot values of one user utterance.

``rule_triage`` is the default (model ``none``): lexicons built from the database and the
schema plus a few patterns for times, counts and days. ``llm_triage`` asks a chat model for
the same structure (``TriageOutput``) and falls back to the rules when the answer is garbage,
recording the failure with the raw answer.
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from convsim.catalog.service.db import DOMAINS, ServiceDB
from convsim.catalog.service.normalize import DONTCARE, canonical_name, normalize_time, normalize_value
from convsim.lazy import cached_once

PROMPT_FILE = Path(__file__).parents[2] / "prompts" / "service_triage.txt"
BOOK_SLOTS = {"bookday", "bookpeople", "bookstay", "booktime"}
DOMAIN_WORDS = {
    "restaurant": r"restaurant|food|eat|dine|dining|dinner|lunch|cuisine|table for",
    "hotel": r"hotel|guest ?house|place to stay|accommodation|lodging|somewhere to stay|b ?& ?b|"
             r"bed and breakfast|nights?\b|stars?\b|wifi|internet|parking",
    "attraction": r"attractions?\b|museums?\b|colleges?\b|parks?\b|theatres?\b|theaters?\b|"
                  r"cinemas?\b|nightclubs?\b|night club|swimming ?pool|church|things to do|"
                  r"to visit|entertainment|sightseeing|punt|boats?\b|architecture|galler|"
                  r"concert ?hall|sports",
    "train": r"trains?\b|railway|depart|arriv|tickets?\b",
    "taxi": r"taxi|\bcab\b",
    "police": r"police|robbed|theft|stolen",
    "hospital": r"hospital|doctor|a&e|department",
}
BYE = r"\b(good ?bye|bye|that'?s all|that will be all|that is all|no,? thank|nothing else|" \
      r"don'?t need anything else|that'?s everything)\b"
THANK = r"\bthank"
BOOK = r"\b(book|reserve|reservation)\b"
REQUEST_WORDS = {
    "address": r"address", "phone": r"phone|number\b(?! of)", "postcode": r"post ?code",
    "entrancefee": r"entrance fee|admission|cost to get in|how much (is it|does it cost) to",
    "price": r"\bprice\b(?! range)|how much|cost", "trainid": r"train id|train number",
    "duration": r"travel time|duration|how long", "openhours": r"open|hours",
    "ref": r"reference", "area": r"what (part|area)|which area", "stars": r"how many stars",
    "leaveat": r"departure time|what time does it leave|when does it leave",
    "arriveby": r"arrival time|when does it arrive|what time does it arrive",
}
NUM = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
DAYS = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
TIME = r"(\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)?|\d{1,2}:\d{2})"


TRIAGE_DOMAINS = frozenset("restaurant hotel attraction train taxi police hospital general".split())
TRIAGE_ACTS = frozenset("inform request book bye thank".split())
TRIAGE_INTENTS = frozenset({"general"} | {f"{k}_{d}" for k in ("find", "book") for d in TRIAGE_DOMAINS - {"general"}})


class TriageOutput(BaseModel):
    """What the triage agent extracts from one user utterance (also the LLM's answer schema)."""
    domain: str = Field(description="restaurant|hotel|attraction|train|taxi|police|hospital|general")
    intent: str = Field(description="find_<domain>, book_<domain> or general")
    act: str = Field(description="inform|request|book|bye|thank")
    slots: dict[str, str] = Field(default_factory=dict,
                                  description="slot -> value for the domain, e.g. area, pricerange")
    requested: list[str] = Field(default_factory=list, description="slots the user asks about")
    refer: list[str] = Field(default_factory=list,
                             description="slots the user says are the same as before (area, pricerange)")

    # the format the node expects, beyond the JSON types (the schema text sent stays the same): a
    # domain, an intent and an act of the lists above, casefolded; anything else is an invalid
    # answer, asked again and then left to the rules with its raw text (``llm_failure``)
    @field_validator("domain", "intent", "act")
    @classmethod
    def _known(cls, v: str, info) -> str:
        v = v.strip().casefold()
        allowed = {"domain": TRIAGE_DOMAINS, "act": TRIAGE_ACTS, "intent": TRIAGE_INTENTS}[info.field_name]
        if v not in allowed:
            raise ValueError(f"{info.field_name} must be one of {', '.join(sorted(allowed))}, got {v!r}")
        return v


@cached_once(maxsize=8)
def _lexicon(db: ServiceDB) -> dict:
    names = []
    for domain in ("restaurant", "hotel", "attraction"):
        for record in db.records.get(domain, []):
            canon = canonical_name(record["name"])
            short = re.sub(r"^the ", "", canon)
            # A one-word name ("place", "junction") is matched only with its article.
            names.append((short if " " in short else canon, domain, record["name"]))
    names.sort(key=lambda x: -len(x[0]))
    stations = sorted(set(db.values("train", "departure")) | set(db.values("train", "destination")),
                      key=len, reverse=True)
    return {"names": names, "foods": sorted(db.values("restaurant", "food"), key=len, reverse=True),
            "attraction_types": sorted(db.values("attraction", "type"), key=len, reverse=True),
            "stations": stations}


def _find_name(text: str, lex: dict) -> tuple[str, str] | None:
    for short, domain, name in lex["names"]:
        if len(short) > 3 and re.search(rf"\b{re.escape(short)}\b", text):
            return domain, name
    return None


def _search_slots(domain: str, text: str, lex: dict) -> dict[str, str]:
    slots: dict[str, str] = {}
    if domain in ("restaurant", "hotel", "attraction"):
        m = re.search(r"\b(centre|center|north|south|east|west)\b", text)
        if m:
            slots["area"] = "centre" if m.group(1) == "center" else m.group(1)
        elif re.search(r"(any|whatever) (area|part of town)|area (doesn'?t|does not) (really )?matter", text):
            slots["area"] = DONTCARE
    if domain in ("restaurant", "hotel"):
        m = re.search(r"\b(cheap|inexpensive|moderate|moderately|expensive|upscale|high end)\b", text)
        if m:
            slots["pricerange"] = {"inexpensive": "cheap", "moderately": "moderate",
                                   "upscale": "expensive", "high end": "expensive"}.get(m.group(1), m.group(1))
        elif re.search(r"price\w*( range)? (doesn'?t|does not) (really )?matter|any price", text):
            slots["pricerange"] = DONTCARE
    if domain == "restaurant":
        for food in lex["foods"]:
            if re.search(rf"\b{re.escape(food)}\b", text):
                slots["food"] = food
                break
    if domain == "hotel":
        if re.search(r"guest ?house", text):
            slots["type"] = "guesthouse"
        elif re.search(r"an? (actual |proper )?hotel (rather|not|instead)|should be a hotel", text):
            slots["type"] = "hotel"
        m = re.search(NUM + r"[ -]stars?", text)
        if m:
            slots["stars"] = normalize_value("stars", m.group(1))
        for slot, word in (("parking", r"parking"), ("internet", r"internet|wifi|wi-fi")):
            # generic negation only: wording copied from the replay sample was removed
            if re.search(rf"(no|not|don'?t|doesn'?t|without)( need| have| want)?( free)? ({word})", text):
                slots[slot] = "no"
            elif re.search(word, text):
                slots[slot] = "yes"
    if domain == "attraction":
        synonyms = {"swimming pool": "swimmingpool", "night club": "nightclub", "punt": "boat",
                    "theater": "theatre", "church": "architecture", "concert hall": "concerthall"}
        for word, value in synonyms.items():
            if word in text:
                slots["type"] = value
        for kind in lex["attraction_types"]:
            if re.search(rf"\b{re.escape(kind)}s?\b", text):
                slots["type"] = kind
                break
    if domain == "train":
        for station in lex["stations"]:
            st = re.escape(station)
            if re.search(rf"\bfrom {st}\b|\b{st} to\b|\bdepart(ing|s)? (from )?{st}|leaving {st}", text):
                slots.setdefault("departure", station)
            if re.search(rf"\b(to|into|in|for|towards|destination is|arrive (at|in)) {st}\b", text) \
                    and slots.get("departure") != station:
                slots.setdefault("destination", station)
        m = re.search(DAYS, text)
        if m:
            slots["day"] = m.group(1)
        m = re.search(r"(leave|leaving|depart|departing|departs|after)\D{0,12}?" + TIME, text)
        if m and not re.search(r"arriv\w* (there )?by", m.group(0)):
            slots["leaveat"] = normalize_time(m.group(2))
        m = re.search(r"(arrive|arriving|arrival|get there|be there|by)\D{0,12}?" + TIME, text)
        if m and re.search(r"\d", m.group(2)):
            slots["arriveby"] = normalize_time(m.group(2))
    return slots


def _book_slots(domain: str, text: str) -> dict[str, str]:
    slots: dict[str, str] = {}
    m = re.search(r"(for|party of|group of|table for) " + NUM + r"( people| persons| guests| of us| tickets)?", text) \
        or re.search(NUM + r" (people|persons|guests|tickets|adults)", text)
    if m:
        value = next(g for g in m.groups() if g and re.fullmatch(NUM, g))
        slots["bookpeople"] = normalize_value("bookpeople", value)
    if domain == "hotel":
        m = re.search(NUM + r" nights?", text)
        if m:
            slots["bookstay"] = normalize_value("bookstay", m.group(1))
    if domain in ("hotel", "restaurant"):
        m = re.search(DAYS, text)
        if m:
            slots["bookday"] = m.group(1)
    if domain == "restaurant":
        m = re.search(r"\bat " + TIME, text)
        if m and re.search(r"\d", m.group(1)):
            slots["booktime"] = normalize_time(m.group(1))
    if slots.get("bookpeople") and domain == "hotel" and "bookstay" in slots \
            and slots["bookpeople"] == slots["bookstay"] and not re.search(NUM + r" (people|persons|guests)", text):
        del slots["bookpeople"]
    return slots


def _domain_of(text: str, prev_domain: str | None, named: tuple[str, str] | None) -> str | None:
    # "in the same area as the restaurant" names the source domain, not the one wanted
    text = re.sub(r"same (area|price range|part of town) as (the|my|that) \w+", "", text)
    # Police, hospital and taxi words are rare and decisive ("the police station's address").
    weight = {"police": 3, "hospital": 3, "taxi": 2}
    scores = {d: weight.get(d, 1) * len(re.findall(rf"\b(?:{p})", text))
              for d, p in DOMAIN_WORDS.items()}
    if named:
        scores[named[0]] = scores.get(named[0], 0) + 2
    best = max(scores, key=lambda d: scores[d])
    return best if scores[best] > 0 else prev_domain


def rule_triage(utterance: str, *, prev_domain: str | None, db: ServiceDB) -> dict:
    """Rule-based triage of one utterance; ``prev_domain`` is kept when no domain cue appears."""
    text = " " + utterance.lower().replace("’", "'") + " "
    lex = _lexicon(db)
    named = _find_name(text, lex)
    domain = _domain_of(text, prev_domain, named)
    bye, thank = bool(re.search(BYE, text)), bool(re.search(THANK, text))
    slots: dict[str, str] = {}
    if domain in DOMAINS:
        slots.update(_search_slots(domain, text, lex))
        if domain != "attraction":
            slots.update(_book_slots(domain, text))
        if named and named[0] == domain:
            slots["name"] = canonical_name(named[1])
    requested = [s for s, p in REQUEST_WORDS.items() if re.search(p, text)
                 and re.search(r"\?|can i (have|get)|could you (give|tell)|what is|what'?s|"
                               r"need the|i'?d like the|get the|tell me|give me|may i have", text)]
    if "price" in requested and domain in ("hotel", "restaurant"):
        requested[requested.index("price")] = "pricerange"
    refer = [s for s, p in (("area", r"same (area|part of town|side of town)"),
                            ("pricerange", r"same price")) if re.search(p, text)]
    wants_book = bool(re.search(BOOK, text)) and not re.search(r"(don'?t|no need to|not) (need to )?book", text)
    content = bool(slots or requested or refer or wants_book)
    if bye and not content:
        return _result("general", "general", "bye", {}, [], [])
    if thank and not content and not named:
        return _result("general", "general", "thank", {}, [], [])
    if domain is None:
        return _result("general", "general", "inform", {}, [], [])
    bookable = domain in ("restaurant", "hotel", "train", "taxi")
    booking = bookable and (wants_book or any(s in BOOK_SLOTS for s in slots))
    act = "book" if booking else ("request" if requested else "inform")
    intent = f"book_{domain}" if booking else f"find_{domain}"
    return _result(domain, intent, act, slots, requested, refer)


def _result(domain, intent, act, slots, requested, refer) -> dict:
    return {"domain": domain, "intent": intent, "act": act, "slots": dict(slots),
            "requested": list(requested), "refer": list(refer), "source": "rules"}


def llm_triage(model, utterance: str, *, prev_domain: str | None, history: list[str],
               db: ServiceDB) -> dict:
    """Triage with a chat model's structured output; on a garbage answer, the rules decide
    and the failure is kept (``llm_failure`` with the raw answer)."""
    prompt = PROMPT_FILE.read_text(encoding="utf-8")
    messages = [("system", prompt),
                ("user", "Previous domain: {}\nRecent turns:\n{}\nUser: {}".format(
                    prev_domain or "none", "\n".join(history[-4:]), utterance))]
    answer = model.structured(messages, TriageOutput, purpose="triage", retries=2)
    if not answer.ok:
        result = rule_triage(utterance, prev_domain=prev_domain, db=db)
        result["llm_failure"] = {"raw": answer.raw, "error": answer.error}
        return result
    value = answer.value
    slots = {}
    for slot, raw in value.slots.items():
        norm = normalize_value(slot, raw)
        if norm is not None:
            slots[slot.lower().replace(" ", "")] = norm
    return {"domain": value.domain.lower(), "intent": value.intent.lower(), "act": value.act.lower(),
            "slots": slots, "requested": [r.lower() for r in value.requested],
            "refer": [r.lower() for r in value.refer], "source": "llm"}
