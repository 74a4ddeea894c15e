"""State-graded customer service (evaluation/service/state_grading.py) and the booking tools
(agents/service/tools.py): each defect injected into the bookings an agent left moves the metric."""
from __future__ import annotations

import pytest

from convsim.agents.service.tools import ServiceWorld
from convsim.catalog.service.db import booking_available, load_service_db, load_service_schema
from convsim.evaluation.service.state_grading import grade_bookings, policy_compliance_state

DB, SCHEMA = load_service_db(), load_service_schema()
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _values(domain: str, name: str, *, available: bool) -> dict:
    for day in DAYS:
        for people in "12345678":
            for hour in range(11, 21):
                b = {"bookday": day, "bookpeople": people, "booktime": f"{hour:02d}:00"}
                if booking_available(domain, name, b) == available:
                    return b
    raise AssertionError("no booking values found")


@pytest.fixture(scope="module")
def case():
    record = DB.records["restaurant"][0]
    name = record["name"]
    book = _values("restaurant", name, available=True)
    goal = {"domains": [{"domain": "restaurant", "constraints": {"food": record["food"], "area": record["area"]},
                         "requests": [], "book": book, "fail_book": None}]}
    good = {"domain": "restaurant", "entity": name, "booking": dict(book), "reference": "R1"}
    return goal, good, record


def test_the_right_booking_succeeds(case):
    goal, good, _ = case
    g = grade_bookings(goal, [good], DB, SCHEMA)
    assert g["task_success_state"] == 1 and g["policy_compliance_state"] == 1.0
    assert not (g["missing"] or g["extra"] or g["wrong"] or g["violations"])


def test_wrong_slot_value_fails(case):
    goal, good, _ = case
    other_day = next(d for d in DAYS if d != good["booking"]["bookday"])
    bad = dict(good, booking=dict(good["booking"], bookday=other_day))
    g = grade_bookings(goal, [bad], DB, SCHEMA)
    assert g["task_success_state"] == 0
    assert g["wrong"] and "bookday" in g["wrong"][0]["differs"]


def test_wrong_entity_fails(case):
    goal, good, record = case
    other = next(r for r in DB.records["restaurant"] if r["food"] != record["food"])
    g = grade_bookings(goal, [dict(good, entity=other["name"])], DB, SCHEMA)
    assert g["task_success_state"] == 0 and "entity" in g["wrong"][0]["differs"]


def test_missing_booking_fails(case):
    goal, _, _ = case
    g = grade_bookings(goal, [], DB, SCHEMA)
    assert g["task_success_state"] == 0 and g["missing"] == ["restaurant"]
    assert g["policy_compliance_state"] is None  # nothing booked: nothing to judge, not a perfect 1


def test_extra_booking_fails(case):
    goal, good, _ = case
    hotel = DB.records["hotel"][0]["name"]
    extra = {"domain": "hotel", "entity": hotel,
             "booking": {"bookday": "monday", "bookpeople": "2", "bookstay": "1"}, "reference": "H1"}
    g = grade_bookings(goal, [good, extra], DB, SCHEMA)
    assert g["task_success_state"] == 0 and g["extra"] == [f"hotel:{hotel}"]
    twice = grade_bookings(goal, [good, dict(good, reference="R2")], DB, SCHEMA)
    assert twice["task_success_state"] == 0 and len(twice["extra"]) == 1


def test_no_booking_goal_is_not_graded_from_state_unless_something_was_booked(case):
    # nothing to book and nothing booked: no state to grade (None), never a free success for an agent
    # that never acts; booking what nobody asked for is a failure
    goal, good, _ = case
    quiet = {"domains": [dict(goal["domains"][0], book=None)]}
    assert grade_bookings(quiet, [], DB, SCHEMA)["task_success_state"] is None
    assert grade_bookings(quiet, [good], DB, SCHEMA)["task_success_state"] == 0


def test_unavailable_venue_is_a_violation(case):
    goal, good, record = case
    full = _values("restaurant", record["name"], available=False)
    bad = dict(good, booking=full)
    assert policy_compliance_state([bad], DB, SCHEMA) == 0.0
    g = grade_bookings({"domains": [dict(goal["domains"][0], book=full)]}, [bad], DB, SCHEMA)
    assert g["task_success_state"] == 0 and g["violations"][0]["violations"] == ["unavailable"]
    assert policy_compliance_state([good, bad], DB, SCHEMA) == 0.5


def test_missing_required_slot_is_a_violation(case):
    _, good, _ = case
    bad = dict(good, booking={k: v for k, v in good["booking"].items() if k != "booktime"})
    assert policy_compliance_state([bad], DB, SCHEMA) == 0.0
    assert "missing:booktime" in grade_bookings({"domains": []}, [bad], DB, SCHEMA)["violations"][0]["violations"]


def test_tools_book_into_a_per_session_copy(case):
    goal, good, record = case
    world = ServiceWorld(DB, SCHEMA)
    found = world.find_entities("restaurant", {"food": record["food"], "area": record["area"]})
    assert found["ok"] and any(r["name"] == record["name"] for r in found["results"])
    assert "location" not in found["results"][0]  # only what an agent may be shown
    refused = world.book("restaurant", record["name"], people=good["booking"]["bookpeople"],
                         day=good["booking"]["bookday"])
    assert refused == {"ok": False, "reason": "missing", "missing": ["booktime"]} and not world.bookings
    full = _values("restaurant", record["name"], available=False)
    assert world.book("restaurant", record["name"], people=full["bookpeople"], day=full["bookday"],
                      time=full["booktime"])["reason"] == "unavailable"
    ok = world.book("restaurant", record["name"], people=good["booking"]["bookpeople"],
                    day=good["booking"]["bookday"], time=good["booking"]["booktime"])
    assert ok["ok"] and len(ok["reference"]) == 8
    assert [c["name"] for c in world.calls] == ["find_entities", "book", "book", "book"]
    assert grade_bookings(goal, world.bookings, DB, SCHEMA)["task_success_state"] == 1
    other = ServiceWorld(DB, SCHEMA, bookings=world.bookings)
    other.bookings.clear()
    assert len(world.bookings) == 1  # a world copies the bookings it is seeded with


def test_tools_are_langchain_tools(case):
    _, good, record = case
    world = ServiceWorld(DB, SCHEMA)
    tools = {t.name: t for t in world.tools()}
    assert set(tools) == {"find_entities", "lookup_entity", "book"}
    out = tools["lookup_entity"].invoke({"domain": "restaurant", "name": record["name"]})
    assert out["ok"] and out["entity"]["address"] == record["address"]
    assert tools["book"].invoke({"domain": "attraction", "name": "x", "people": "2"})["reason"] == "not_bookable"
