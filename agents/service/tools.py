"""The customer-service world as LangChain tools: find, look up and book MultiWOZ entities.

``ServiceWorld(db, schema, bookings=...)`` is one session's copy of the booking system: the
MultiWOZ-style records are read-only (shared), the bookings table is the session's own (a list
of ``{"domain", "entity", "booking", "reference", "turn"}``), seeded from the graph state at the
start of each agent turn and written back after it, so a session never sees another's bookings
and a checkpoint holds everything. ``world.tools()`` returns three ``StructuredTool`` objects:

* ``find_entities(domain, constraints)`` — records matching every constraint (MultiWOZ
  matching of ``ServiceDB.query``), the first ten, with the count;
* ``lookup_entity(domain, name)`` — one record by name (a train by its id);
* ``book(domain, name, people, day, time, stay)`` — validated against the schema: the domain must
  be bookable, the entity must exist, every booking-required slot
  (``ServiceSchema.booking_required`` minus the entity itself: restaurant people/day/time, hotel
  people/day/stay, train people) must be given, and the venue must be available
  (``booking_available``, the same oracle the built-in agent and the goal sampler use). A
  refused booking returns ``{"ok": false, "reason": "missing"|"unavailable"|..., ...}`` and
  changes nothing; an accepted one appends to the session's bookings and returns the reference.

Every call and its result is appended to ``world.calls`` (this turn's log). Nothing here reads
the simulated user's goal: the tools expose the database and the session's own bookings only.
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
from typing import Any, Iterator

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from convsim.catalog.service.db import (DOMAINS, REQUESTABLE_SLOTS, SEARCH_SLOTS, ServiceDB, ServiceSchema,
                                        booking_available, booking_reference)
from convsim.catalog.service.normalize import normalize_slot_name

MAX_RESULTS = 10
# the booking tool's friendly argument names -> MultiWOZ book* slots
BOOK_ARGS = {"people": "bookpeople", "day": "bookday", "time": "booktime", "stay": "bookstay"}
_SHOWN = {d: tuple(dict.fromkeys(("trainid",) * (d == "train") + ("name",) * (d != "train")
                                 + SEARCH_SLOTS[d] + REQUESTABLE_SLOTS[d])) for d in DOMAINS}


class FindArgs(BaseModel):
    domain: str = Field(description="restaurant | hotel | attraction | train")
    constraints: dict[str, str] = Field(default_factory=dict, description=(
        "slot -> value; restaurant: area, food, pricerange, name; hotel: area, pricerange, type, stars, "
        "parking, internet, name; attraction: area, type, name; train: departure, destination, day, "
        "leaveat (leave at or after HH:MM), arriveby (arrive by HH:MM)"))


class LookupArgs(BaseModel):
    domain: str = Field(description="restaurant | hotel | attraction | train")
    name: str = Field(description="the venue's name, or a train's id (e.g. TR1234)")


class BookArgs(BaseModel):
    domain: str = Field(description="restaurant | hotel | train")
    name: str = Field(description="the venue's name, or the train's id")
    people: str | None = Field(None, description="number of people (all bookable domains)")
    day: str | None = Field(None, description="day of the week (restaurant, hotel)")
    time: str | None = Field(None, description="time HH:MM (restaurant)")
    stay: str | None = Field(None, description="number of nights (hotel)")


def public_record(domain: str, record: dict) -> dict:
    """The fields of a record an agent is shown (no coordinates, no internal ids)."""
    return {k: record[k] for k in _SHOWN.get(domain, ()) if k in record}


TOOL_NAMES = ("find_entities", "lookup_entity", "book")  # ServiceWorld.tools(), in order (the slot declares them)


class ServiceWorld:
    """One session's booking system over a shared read-only database (see the module docstring)."""

    def __init__(self, db: ServiceDB, schema: ServiceSchema, *, bookings: list[dict] | None = None,
                 turn: int = 0) -> None:
        self.db, self.schema, self.turn = db, schema, turn
        self.bookings: list[dict] = copy.deepcopy(list(bookings or []))
        self.calls: list[dict] = []

    # -- the three operations (plain methods; the tools wrap them) --------------------------------
    def find_entities(self, domain: str, constraints: dict[str, str] | None = None) -> dict:
        domain = str(domain).strip().lower()
        if domain not in DOMAINS:
            return self._log("find_entities", {"domain": domain, "constraints": constraints},
                             {"ok": False, "reason": "unknown_domain", "domains": list(DOMAINS)})
        wanted = {normalize_slot_name(k): str(v) for k, v in (constraints or {}).items()}
        unknown = sorted(k for k in wanted if k not in SEARCH_SLOTS[domain])
        if unknown:
            return self._log("find_entities", {"domain": domain, "constraints": constraints},
                             {"ok": False, "reason": "unknown_slot", "slots": unknown,
                              "searchable": list(SEARCH_SLOTS[domain])})
        found = self.db.query(domain, wanted)
        return self._log("find_entities", {"domain": domain, "constraints": wanted},
                         {"ok": True, "count": len(found),
                          "results": [public_record(domain, r) for r in found[:MAX_RESULTS]]})

    def lookup_entity(self, domain: str, name: str) -> dict:
        domain = str(domain).strip().lower()
        record = self.db.find_entity(domain, name) if domain in DOMAINS else None
        result = ({"ok": True, "entity": public_record(domain, record)} if record is not None
                  else {"ok": False, "reason": "not_found"})
        return self._log("lookup_entity", {"domain": domain, "name": name}, result)

    def book(self, domain: str, name: str, **details: Any) -> dict:
        domain = str(domain).strip().lower()
        booking = {BOOK_ARGS.get(k, normalize_slot_name(k)): str(v).strip() for k, v in details.items()
                   if v not in (None, "")}
        args = {"domain": domain, "name": name, **booking}
        if not self.schema.bookable(domain):
            return self._log("book", args, {"ok": False, "reason": "not_bookable",
                                            "bookable": sorted(self.schema.booking_required)})
        record = self.db.find_entity(domain, name)
        if record is None:
            return self._log("book", args, {"ok": False, "reason": "not_found"})
        allowed = set(self.schema.book_slots(domain))
        extra = sorted(k for k in booking if k not in allowed)
        if extra:
            return self._log("book", args, {"ok": False, "reason": "unknown_slot", "slots": extra,
                                            "needs": self.needed(domain)})
        missing = [s for s in self.needed(domain) if s not in booking]
        if missing:
            return self._log("book", args, {"ok": False, "reason": "missing", "missing": missing})
        entity = self.db.entity_id(domain, record)
        if not booking_available(domain, entity, booking):
            return self._log("book", args, {"ok": False, "reason": "unavailable", "entity": entity})
        ref = booking_reference(domain, entity, booking)
        self.bookings.append({"domain": domain, "entity": entity, "booking": booking, "reference": ref,
                              "turn": self.turn})
        result = {"ok": True, "reference": ref, "entity": entity, "booking": booking}
        if domain == "train":
            result["price"] = record.get("price")
        return self._log("book", args, result)

    def needed(self, domain: str) -> list[str]:
        """The booking-required slots the caller must give (the entity itself is the ``name`` arg)."""
        return [s for s in self.schema.booking_required.get(domain, ()) if s.startswith("book")]

    def _log(self, name: str, args: dict, result: dict) -> dict:
        self.calls.append({"name": name, "args": copy.deepcopy(args), "result": copy.deepcopy(result)})
        return result

    # -- LangChain tools ---------------------------------------------------------------------------
    def tools(self) -> list[StructuredTool]:
        def find_entities(domain: str, constraints: dict[str, str] | None = None) -> dict:
            return self.find_entities(domain, constraints)

        def lookup_entity(domain: str, name: str) -> dict:
            return self.lookup_entity(domain, name)

        def book(domain: str, name: str, people: str | None = None, day: str | None = None,
                 time: str | None = None, stay: str | None = None) -> dict:
            return self.book(domain, name, people=people, day=day, time=time, stay=stay)

        return [
            StructuredTool.from_function(find_entities, name="find_entities", args_schema=FindArgs,
                                         description="Find restaurants, hotels, attractions or trains "
                                                     "matching constraints (up to 10 records and the count)."),
            StructuredTool.from_function(lookup_entity, name="lookup_entity", args_schema=LookupArgs,
                                         description="Look up one venue by name (or a train by id): "
                                                     "address, phone, postcode, prices, ..."),
            StructuredTool.from_function(book, name="book", args_schema=BookArgs,
                                         description="Book a restaurant (people, day, time), a hotel "
                                                     "(people, day, stay) or a train (people). Returns "
                                                     "a reference number, or why it was refused."),
        ]


