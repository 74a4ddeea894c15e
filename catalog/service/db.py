"""The customer-service database and schema: the project's own data or the real MultiWOZ files.

``load_service_db(path)`` reads a folder holding ``restaurant_db.json``, ``hotel_db.json``,
``attraction_db.json`` and ``train_db.json`` in the MultiWOZ layout: by default the project's
``catalog/data/service`` (written by ``generate.py`` there), or ``../shared/data/multiwoz/db``.
Record field names are normalised on load (``arriveBy`` -> ``arriveby``, ``entrance fee`` ->
``entrancefee``, ``trainID`` -> ``trainid``) and every value used for matching is normalised
with ``convsim.catalog.service.normalize``. A record that lacks a required field raises
``ConvsimError`` naming the file, the record and the field.

``load_service_schema(path)`` reads a MultiWOZ 2.2 ``schema.json``. The real 2.2 schema lists
no ``required_slots`` for its booking intents, so the booking-required slots are derived from
it: every ``<domain>-book*`` slot of the transactional intent, plus ``<domain>-name`` when the
domain has a name slot, else (train) the intent's categorical search slots other than
``bookpeople`` (departure, destination, day), which is what picks one train. When an intent
does list ``required_slots``, those win.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz import fuzz

from convsim.catalog.service.normalize import (DONTCARE, canonical_name, names_match,
                                       normalize_slot_name, normalize_value)
from convsim import ConvsimError
from convsim.textio import load_json
from convsim.lazy import cached_once

PROJECT_DB_DIR = Path(__file__).resolve().parents[1] / "data" / "service"
DOMAINS = ("restaurant", "hotel", "attraction", "train")
# All MultiWOZ services; a dialogue naming any other domain is malformed.
MULTIWOZ_DOMAINS = frozenset(DOMAINS + ("taxi", "police", "hospital", "bus", "general"))
REQUIRED_FIELDS = {
    "restaurant": ("id", "name", "area", "food", "pricerange", "address", "postcode"),
    "hotel": ("id", "name", "area", "pricerange", "type", "stars", "parking", "internet",
              "address", "postcode", "phone"),
    "attraction": ("id", "name", "area", "type", "address", "postcode", "entrancefee", "phone"),
    "train": ("trainid", "departure", "destination", "day", "leaveat", "arriveby", "price",
              "duration"),
}
# Slots a user may constrain a search with (the rest of a record is information to request).
SEARCH_SLOTS = {
    "restaurant": ("area", "food", "pricerange", "name"),
    "hotel": ("area", "pricerange", "type", "stars", "parking", "internet", "name"),
    "attraction": ("area", "type", "name"),
    "train": ("departure", "destination", "day", "leaveat", "arriveby"),
}
# Facts a user may ask for once an entity is chosen.
REQUESTABLE_SLOTS = {
    "restaurant": ("address", "phone", "postcode", "food", "area", "pricerange"),
    "hotel": ("address", "phone", "postcode", "area", "pricerange", "stars", "type",
              "parking", "internet"),
    "attraction": ("address", "phone", "postcode", "entrancefee", "area", "type", "openhours"),
    "train": ("trainid", "price", "duration", "leaveat", "arriveby"),
}


@dataclass(frozen=True)
class ServiceSchema:
    """Slots per domain and the booking-required slots per bookable domain."""
    slots: dict[str, tuple[str, ...]]
    categorical: dict[str, dict[str, tuple[str, ...]]]
    booking_required: dict[str, tuple[str, ...]]
    file: str = ""

    def bookable(self, domain: str) -> bool:
        return domain in self.booking_required

    def book_slots(self, domain: str) -> tuple[str, ...]:
        return tuple(s for s in self.slots.get(domain, ()) if s.startswith("book"))


def _read_json(path: Path) -> object:
    return load_json(path)  # UTF-8, bounded nesting, one-line errors naming file and position


def _schema_slot(value: object, *, file: Path, record: str, field: str) -> str:
    """The slot part of a ``<domain>-<slot>`` name, normalised; anything else is bad input."""
    if not isinstance(value, str) or "-" not in value or not all(p.strip() for p in value.split("-", 1)):
        raise ConvsimError(f"a slot name must be a string '<domain>-<slot>', got {value!r}", file=file,
                           record=record, field=field)
    return normalize_slot_name(value.split("-", 1)[1])


def _schema_list(service: dict, key: str, *, file: Path, record: str) -> list:
    value = service.get(key, [])
    if not isinstance(value, list):
        raise ConvsimError(f"{key} must be a list, got {type(value).__name__}", file=file, record=record, field=key)
    return value


def _schema_bool(entry: dict, key: str, *, file: Path, record: str, field: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise ConvsimError(f"{key} must be true or false, got {value!r}", file=file, record=record, field=field)
    return value


@cached_once(maxsize=8)
def load_service_schema(path: str | Path | None = None) -> ServiceSchema:
    """Read a MultiWOZ 2.2 ``schema.json`` (default: the project's own). A malformed service raises
    ``ConvsimError`` naming the file, the service (``<name> (index i)``) and the field
    (``slots[j].name``, ``intents[k].required_slots[m]`` ...)."""
    file = Path(path) if path else PROJECT_DB_DIR / "schema.json"
    services = _read_json(file)
    if not isinstance(services, list):
        raise ConvsimError("expected a list of services", file=file)
    slots, categorical, required = {}, {}, {}
    for i, service in enumerate(services):
        if not isinstance(service, dict) or "service_name" not in service:
            raise ConvsimError("service without service_name", file=file, record=i,
                               field="service_name")
        domain = service["service_name"]
        if not isinstance(domain, str) or not domain.strip():
            raise ConvsimError(f"service_name must be a non-empty string, got {domain!r}", file=file,
                               record=i, field="service_name")
        record = f"{domain} (index {i})"
        if domain in slots:
            raise ConvsimError("the service appears twice", file=file, record=record, field="service_name")
        names, cats = [], {}
        for j, s in enumerate(_schema_list(service, "slots", file=file, record=record)):
            where = f"slots[{j}]"
            if not isinstance(s, dict):
                raise ConvsimError("a slot must be an object", file=file, record=record, field=where)
            if "name" not in s:
                raise ConvsimError("slot without name", file=file, record=record, field=f"{where}.name")
            slot = _schema_slot(s["name"], file=file, record=record, field=f"{where}.name")
            names.append(slot)
            is_cat = _schema_bool(s, "is_categorical", file=file, record=record, field=f"{where}.is_categorical")
            values = s.get("possible_values")
            values = [] if values is None else values  # absent or null: no listed values
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ConvsimError(f"possible_values must be a list of strings, got {values!r}", file=file,
                                   record=record, field=f"{where}.possible_values")
            if is_cat and values:
                cats[slot] = tuple(v.lower() for v in values)
        slots[domain], categorical[domain] = tuple(names), cats
        for k, intent in enumerate(_schema_list(service, "intents", file=file, record=record)):
            where = f"intents[{k}]"
            if not isinstance(intent, dict):
                raise ConvsimError(f"an intent must be an object, got {intent!r}", file=file, record=record,
                                   field=where)
            if not _schema_bool(intent, "is_transactional", file=file, record=record,
                                field=f"{where}.is_transactional"):
                continue
            listed_raw = intent.get("required_slots", [])
            if not isinstance(listed_raw, list):
                raise ConvsimError("required_slots must be a list of '<domain>-<slot>' names", file=file,
                                   record=record, field=f"{where}.required_slots")
            listed = [_schema_slot(s, file=file, record=record, field=f"{where}.required_slots[{m}]")
                      for m, s in enumerate(listed_raw)]
            if listed:
                required[domain] = tuple(listed)
                continue
            optional_raw = intent.get("optional_slots", {})
            if not isinstance(optional_raw, (dict, list)):
                raise ConvsimError("optional_slots must be an object (or a list) of '<domain>-<slot>' names",
                                   file=file, record=record, field=f"{where}.optional_slots")
            optional = [_schema_slot(s, file=file, record=record, field=f"{where}.optional_slots")
                        for s in optional_raw]
            book = [s for s in optional if s.startswith("book")]
            if "name" in names:
                ident = ["name"]
            else:
                ident = [s for s in optional if s in cats and not s.startswith("book")]
            if ident + book:
                required[domain] = tuple(ident + book)
    return ServiceSchema(slots=slots, categorical=categorical, booking_required=required,
                         file=str(file))


def _normalise_record(domain: str, raw: dict, file: Path, index: int) -> dict:
    record = {normalize_slot_name(k): v for k, v in raw.items()}
    ident = record.get("id", record.get("trainid", index))
    for name in REQUIRED_FIELDS[domain]:
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ConvsimError(f"{domain} record lacks required field '{name}'", file=file,
                               record=f"{ident} (index {index})", field=name)
    return record


class ServiceDB:
    """Records of the four searchable domains with MultiWOZ-style matching."""

    def __init__(self, records: dict[str, list[dict]], source: str) -> None:
        self.records = records
        self.source = source
        self._by_name = {d: {canonical_name(r["name"]): r for r in rs}
                         for d, rs in records.items() if d != "train"}
        self._trains = {r["trainid"].lower(): r for r in records.get("train", [])}
        # Values normalised once, so a search compares strings only.
        self._normed = {d: [{k: normalize_value(k, v) for k, v in r.items() if isinstance(v, str)}
                            for r in rs] for d, rs in records.items()}

    def values(self, domain: str, slot: str) -> list[str]:
        """Distinct normalised values of one field (for lexicons and goal sampling)."""
        out = {normalize_value(slot, r.get(slot)) for r in self.records.get(domain, [])}
        return sorted(v for v in out if v)

    def query(self, domain: str, constraints: dict[str, str]) -> list[dict]:
        """Records that satisfy every constraint; ``dontcare`` and book* slots are ignored.

        Train times follow MultiWOZ: ``leaveat`` means leaving at or after, ``arriveby``
        arriving at or before.
        """
        if domain not in self.records:
            return []
        wanted = {s: (v if s == "name" else normalize_value(s, v)) for s, v in constraints.items()
                  if v not in (None, DONTCARE) and not s.startswith("book")}
        out = []
        for record, normed in zip(self.records[domain], self._normed[domain]):
            if all(self._satisfies(domain, record, normed, s, v) for s, v in wanted.items()):
                out.append(record)
        if domain == "train" and "leaveat" in constraints:
            out.sort(key=lambda r: r["leaveat"])
        elif domain == "train" and "arriveby" in constraints:
            out.sort(key=lambda r: r["arriveby"], reverse=True)
        return out

    @staticmethod
    def _satisfies(domain: str, record: dict, normed: dict, slot: str, value: str) -> bool:
        if slot == "name":
            return names_match(record.get("name", ""), value)
        if slot not in record:
            return True  # a slot the domain does not store cannot exclude a record
        if domain == "train" and slot in ("leaveat", "arriveby"):
            have = normed[slot]
            return have >= value if slot == "leaveat" else have <= value
        return normed.get(slot) == value

    def find_entity(self, domain: str, name: str) -> dict | None:
        """The record named ``name`` (exact after normalisation, else fuzzy ratio >= 90)."""
        if not name:
            return None
        if domain == "train":
            return self._trains.get(str(name).strip().lower())
        table = self._by_name.get(domain, {})
        key = canonical_name(name)
        for candidate in (key, "the " + key, key.removeprefix("the ")):
            if candidate in table:
                return table[candidate]
        best = max(table, key=lambda n: fuzz.token_set_ratio(n, key), default=None)
        if best is not None and fuzz.token_set_ratio(best, key) >= 90 and len(key) > 3:
            return table[best]
        return None

    def entity_id(self, domain: str, record: dict) -> str:
        return record["trainid"] if domain == "train" else record["name"]


def booking_available(domain: str, entity: str, booking: dict[str, str]) -> bool:
    """Deterministic availability oracle of the booking system (the DB has no calendar).

    About one request in four fails, decided by a hash of the entity and the booking details,
    so the agent, the simulator's goal sampler and the evaluator all see the same answer.
    """
    key = json.dumps([domain, entity.lower(), sorted((k, str(v)) for k, v in booking.items())])
    return hashlib.blake2b(key.encode(), digest_size=2).digest()[0] >= 64


def booking_reference(domain: str, entity: str, booking: dict[str, str], salt: object = "") -> str:
    """An 8-character reference number, stable for the same booking and salt."""
    key = json.dumps([domain, entity.lower(), sorted(booking.items()), str(salt)])
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest().upper()
    return digest[:8]


@cached_once(maxsize=8)
def load_service_db(path: str | Path | None = None) -> ServiceDB:
    """Read the four ``<domain>_db.json`` files of a folder (default: the project's own)."""
    folder = Path(path) if path else PROJECT_DB_DIR
    records: dict[str, list[dict]] = {}
    for domain in DOMAINS:
        file = folder / f"{domain}_db.json"
        raw = _read_json(file)
        if not isinstance(raw, list):
            raise ConvsimError("expected a JSON list of records", file=file)
        if not raw:  # the simulated users draw their goals from every domain
            raise ConvsimError(f"no {domain} records: every domain needs at least one", file=file)
        out = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise ConvsimError("record is not a JSON object", file=file, record=i)
            out.append(_normalise_record(domain, item, file, i))
        records[domain] = out
    return ServiceDB(records, str(folder))
