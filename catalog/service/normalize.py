"""Slot-name and slot-value normalisation for MultiWOZ-style belief states.

The rules follow ``mwzeval/normalization.py`` of Tomiinek/MultiWOZ_Evaluation (the
normaliser behind "Shades of BLEU, Flavours of Success"), re-implemented here so that
predicted and gold states are compared in one canonical form. Exactly what is normalised:

Slot names
  * lower-cased, spaces removed: ``price range`` -> ``pricerange``, ``book day`` -> ``bookday``,
    ``arrive by`` / ``arriveBy`` -> ``arriveby``, ``leave at`` / ``leaveAt`` -> ``leaveat``,
    ``entrance fee`` -> ``entrancefee``, ``trainID`` -> ``trainid``. (mwzeval further shortens
    ``arriveby``/``leaveat`` to ``arrive``/``leave``; we keep the MultiWOZ 2.2 names.)
  * a ``domain-`` prefix (2.2 style ``hotel-pricerange``) is split off by :func:`split_slot`.

Slot values (all: stripped and lower-cased first)
  * empty, ``none``, ``not mentioned`` -> absent (the slot is not in the state).
  * ``dontcare``, ``don't care``, ``do n't care``, ``any``, ``doesn't matter`` -> ``dontcare``,
    kept as a value of its own (conflating it with "absent" inflated SimpleTOD's JGA).
  * name, departure, destination: ``&`` -> ``and``, `` '`` -> ``'``, a leading ``the `` is
    dropped for matching, plus mwzeval's table of known venue-name variants
    (``nando's`` -> ``nandos``, ``cityrooms`` -> ``cityroomz``, ...).
  * type: ``swimming pool`` -> ``swimmingpool``, ``mutliple sports`` -> ``multiple sports``,
    ``night club`` -> ``nightclub``, ``guest house`` -> ``guesthouse``.
  * food: mwzeval's typo table (``sea food`` -> ``seafood``, ``english`` -> ``british``,
    ``portugese`` -> ``portuguese``, ...).
  * times (arriveby, leaveat, booktime): ``by``/``after`` prefixes dropped, ``am``/``pm``
    parsed, ``1730`` -> ``17:30``, ``9:15`` -> ``09:15``, ``7`` -> ``07:00``,
    ``afternoon`` -> ``13:00``, ``noon``/``lunch`` -> ``12:00``, ``morning`` -> ``08:00``.
  * parking, internet: ``free`` -> ``yes``.
  * day-like values keep their lower-cased form; numbers (people, stay, stars) are left as
    digits, and spelled numbers one..ten become digits.
mwzeval also fuzzy-matches names against the database when it computes Inform/Success; the
grounding check in ``convsim.catalog.service.db.ServiceDB.find_entity`` does the same with a
token-set ratio >= 90 (rapidfuzz).
"""
from __future__ import annotations

import re

NAME_VARIANTS = {
    "hotel du vin bistro": "hotel du vin and bistro",
    "the river bar and grill": "the river bar steakhouse and grill",
    "nando's": "nandos", "city center b and b": "city center north b and b",
    "acorn house": "acorn guest house", "caffee uno": "caffe uno", "cafe uno": "caffe uno",
    "rosa's": "rosas bed and breakfast", "restaurant 2 two": "restaurant two two",
    "restaurant 17": "restaurant one seven", "lime house": "limehouse",
    "cityrooms": "cityroomz", "whale of time": "whale of a time",
    "huntingdon hotel": "huntingdon marriott hotel", "university hotel": "university arms hotel",
    "arbury guesthouse": "arbury lodge guesthouse", "bridge house": "bridge guest house",
    "broughton gallery": "broughton house gallery",
    "scudamores punt co": "scudamores punting co",
    "cambridge botanic gardens": "cambridge university botanic gardens",
    "the junction": "junction theatre", "christs": "christ's college",
    "christ college": "christ's college", "parkside pools": "parkside swimming pool",
}
TYPE_VARIANTS = {"swimming pool": "swimmingpool", "mutliple sports": "multiple sports",
                 "night club": "nightclub", "guest house": "guesthouse",
                 "guesthouses": "guesthouse", "hotels": "hotel"}