_CURRENT: contextvars.ContextVar[ServiceWorld | None] = contextvars.ContextVar("convsim_service_world", default=None)


@contextlib.contextmanager
def bound_world(world: ServiceWorld) -> Iterator[ServiceWorld]:
    """Within the block, :func:`session_tools` act on ``world`` (the scenario binds each agent turn)."""
    token = _CURRENT.set(world)
    try:
        yield world
    finally:
        _CURRENT.reset(token)


class _Unbound:
    """What a session tool answers outside a convsim session (no booking system to act on)."""

    def __getattr__(self, name: str):
        return lambda *a, **k: {"ok": False, "reason": "no_session",
                                "detail": "these tools act on a convsim session's booking system"}


def session_tools() -> list[StructuredTool]:
    """The three tools, bound at call time to the running session's world (:func:`bound_world`): what
    a graph agent built once at import (``create_agent(model, tools=session_tools())``) uses, so each
    session books in its own copy. The scenario binds the world around every agent turn; LangGraph
    and LangChain run tools in a copy of the caller's context, so the binding reaches them."""
    class _Current:
        def __getattr__(self, name: str):
            world = _CURRENT.get()
            return getattr(world if world is not None else _Unbound(), name)
    return ServiceWorld.tools(_Current())  # type: ignore[arg-type]


def service_tools(db: ServiceDB, schema: ServiceSchema, *, bookings: list[dict] | None = None
                  ) -> tuple[ServiceWorld, list[StructuredTool]]:
    """A fresh session world and its tools (for examples and tests)."""
    world = ServiceWorld(db, schema, bookings=bookings)
    return world, world.tools()
