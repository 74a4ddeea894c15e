"""Is the held-out wording held out? Word 2-grams against the simulator's templates and the triage.

The held-out pool (``catalog/data/service/paraphrases_heldout.json``) must share no word 2-gram
with the simulator's own templates (``agents/service/user_simulator.py``), and the rule triage,
run on the held-out forms, must match no 2-gram of them: what the triage reads there, it reads
from a slot value alone, never from wording it was written against.

How words are counted (the same for both sides):

* lower case; a 2-gram never runs across a punctuation mark (``, . ; : ! ?``: "north, a guesthouse"
  holds no 2-gram "north a"); a clock time is one token, a hyphen splits ("4-star" is the 2-gram
  "<v> star") and an apostrophe joins ("i'd");
* a **slot value** (a placeholder ``{value}``, ``{people}``, ``{day}``, ``{time}``, ``{stay}``, or the value
  said in a template, e.g. "north", "london kings cross", "19:30") is one token ``<v>``, the same
  token for every slot. Its words are the user's content and must be said, so they are not
  wording; the words next to it are: "for {people} people" gives "for <v>" and "<v> people",
  shared with any template "for <v> ..." whatever the slot;
* ``{from}`` (the earlier domain in "near the restaurant") is said as the domain's word, each of
  the four domains in turn: it is wording;
* ``{slots}`` (a composite move filled with constraint or booking phrases) is a gap: the
  2-grams across it are the lead's last word with each phrase's first word, and each phrase's
  last word with the next word; phrases joined by a space (the templates' openings, the pool's
  booking parts) give every last-word/first-word pair, phrases joined by ", " and " and " (the
  pool's lists) only the pairs with "and".

``template_forms()`` lists the simulator's wording with values masked; ``heldout_grams()`` and
``template_grams()`` the 2-grams; ``triage_matches(text, values, db)`` runs ``rule_triage`` with
every regular-expression call it makes recorded and returns the 2-grams inside the spans it
matched; ``slot_forms()`` and ``triage_reads()`` give the slot-bearing held-out forms and whether
the triage reads each one's value. ``bench/service_heldout_wording.py`` prints all of it.
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path

from convsim.agents.service import user_simulator as sim
from convsim.agents.service.paraphrase import BOOK_ORDER, SPOKEN, load_pool
from convsim.catalog.service.db import ServiceDB

V = "<v>"
VALUE_PLACEHOLDERS = ("value", "people", "day", "time", "stay")
DOMAINS = ("restaurant", "hotel", "attraction", "train")
TOKEN = re.compile(r"<v>|\d{1,2}:\d{2}|[a-z0-9']+|[,.;:!?]")
PUNCT = ",.;:!?"
BREAK = "|"


def tokens(text: str, values: list[str] = ()) -> list[str]:
    """Lower-cased word tokens, each said value (longest first) replaced by ``<v>``."""
    toks = [BREAK if t in PUNCT else t for t in TOKEN.findall(text.lower().replace("’", "'"))]
    for value in sorted({str(v) for v in values if str(v).strip()}, key=lambda v: -len(TOKEN.findall(v.lower()))):
        vt = [t for t in TOKEN.findall(value.lower()) if t not in PUNCT]
        if not vt:
            continue
        out, i = [], 0
        while i < len(toks):
            if toks[i:i + len(vt)] == vt:
                out.append(V)
                i += len(vt)
            else:
                out.append(toks[i])
                i += 1
        toks = out
    return toks


def grams(toks: list[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(toks, toks[1:]) if BREAK not in (a, b)}


def _strip(toks: list[str]) -> list[str]:
    """A phrase's tokens without leading/trailing punctuation (a form's own final full stop)."""
    while toks and toks[0] == BREAK:
        toks = toks[1:]
    while toks and toks[-1] == BREAK:
        toks = toks[:-1]
    return toks


def _mask_placeholders(form: str) -> str:
    return re.sub(r"\{(" + "|".join(VALUE_PLACEHOLDERS) + r")\}", f" {V} ", form)


def _form_grams(form: str, phrases: list[list[str]], join: str, values: list[str] = ()) -> set[tuple[str, str]]:
    """2-grams of a form with ``{from}`` said as each domain and ``{slots}`` as a gap bridged by
    ``phrases`` (token lists), joined to each other by a space (``join="space"``), as a list
    ("a, b and c": ``join="and"``) or never (``join="none"``: one phrase fills the gap)."""
    out: set = set()
    for domain in (DOMAINS if "{from}" in form else ("",)):
        text = _mask_placeholders(form.replace("{from}", domain))
        parts = [tokens(p, values) for p in text.split("{slots}")]
        for p in parts:
            out |= grams(p)
        if len(parts) > 1 and phrases:
            phrases = [_strip(p) for p in phrases]
            firsts, lasts = {p[0] for p in phrases if p}, {p[-1] for p in phrases if p}
            for left, right in zip(parts, parts[1:]):
                if left:
                    out |= {(left[-1], f) for f in firsts}
                if right:
                    out |= {(la, right[0]) for la in lasts}
            if join == "and":
                out |= {(la, "and") for la in lasts} | {("and", f) for f in firsts}
            elif join == "space":
                out |= {(la, f) for la in lasts for f in firsts}
    return {g for g in out if BREAK not in g}


# ------------------------------------------------------------------ the simulator's templates

def _db_values(db: ServiceDB, domain: str, slot: str) -> list[str]:
    try:
        return sorted(db.values(domain, slot))
    except Exception:  # noqa: BLE001 - a slot the domain's records lack
        return []


def template_constraints(db: ServiceDB) -> list[list[str]]:
    """Every constraint phrase the simulator can say (``_say_constraint`` on every db value and a
    reference to each domain), values masked, as token lists."""
    out = []
    slots = {"restaurant": ["area", "pricerange", "food", "name"],
             "hotel": ["area", "pricerange", "type", "stars", "parking", "internet", "name"],
             "attraction": ["area", "type", "name"],
             "train": ["departure", "destination", "day", "leaveat", "arriveby"]}
    for domain, names in slots.items():
        for slot in names:
            values = (_db_values(db, domain, slot)[:3] if slot == "name" else
                      ["10:15"] if slot in ("leaveat", "arriveby") else _db_values(db, domain, slot))
            for value in values:
                said = sim._say_constraint(domain, slot, value, {})
                out.append(tokens(said, [value, sim.SPOKEN_TYPE.get(value, value)]))
        for source in DOMAINS:
            said = sim._say_constraint(domain, "area", "north", {"reuse": {"slot": "area", "from": source}})
            out.append(tokens(said))
    return [list(t) for t in {tuple(t) for t in out}]


def template_bookings() -> list[list[str]]:
    """Every booking request the simulator can say (``_say_booking`` on every subset of slots)."""
    values = {"bookpeople": "3", "bookstay": "2", "bookday": "friday", "booktime": "19:30"}
    out = set()
    for domain in DOMAINS:
        for k in range(1, len(BOOK_ORDER) + 1):
            for subset in itertools.combinations(BOOK_ORDER, k):
                said = sim._say_booking(domain, {s: values[s] for s in subset})
                out.add(tuple(tokens(said, list(values.values()))))
    return [list(t) for t in out]


def template_grams(db: ServiceDB) -> set[tuple[str, str]]:
    """The 2-grams of everything the simulator says with ``surface: templates``."""
    constraints, bookings = template_constraints(db), template_bookings()
    out: set = set()
    for phrase in constraints + bookings:
        out |= grams(phrase)
    request = [tokens(sim.REQUEST_SAID.get(r, r)) for r in {r for rs in sim.ASKABLE.values() for r in rs}]
    fallback = [b[2:] for b in bookings]  # "How about" + the booking without "please book"
    for phrase in request:
        out |= grams(phrase)
    for name, form in sim.PHRASES.items():
        if name == "also":
            for lead in sim.ALSO.values():
                out |= _form_grams(form.replace("{also}", lead) + " {slots}.", constraints, "space")
        elif name == "request":  # "the phone number and postcode"
            out |= _form_grams(form, request, "space") | _form_grams("{slots} and {slots}", request, "space")
        elif name == "fallback":
            out |= _form_grams(form, fallback, "none")
        else:  # openings, corrections and recommendations join phrases by a space, answers by ", "
            out |= _form_grams(form, constraints, "space")
    for lead in sim.OPENING.values():
        out |= _form_grams(lead + " {slots}.", constraints, "space")
    return out


# ------------------------------------------------------------------ the held-out pool

def _strings(obj, path=()):
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not k.startswith("_"):
                yield from _strings(v, path + (k,))
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v, path)


def heldout_forms(pool: dict | None = None) -> list[tuple[tuple[str, ...], str]]:
    """``(path, form)`` of every form of the pool (``("constraint", "area:centre")``, ...)."""
    return list(_strings(pool or load_pool()))


def _key_values(path: tuple[str, ...]) -> list[str]:
    """A form written for one value ("constraint/pricerange:expensive") says it: a value token."""
    if len(path) > 1 and ":" in path[1]:
        value = path[1].split(":", 1)[1]
        return [value, SPOKEN.get(value, value), sim.SPOKEN_TYPE.get(value, value)]
    return []


def heldout_grams(pool: dict | None = None) -> dict[tuple[str, str], list[str]]:
    """Each 2-gram the held-out wording can say -> the forms that say it (as ``realise`` joins them)."""
    pool = pool or load_pool()
    constraints = [tokens(_mask_placeholders(f.replace("{from}", d)), _key_values(path))
                   for path, f in heldout_forms(pool) if path[0] == "constraint"
                   for d in (DOMAINS if "{from}" in f else ("",))]
    book = pool["book"]
    book_parts = [tokens(_mask_placeholders(f)) for k in ("people", "people_train", "day", "time", "stay")
                  for f in book[k]]
    request = [tokens(f) for k, fs in pool["request"].items() if k != "lead" for f in fs]
    out: dict = {}

    def add(gs, label):
        for g in gs:
            out.setdefault(g, []).append(label)
    for path, form in heldout_forms(pool):
        label = "/".join(path) + ": " + form
        section = path[0]
        if section == "request" and path[1] == "lead":
            add(_form_grams(form, request, "and"), label)
        elif section == "fallback":  # the one booking detail that changed (time or stay)
            add(_form_grams(form, book_parts, "none"), label)
        elif section in ("opening", "also"):
            add(_form_grams(form + ", {slots}.", constraints, "and"), label)
        else:
            add(_form_grams(form, constraints, "and", _key_values(path)), label)
    # a booking: its lead, then its parts joined by a space ("reserve it for 3 people on friday.")
    leads = [tokens(f) for k in ("lead", "lead_train") for f in book[k]]
    add({g for lead in leads for p in book_parts for g in grams([lead[-1], p[0]])}, "book/lead + parts")
    add({g for a in book_parts for b in book_parts for g in grams([a[-1], b[0]])}, "book/parts joined")
    return out


def shared_with_templates(db: ServiceDB, pool: dict | None = None) -> dict[tuple[str, str], list[str]]:
    """The held-out 2-grams the templates also say, with the held-out forms that say them."""
    t = template_grams(db)
    return {g: forms for g, forms in heldout_grams(pool).items() if g in t}


# ------------------------------------------------------------------ the triage's behaviour

class _RecordingRe:
    """A stand-in for ``re`` inside the triage module: every match it returns is recorded."""

    def __init__(self):
        self.spans: list[tuple[str, int, int]] = []

    def __getattr__(self, name):
        return getattr(re, name)

    def _keep(self, m, string):
        if m is not None and m.end() > m.start():
            self.spans.append((string, m.start(), m.end()))
        return m

    def search(self, pattern, string, flags=0):
        return self._keep(re.search(pattern, string, flags), string)

    def match(self, pattern, string, flags=0):
        return self._keep(re.match(pattern, string, flags), string)

    def fullmatch(self, pattern, string, flags=0):
        return self._keep(re.fullmatch(pattern, string, flags), string)

    def findall(self, pattern, string, flags=0):
        for m in re.finditer(pattern, string, flags):
            self._keep(m, string)
        return re.findall(pattern, string, flags)

    def finditer(self, pattern, string, flags=0):
        return [self._keep(m, string) for m in re.finditer(pattern, string, flags)]

    def sub(self, pattern, repl, string, count=0, flags=0):
        for m in re.finditer(pattern, string, flags):
            self._keep(m, string)
        return re.sub(pattern, repl, string, count=count, flags=flags)


def _widen(string: str, start: int, end: int) -> str:
    while start > 0 and re.match(r"[\w':]", string[start - 1]):
        start -= 1
    while end < len(string) and re.match(r"[\w':]", string[end]):
        end += 1
    return string[start:end]


def triage_matches(text: str, values: list[str], db: ServiceDB, *, prev_domain: str | None = None
                   ) -> tuple[dict, set[tuple[str, str]]]:
    """``(triage result, 2-grams inside the spans its regular expressions matched)`` for ``text``;
    a span is widened to whole words, ``values`` masked as ``<v>``."""
    from convsim.agents.service import triage as tri
    recorder = _RecordingRe()
    tri._lexicon(db)  # built outside the recording (its own strings, not the text)
    real, tri.re = tri.re, recorder
    try:
        result = tri.rule_triage(text, prev_domain=prev_domain, db=db)
    finally:
        tri.re = real
    lowered = text.lower().replace("’", "'")
    matched: set = set()
    for string, start, end in recorder.spans:
        span = _widen(string, start, end)
        if span.strip() and span.strip() in lowered:
            matched |= grams(tokens(span, values))
    return result, matched


# ------------------------------------------------------------------ slot-bearing forms, read or not

# (pool section, key) -> (domain, slot, value said): one representative value per slot
SLOT_FORMS = {
    ("constraint", "area"): ("restaurant", "area", "north"),
    ("constraint", "area:centre"): ("restaurant", "area", "centre"),
    ("constraint", "pricerange"): ("restaurant", "pricerange", "moderate"),
    ("constraint", "pricerange:cheap"): ("restaurant", "pricerange", "cheap"),
    ("constraint", "pricerange:expensive"): ("restaurant", "pricerange", "expensive"),
    ("constraint", "food"): ("restaurant", "food", "thai"),
    ("constraint", "type:guesthouse"): ("hotel", "type", "guesthouse"),
    ("constraint", "type:hotel"): ("hotel", "type", "hotel"),
    ("constraint", "type"): ("attraction", "type", "museum"),
    ("constraint", "stars"): ("hotel", "stars", "4"),
    ("constraint", "parking:yes"): ("hotel", "parking", "yes"),
    ("constraint", "parking:no"): ("hotel", "parking", "no"),
    ("constraint", "internet:yes"): ("hotel", "internet", "yes"),
    ("constraint", "internet:no"): ("hotel", "internet", "no"),
    ("constraint", "name"): ("restaurant", "name", "pizza hut city centre"),
    ("constraint", "departure"): ("train", "departure", "ely"),
    ("constraint", "destination"): ("train", "destination", "norwich"),
    ("constraint", "day"): ("train", "day", "friday"),
    ("constraint", "leaveat"): ("train", "leaveat", "10:15"),
    ("constraint", "arriveby"): ("train", "arriveby", "17:45"),
    ("book", "people"): ("restaurant", "bookpeople", "3"),
    ("book", "people_train"): ("train", "bookpeople", "3"),
    ("book", "day"): ("restaurant", "bookday", "friday"),
    ("book", "time"): ("restaurant", "booktime", "19:30"),
    ("book", "stay"): ("hotel", "bookstay", "2"),
}


def slot_forms(pool: dict | None = None) -> list[dict]:
    """The slot-bearing held-out forms filled with their representative value: ``{key, form, text,
    domain, slot, value}`` (the reference form "near the {from}" carries no value and is left out)."""
    pool = pool or load_pool()
    out = []
    for (section, key), (domain, slot, value) in SLOT_FORMS.items():
        for form in pool[section].get(key, []):
            spoken = SPOKEN.get(value, value)
            text = form.format(value=spoken, people=value, day=value, time=value, stay=value)
            out.append({"key": f"{section}/{key}", "form": form, "text": text, "domain": domain, "slot": slot,
                        "value": value, "said": spoken})
    return out


def triage_reads(db: ServiceDB, pool: dict | None = None) -> list[dict]:
    """Each slot-bearing form with ``read`` (the rule triage, in the form's domain, returns the slot
    with its value) and ``matched`` (the 2-grams its expressions matched in the form)."""
    out = []
    for f in slot_forms(pool):
        result, matched = triage_matches(f["text"], [f["value"], f["said"]], db, prev_domain=f["domain"])
        got = result["slots"].get(f["slot"])
        out.append({**f, "read": int(got is not None and str(got).lower() == f["value"]), "got": got,
                    "matched": sorted(matched)})
    return out


def pool_path() -> Path:
    from convsim.agents.service.paraphrase import POOL_FILE
    return POOL_FILE
