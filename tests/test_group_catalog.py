"""The travel reference database: shipped data, generator, TravelPlanner loader, bad records."""

import json
import shutil
from pathlib import Path

import pytest

from convsim.catalog.data.travel import generate as travel_generate
from convsim.catalog.travel import (PROJECT_TRAVEL_DIR, ROOM_TYPES, TravelDB, load_travel_db,
                            load_travelplanner_ref_info, normalize_place_name)
from convsim import ConvsimError

DATA = Path(__file__).parent / "data" / "group"


def test_shipped_db_schema_and_coverage():
    db = load_travel_db()
    assert len(db.cities()) >= 3
    assert {r["roomType"] for r in db.accommodations} == set(ROOM_TYPES)
    for city in db.cities():
        cuisines = {c for r in db.in_city("restaurants", city) for c in TravelDB.categories("restaurants", r)}
        assert set(travel_generate.CUISINES) <= cuisines
        cats = {c for r in db.in_city("attractions", city) for c in TravelDB.categories("attractions", r)}
        assert set(travel_generate.ATTRACTION_CATEGORIES) <= cats
        # every segment has an event in any two consecutive days of the window
        for d in range(1, 10):
            window = db.events_between(city, f"{d:02d}-06-2026", f"{d + 1:02d}-06-2026")
            assert {e["segmentName"] for e in window} == set(travel_generate.EVENT_SEGMENTS)


def test_generator_is_seeded_and_matches_the_shipped_files(tmp_path):
    travel_generate.main(tmp_path)
    for kind in ("accommodations", "restaurants", "attractions", "events"):
        assert (tmp_path / f"{kind}.json").read_text() == (PROJECT_TRAVEL_DIR / f"{kind}.json").read_text()
    assert travel_generate.generate(1) != travel_generate.generate(2)


def test_lookup_and_normalisation():
    db = load_travel_db()
    rec = db.restaurants[0]
    assert db.lookup(rec["name"].upper() + "!")[1] is rec
    assert normalize_place_name("  Lino's  Café, ") == "lino s café"
    assert db.lookup("No Such Place") is None


def test_travelplanner_loader_same_api():
    db = load_travelplanner_ref_info(DATA / "travelplanner_ref_info.jsonl")
    assert db.cities() == ["Chicago", "Rockford"]
    assert len(db.restaurants) == 2                       # Lino's repeated across lines: deduplicated
    rooms = {r["name"]: r["roomType"] for r in db.accommodations}
    assert rooms == {"Cozy room near downtown": "private_room", "Entire loft by the river": "entire_room",
                     "Shared bunk in the Loop": "shared_room"}
    assert db.lookup("lino's")[0] == "restaurants"
    assert TravelDB.categories("restaurants", db.lookup("Taco Bell")[1]) == ["Mexican", "Fast Food"]
    assert db.events == []


def test_travelplanner_bad_row_names_file_record_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"Restaurants in X": [{"Name": "A", "Average Cost": "cheap", "Cuisines": "Thai",
                                                     "Aggregate Rating": 4, "City": "X"}]}) + "\n")
    with pytest.raises(ConvsimError) as e:
        load_travelplanner_ref_info(bad)
    assert e.value.file == str(bad) and e.value.field == "Average Cost" and "line 1" in str(e.value.record)
    bad.write_text(json.dumps({"Accommodations in X": [{"NAME": "B", "price": 1, "room type": "Castle",
                                                        "maximum occupancy": 2, "review rate number": 3}]}) + "\n")
    with pytest.raises(ConvsimError, match="room type"):
        load_travelplanner_ref_info(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ConvsimError, match="not valid JSON"):
        load_travelplanner_ref_info(bad)


@pytest.mark.parametrize("kind,index,field,value", [
    ("accommodations", 3, "roomType", "castle"),
    ("restaurants", 5, "avg_cost", "cheap"),
    ("events", 0, "dateTitle", "2026-06-01"),
    ("attractions", 2, "subcategories", None),
])
def test_malformed_db_record_names_file_record_field(tmp_path, kind, index, field, value):
    for f in PROJECT_TRAVEL_DIR.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    rows = json.loads((tmp_path / f"{kind}.json").read_text())
    if value is None:
        del rows[index][field]
    else:
        rows[index][field] = value
    (tmp_path / f"{kind}.json").write_text(json.dumps(rows))
    with pytest.raises(ConvsimError) as e:
        load_travel_db(str(tmp_path))
    assert e.value.file.endswith(f"{kind}.json")
    assert e.value.record == rows[index]["name"] and e.value.field == field
