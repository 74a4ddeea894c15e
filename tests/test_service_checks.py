"""Checks that see what the system did: response-text entities, the booking audit, grounding
before/after the supervisor; each against a hand-made defect."""
from pathlib import Path

import pytest

from convsim.catalog.service.db import load_service_db, load_service_schema
from convsim.evaluation.service.audit import action_grounding, booking_audit, supervisor_correction
from convsim.evaluation.service.text_check import text_hallucination_turn, text_mentions

SHARED = Path(__file__).parents[1].parent / "shared" / "data" / "multiwoz"


def _said(text, db, **kw):
    return [(m["slot"], m["value"], m["grounded"]) for m in text_mentions(text, db, **kw)]


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/multiwoz is absent")
def test_spec_golden_dragon_example_is_caught_on_the_real_db():
    db = load_service_db(str(SHARED / "db"))
    said = _said("I recommend The Golden Dragon, phone: 123-456-7890", db)
    assert said == [("name", "Golden Dragon", False), ("phone", "123-456-7890", False)]
    assert text_hallucination_turn(text_mentions("I recommend The Golden Dragon, phone: 123-456-7890", db)) == 1.0
    # the same sentence about a real venue with its real facts is grounded
    real = "I recommend Pizza Hut City Centre on Regent Street, postcode CB2 1AB, phone 01223 323737."
    assert all(g for _, _, g in _said(real, db)) and len(_said(real, db)) == 4
    # a real venue with a wrong phone: 1 of 2 mentions ungrounded
    wrong = text_mentions("pizza hut city centre, phone 01223 999999", db)
    assert text_hallucination_turn(wrong) == 0.5


def test_templates_trains_and_no_mentions():
    db = load_service_db()
    hotel = db.records["hotel"][0]
    assert _said(f"Your booking at {hotel['name']} is confirmed. Your reference number is AB12CD34.", db) == \
        [("name", hotel["name"], True)]
    train = db.records["train"][0]["trainid"]
    assert _said(f"Train {train} matches your request.", db) == [("trainid", train, True)]
    assert _said("I have booked train TR0000 for you.", db) == [("trainid", "TR0000", False)]
    assert text_mentions("Could you tell me the day and number of people? Thank You!", db) == []
    assert text_hallucination_turn([]) is None


def test_attribute_attributed_to_action_entity_when_no_name_is_said():
    db = load_service_db()
    r = db.records["restaurant"][0]
    ok = text_mentions(f"Their phone is {r['phone']}.", db, action_entity=("restaurant", r["name"]))
    bad = text_mentions("Their phone is 01223 000000.", db, action_entity=("restaurant", r["name"]))
    assert [m["grounded"] for m in ok] == [True] and [m["grounded"] for m in bad] == [False]


def test_booking_audit_is_independent_of_the_supervisor():
    db, schema = load_service_db(), load_service_schema()
    hotel = db.records["hotel"][0]["name"]
    full = {"kind": "book", "domain": "hotel", "entity": hotel,
            "booking": {"bookday": "friday", "bookpeople": "2", "bookstay": "3"}}
    assert booking_audit(full, schema, db) == {"booked": 1, "missing": [], "unconfirmed": [], "compliant": 1}
    partial = dict(full, booking={"bookpeople": "2"})
    assert booking_audit(partial, schema, db)["missing"] == ["bookday", "bookstay"]
    assert booking_audit(partial, schema, db)["compliant"] == 0
    nameless = dict(full, entity="the golden dragon")  # no such venue: the name slot is not satisfied
    assert booking_audit(nameless, schema, db)["missing"] == ["name"]
    gold = {"hotel-bookday": ["saturday"], "hotel-bookpeople": ["2"], "hotel-bookstay": ["3"]}
    assert booking_audit(full, schema, db, gold)["unconfirmed"] == ["bookday"]
    train = db.records["train"][0]
    booked_train = {"kind": "book", "domain": "train", "entity": train["trainid"], "booking": {"bookpeople": "1"}}
    assert booking_audit(booked_train, schema, db)["compliant"] == 1
    assert booking_audit({"kind": "search"}, schema, db)["booked"] == 0


def test_grounding_before_and_after_and_corrections():
    db = load_service_db()
    r = db.records["restaurant"][0]
    good = {"kind": "search", "domain": "restaurant", "entity": r["name"], "informed": {"phone": r["phone"]}}
    fake = dict(good, entity="the golden dragon")
    lying = dict(good, informed={"phone": "01223000000"})
    assert action_grounding(good, db) == {"mentions": 1, "grounded": 1, "wrong_facts": []}
    assert action_grounding(fake, db)["grounded"] == 0
    assert action_grounding(lying, db)["wrong_facts"] == ["phone"]
    assert action_grounding({"kind": "request", "domain": "hotel"}, db)["mentions"] == 0
    assert supervisor_correction(fake, dict(fake, kind="nooffer", entity=None)) == 1
    assert supervisor_correction(good, dict(good)) == 0
