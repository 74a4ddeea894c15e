"""The ``ref_info_*`` catalog records of a dialogue CSV, read as the group metric reference describes them.

The group metric reference says only that the ``ref_info_accommodations`` / ``_restaurants`` / ``_attractions`` /
``_events`` columns hold "database records of real places (restaurants, hotels, attractions,
events)" with "categories, cuisines, room types". It never defines the project's own fields
(``pricing``, ``house_rules``, ``max_occupancy``, ``rating``, ``City``) nor its room-type values,
so a CSV written from the spec alone was refused at its first record. Here a record needs a
non-empty ``name`` alone (or ``Name`` / ``NAME``); every other field is optional:

* a field the metrics read that is missing gets an empty default (categories ``""``, ``City``
  ``""``, numbers ``None``), counted in one note per column;
* a room type is mapped to the project's values where it names one ("Private room",
  "entire home/apt", "shared_room"), else kept as written (M10's room-type channel then only
  matches the same words);
* unknown fields are kept as they are (M15 and the semantic metrics embed the record's text).

A field given with the wrong type (a list where text is expected, a ``name`` that is not text) is
still bad input: one ``ConvsimError`` naming the file, the record and the field.
"""
from __future__ import annotations

from convsim import ConvsimError
from convsim.catalog.travel import KINDS, ROOM_TYPES, TravelDB

_TEXT_DEFAULTS = {"accommodations": {"roomType": "", "house_rules": "", "City": ""},
                  "restaurants": {"cuisines": "", "City": ""},
                  "attractions": {"subcategories": "", "City": ""},
                  "events": {"segmentName": "", "dateTitle": "", "city": ""}}
_NUMBERS = {"accommodations": ("pricing", "max_occupancy", "rating"), "restaurants": ("avg_cost", "rating"),
            "attractions": ("visit_duration", "rating"), "events": ("rating",)}
# a spec-only CSV may name a field as a person would: the project's name for it
_ALIASES = {"Name": "name", "NAME": "name", "room_type": "roomType", "room type": "roomType",
            "roomtype": "roomType", "city": "City", "cuisine": "cuisines", "category": "subcategories",
            "categories": "subcategories", "segment": "segmentName", "date": "dateTitle",
            "price": "pricing", "house rules": "house_rules"}


def room_type(value: str) -> str:
    """``"Private room"`` / ``"entire home/apt"`` / ``"shared_room"`` -> the project's value, else as written."""
    key = " ".join(str(value).strip().lower().replace("_", " ").replace("/apt", "").split())
    for rt in ROOM_TYPES:
        word = rt.split("_")[0]
        if key in (rt.replace("_", " "), f"{word} home", f"{word} room", f"{word} place", word):
            return rt
    return str(value).strip()


def lenient_record(kind: str, record, *, file: str, index) -> tuple[dict, list[str]]:
    """``(record, the fields defaulted)``: one ``ref_info`` record with the defaults the metrics need."""
    if not isinstance(record, dict):
        raise ConvsimError(f"{kind} record is not an object", file=file, record=index, field=f"ref_info_{kind}")
    rec = dict(record)
    for alias, name in _ALIASES.items():
        if alias in rec and name not in rec and not (kind == "events" and alias == "city"):
            rec[name] = rec.pop(alias)
    name = rec.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConvsimError(f"{kind} record needs a non-empty text 'name', got {name!r}", file=file,
                           record=index, field=f"ref_info_{kind}.name")
    defaulted = []
    for field, default in _TEXT_DEFAULTS[kind].items():
        if rec.get(field) is None:
            rec[field], _ = default, defaulted.append(field)
        elif isinstance(rec[field], list) and all(isinstance(v, str) for v in rec[field]):
            rec[field] = ", ".join(rec[field])  # ["Italian", "Pizza"]: the project's comma list
        elif not isinstance(rec[field], str):
            raise ConvsimError(f"{kind} field {field!r} must be text, got {rec[field]!r}", file=file,
                               record=name, field=f"ref_info_{kind}.{field}")
    for field in _NUMBERS[kind]:
        value = rec.get(field)
        if value is None:
            rec[field] = None
            continue
        try:
            rec[field] = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            rec[field] = None  # "$$", "4.5 stars": kept out, the metrics read no price or rating
            defaulted.append(field)
    if kind == "accommodations":
        rec["roomType"] = room_type(rec["roomType"])
    return rec, defaulted


def db_from_csv_ref_info(ref_info: dict[str, list], *, source: str) -> tuple[TravelDB, list[str]]:
    """``(TravelDB, notes)`` from the pooled ``ref_info_*`` rows of a dialogue CSV."""
    kinds, notes = {}, []
    for kind in KINDS:
        rows, missing = [], {}
        for i, r in enumerate(ref_info.get(kind) or []):
            rec, defaulted = lenient_record(kind, r, file=source, index=f"ref_info_{kind}[{i}]")
            rows.append(rec)
            for f in defaulted:
                missing[f] = missing.get(f, 0) + 1
        kinds[kind] = rows
        if missing:
            notes.append(f"ref_info_{kind}: " + ", ".join(f"{f} absent on {n} of {len(rows)}"
                                                          for f, n in sorted(missing.items())))
    return TravelDB(**kinds, source=source), notes