FOOD_VARIANTS = {"eriterean": "mediterranean", "sea food": "seafood",
                 "portugese": "portuguese", "modern american": "north american",
                 "americas": "north american", "intalian": "italian", "italain": "italian",
                 "asian or oriental": "asian oriental", "english": "british",
                 "australasian": "australian", "gastropod": "gastropub", "brutish": "british",
                 "bristish": "british", "europeon": "european"}
DONTCARE_VARIANTS = {"dontcare", "don't care", "do n't care", "dont care", "any",
                     "doesn't matter", "does not matter", "no preference"}
ABSENT_VALUES = {"", "none", "not mentioned", "not given"}
TIME_WORDS = {"afternoon": "13:00", "lunch": "12:00", "noon": "12:00", "mid-day": "12:00",
              "around lunch time": "12:00", "morning": "08:00", "evening": "18:00"}
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])}
TIME_SLOTS = {"arriveby", "leaveat", "booktime"}
NAME_SLOTS = {"name", "departure", "destination"}
DONTCARE = "dontcare"


def normalize_slot_name(slot: str) -> str:
    """``'Price Range'`` -> ``'pricerange'``; ``'arriveBy'`` -> ``'arriveby'``."""
    return re.sub(r"[\s_]+", "", str(slot).strip().lower())


def normalize_time(value: str) -> str:
    """Parse a time phrase into ``HH:MM`` where it can; otherwise return it unchanged."""
    t = value.strip().lower()
    if t in TIME_WORDS:
        return TIME_WORDS[t]
    t = re.sub(r"^(by|after|afer|before|around|at)\s+", "", t).strip().rstrip(".,?")
    pm = bool(re.search(r"(pm|p\.m\.?)$", t))
    t = re.sub(r"\s*(am|a\.m\.?|pm|p\.m\.?)$", "", t).strip()
    match = re.fullmatch(r"(\d{1,2})(?:[:.](\d{2}))?", t) or re.fullmatch(r"(\d{2})(\d{2})", t)
    if not match:
        return t
    hours, minutes = int(match.group(1)), int(match.group(2) or 0)
    if pm and hours < 12:
        hours += 12
    return f"{hours:02d}:{minutes:02d}"


def canonical_name(value: str) -> str:
    """Venue or station name in the database's canonical form (for matching)."""
    name = value.strip().lower().replace(" & ", " and ").replace("&", " and ")
    name = re.sub(r"\s+", " ", name.replace(" '", "'"))
    return NAME_VARIANTS.get(name, name)


def normalize_value(slot: str, value: object) -> str | None:
    """The canonical value of one slot, or ``None`` when the value means "not set"."""
    if value is None:
        return None
    v = re.sub(r"\s+", " ", str(value).strip().lower())
    if v in ABSENT_VALUES:
        return None
    if v in DONTCARE_VARIANTS:
        return DONTCARE
    slot = normalize_slot_name(slot)
    if slot in NAME_SLOTS:
        return canonical_name(v)
    if slot == "type":
        return TYPE_VARIANTS.get(v, v)
    if slot == "food":
        return FOOD_VARIANTS.get(v, v)
    if slot in TIME_SLOTS:
        return normalize_time(v)
    if slot in ("parking", "internet"):
        return "yes" if v == "free" else v
    if slot in ("bookpeople", "bookstay", "stars"):
        return NUMBER_WORDS.get(v, v)
    return v


def names_match(a: str, b: str) -> bool:
    """Names equal after canonicalisation, ignoring a leading ``the``."""
    strip = lambda s: re.sub(r"^the ", "", canonical_name(s))  # noqa: E731
    return strip(a) == strip(b)
