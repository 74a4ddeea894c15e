"""Travel reference database for group travel planning (TripCraft-like schema).

Two loaders give the same ``TravelDB`` API:

- ``load_travel_db(path=None)``: the project's synthetic database (``catalog/data/travel/*.json``,
  written by ``catalog/data/travel/generate.py``) or any folder with the same four JSON files
  (``accommodations.json``, ``restaurants.json``, ``attractions.json``, ``events.json``) in the
  TripCraft field names.
- ``load_travelplanner_ref_info(path)``: TravelPlanner ``*_ref_info.jsonl`` records, one JSON object
  per line keyed like ``"Accommodations in Rockford"`` / ``"Restaurants in Rockford"`` /
  ``"Attractions in Rockford"`` whose values are lists of rows in TravelPlanner's column names
  (``NAME, price, room type, house_rules, maximum occupancy, review rate number, city`` ;
  ``Name, Average Cost, Cuisines, Aggregate Rating, City`` ; ``Name, Latitude, Longitude, Address,
  City``). Room types are mapped (``Entire home/apt`` -> ``entire_room`` ...); TravelPlanner
  attractions have no category and there are no events. Other keys (flights, driving) are skipped.

A record missing a field or with a wrongly typed field raises ``ConvsimError`` naming the file,
the record and the field. See docs/group_planning.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from convsim import ConvsimError
from convsim.textio import iter_jsonl, load_json, parse_json
from convsim.lazy import cached_once

PROJECT_TRAVEL_DIR = Path(__file__).resolve().parent / "data" / "travel"
KINDS = ("accommodations", "restaurants", "attractions", "events")
ROOM_TYPES = ("entire_room", "private_room", "shared_room")
_TP_ROOM_TYPES = {"entire home/apt": "entire_room", "private room": "private_room",
                  "shared room": "shared_room"}
# required fields per kind with their accepted types (TripCraft names)
_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "accommodations": {"name": (str,), "pricing": (int, float), "roomType": (str,),
                       "house_rules": (str,), "max_occupancy": (int,), "rating": (int, float),
                       "City": (str,)},
    "restaurants": {"name": (str,), "avg_cost": (int, float), "cuisines": (str,),
                    "rating": (int, float), "City": (str,)},
    "attractions": {"name": (str,), "subcategories": (str,), "City": (str,)},
    "events": {"name": (str,), "dateTitle": (str,), "segmentName": (str,), "city": (str,)},
}
# optional numeric fields, checked when present (the planner reads them): a finite number, and for
# visit_duration (hours) a positive one; `rating` is optional on attractions and events
_OPTIONAL_NUMBERS: dict[str, dict[str, bool]] = {
    "accommodations": {}, "restaurants": {},
    "attractions": {"visit_duration": True, "rating": False},
    "events": {"rating": False},
}
_DATE = re.compile(r"^\d{2}-\d{2}-\d{4}$")


OPTION_LABELS = {"entire_room": "entire home", "private_room": "private room",
                 "shared_room": "shared room", "no_smoking": "no smoking",
                 "pets_allowed": "pets allowed", "children_allowed": "children allowed",
                 "quiet": "quiet, no parties", "visitors_allowed": "visitors allowed"}


def option_label(option: str) -> str:
    """The words a member uses for an option (room types and house rules are stored as ids)."""
    return OPTION_LABELS.get(option, option)


def normalize_place_name(name: str) -> str:
    """Lower-case, punctuation stripped, whitespace collapsed (the M9 normalisation)."""
    return " ".join(re.sub(r"[^\w\s]", " ", str(name).lower()).split())


def split_list(value: str) -> list[str]:
    """Split a comma-separated catalog field (``cuisines``, ``subcategories``) into items."""
    return [v.strip() for v in str(value).split(",") if v.strip()]


@dataclass
class TravelDB:
    """Places of a travel reference database, keyed by kind; cities and lookups by name."""

    accommodations: list[dict] = field(default_factory=list)
    restaurants: list[dict] = field(default_factory=list)
    attractions: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    source: str = ""

    def __post_init__(self) -> None:
        self._by_name: dict[str, tuple[str, dict]] = {}
        for kind in KINDS:
            for rec in getattr(self, kind):
                self._by_name.setdefault(normalize_place_name(rec["name"]), (kind, rec))

    @staticmethod
    def city_of(record: dict) -> str:
        return record.get("City", record.get("city", ""))

    def cities(self) -> list[str]:
        return sorted({self.city_of(r) for kind in KINDS for r in getattr(self, kind)})

    def in_city(self, kind: str, city: str) -> list[dict]:
        return [r for r in getattr(self, kind) if self.city_of(r) == city]

    def events_between(self, city: str, first_day: str, last_day: str) -> list[dict]:
        """Events in ``city`` dated from ``first_day`` to ``last_day`` (both dd-mm-YYYY)."""
        key = lambda d: (d[6:], d[3:5], d[:2])   # noqa: E731  dd-mm-YYYY sorts as YYYY, mm, dd
        return [e for e in self.in_city("events", city)
                if key(first_day) <= key(e["dateTitle"]) <= key(last_day)]

    def lookup(self, name: str) -> tuple[str, dict] | None:
        """``(kind, record)`` of the place with this (normalised) name, else None."""
        return self._by_name.get(normalize_place_name(name))

    def place_names(self) -> set[str]:
        return set(self._by_name)

    @staticmethod
    def categories(kind: str, record: dict) -> list[str]:
        """The category labels of a record: cuisines, subcategories, segmentName or roomType."""
        if kind == "restaurants":
            return split_list(record["cuisines"])
        if kind == "attractions":
            return split_list(record.get("subcategories", ""))
        if kind == "events":
            return [record["segmentName"]]
        return [record["roomType"].replace("_", " ")]

    @classmethod
    def record_text(cls, kind: str, record: dict) -> str:
        """A one-line description of a record (what the semantic metrics embed)."""
        cats = ", ".join(cls.categories(kind, record))
        label = {"restaurants": "restaurant serving", "attractions": "attraction:",
                 "events": "event:", "accommodations": "accommodation,"}[kind]
        extra = f" house rules: {record['house_rules']}" if kind == "accommodations" and record["house_rules"] else ""
        return f"{record['name']} {label} {cats}{extra}".strip()

    def ref_info(self, city: str | None = None) -> dict[str, list[dict]]:
        """``{kind: records}`` of one city (or all): the ``ref_info_*`` columns of a dialogue CSV."""
        return {k: (self.in_city(k, city) if city else list(getattr(self, k))) for k in KINDS}


def _check_number(kind: str, record: dict, name: str, *, positive: bool, file: str, rid) -> None:
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (positive and value <= 0):
        want = "a positive number" if positive else "a finite number"
        raise ConvsimError(f"{kind} field {name!r} must be {want}, got {value!r}", file=file, record=rid,
                           field=name)


def validate_record(kind: str, record, *, file: str, index) -> dict:
    """Check one record against the schema of its kind; return it or raise ConvsimError."""
    if not isinstance(record, dict):
        raise ConvsimError(f"{kind} record is not an object", file=file, record=index, field=None)
    rid = record.get("name", index)
    for name, types in _SCHEMA[kind].items():
        if name not in record:
            raise ConvsimError(f"{kind} record lacks field {name!r}", file=file, record=rid, field=name)
        value = record[name]
        if not isinstance(value, types) or isinstance(value, bool):
            raise ConvsimError(f"{kind} field {name!r} has type {type(value).__name__}",
                               file=file, record=rid, field=name)
    for name, positive in _OPTIONAL_NUMBERS[kind].items():
        if name in record:
            _check_number(kind, record, name, positive=positive, file=file, rid=rid)
    for name, types in _SCHEMA[kind].items():
        if float in types:
            _check_number(kind, record, name, positive=False, file=file, rid=rid)
    if not str(record["name"]).strip():
        raise ConvsimError(f"{kind} record has an empty name", file=file, record=index, field="name")
    if kind == "accommodations" and record["roomType"] not in ROOM_TYPES:
        raise ConvsimError(f"roomType {record['roomType']!r} is not one of {ROOM_TYPES}",
                           file=file, record=rid, field="roomType")
    if kind == "events" and not _DATE.match(record["dateTitle"]):
        raise ConvsimError(f"dateTitle {record['dateTitle']!r} is not dd-mm-YYYY",
                           file=file, record=rid, field="dateTitle")
    return record


def travel_db_from_ref_info(ref_info: dict[str, list], *, source: str = "") -> TravelDB:
    """A TravelDB from ``{kind: [records]}`` in the project schema (validated)."""
    kinds = {}
    for kind in KINDS:
        rows = ref_info.get(kind) or []
        if not isinstance(rows, list):
            raise ConvsimError(f"{kind} is not a list", file=source, record=None, field=kind)
        kinds[kind] = [validate_record(kind, r, file=source, index=i) for i, r in enumerate(rows)]
    return TravelDB(**kinds, source=source)


@cached_once(maxsize=8)
def load_travel_db(path: str | Path | None = None) -> TravelDB:
    """Load the project database (default) or a folder of the four TripCraft-schema JSON files."""
    folder = Path(path) if path else PROJECT_TRAVEL_DIR
    ref: dict[str, list] = {}
    for kind in KINDS:
        file = folder / f"{kind}.json"
        rows = load_json(file, what="travel database file")
        if not isinstance(rows, list):
            raise ConvsimError("expected a JSON list of records", file=str(file))
        ref[kind] = [validate_record(kind, r, file=str(file), index=i) for i, r in enumerate(rows)]
    db = TravelDB(**ref, source=str(folder))
    for city in db.cities():  # the planner fills every day's stay, meals and a sight in the city
        for kind in ("accommodations", "restaurants", "attractions"):
            if not db.in_city(kind, city):
                raise ConvsimError(f"the city {city!r} has no {kind}: a plan needs at least one",
                                   file=str(folder / f"{kind}.json"), field="City")
    return db


def _tp_row(kind: str, row: dict, *, city: str, file: str, index: str) -> dict:
    """Map one TravelPlanner row to the project schema; a missing column raises ConvsimError."""
    def get(col):
        if col not in row:
            raise ConvsimError(f"TravelPlanner {kind} row lacks column {col!r}", file=file,
                               record=index, field=col)
        return row[col]

    def num(col):
        try:
            return float(get(col))
        except (TypeError, ValueError):
            raise ConvsimError(f"column {col!r} is not a number: {row.get(col)!r}", file=file,
                               record=index, field=col) from None

    if kind == "accommodations":
        room = _TP_ROOM_TYPES.get(str(get("room type")).strip().lower())
        if room is None:
            raise ConvsimError(f"unknown room type {row.get('room type')!r}", file=file,
                               record=index, field="room type")
        rules = row.get("house_rules")
        rules = "" if rules in (None, "") or str(rules).lower() == "nan" else str(rules)
        return {"name": str(get("NAME")), "pricing": num("price"), "roomType": room,
                "house_rules": rules, "max_occupancy": int(num("maximum occupancy")),
                "rating": num("review rate number"), "City": city}
    if kind == "restaurants":
        return {"name": str(get("Name")), "avg_cost": num("Average Cost"),
                "cuisines": str(get("Cuisines")), "rating": num("Aggregate Rating"), "City": city}
    return {"name": str(get("Name")), "subcategories": "", "City": city,
            "address": str(row.get("Address", "")), "latitude": row.get("Latitude"),
            "longitude": row.get("Longitude")}


def load_travelplanner_ref_info(path: str | Path) -> TravelDB:
    """Load a TravelPlanner ``*_ref_info.jsonl`` file (see module docstring) into a TravelDB."""
    file = str(path)
    kinds: dict[str, dict[str, dict]] = {k: {} for k in KINDS}   # dedupe rows repeated across queries
    key_re = re.compile(r"^(Accommodations|Restaurants|Attractions) in (.+)$")
    for lineno, obj in iter_jsonl(path, what="TravelPlanner ref_info file", numbered=True):
        for key, rows in obj.items():
            m = key_re.match(key)
            if not m:
                continue
            kind, city = m.group(1).lower(), m.group(2).strip()
            if isinstance(rows, str):
                rows = parse_json(rows, file=file, record=f"line {lineno} {key}")
            if not isinstance(rows, list):
                raise ConvsimError("value is not a list of rows", file=file,
                                   record=f"line {lineno}", field=key)
            for i, row in enumerate(rows):
                if not isinstance(row, dict):
                    raise ConvsimError("row is not an object", file=file,
                                       record=f"line {lineno} {key}[{i}]", field=None)
                rec = _tp_row(kind, row, city=city, file=file, index=f"line {lineno} {key}[{i}]")
                kinds[kind].setdefault(normalize_place_name(rec["name"]) + "|" + city, rec)
    if not any(kinds.values()):
        raise ConvsimError("no 'Accommodations/Restaurants/Attractions in <city>' rows", file=file)
    return TravelDB(**{k: list(v.values()) for k, v in kinds.items()}, source=file)
