"""Database, schema, normaliser and replay readers of the customer-service area."""
import json
from pathlib import Path

import pytest

from convsim.catalog.service.multiwoz import load_dialogues
from convsim.catalog.service.db import PROJECT_DB_DIR, load_service_db, load_service_schema
from convsim.catalog.service.normalize import normalize_slot_name, normalize_value
from convsim import ConvsimError

SHARED = Path(__file__).parents[1].parent / "shared" / "data" / "multiwoz"
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/multiwoz is absent")


def test_project_db_sizes_and_schema():
    db = load_service_db()
    sizes = {d: len(r) for d, r in db.records.items()}
    assert all(sizes[d] >= 60 for d in ("restaurant", "hotel", "attraction")) and sizes["train"] >= 300
    schema = load_service_schema()
    assert schema.booking_required["hotel"] == ("name", "bookday", "bookpeople", "bookstay")
    assert schema.booking_required["restaurant"] == ("name", "bookday", "bookpeople", "booktime")
    assert "attraction" not in schema.booking_required


def test_generator_is_seeded(tmp_path):
    from convsim.catalog.data.service.generate import generate
    assert generate(2024)["hotel_db.json"] == generate(2024)["hotel_db.json"]
    shipped = json.loads((PROJECT_DB_DIR / "restaurant_db.json").read_text())
    assert shipped == json.loads(json.dumps(generate(2024)["restaurant_db.json"]))


@needs_shared
def test_real_db_same_api():
    db = load_service_db(str(SHARED / "db"))
    assert len(db.records["train"]) == 2828
    assert db.find_entity("hotel", "cambridge belfry")["name"] == "the cambridge belfry"
    hits = db.query("train", {"departure": "cambridge", "destination": "ely", "day": "wednesday", "arriveby": "11:30"})
    assert hits and all(r["arriveby"] <= "11:30" for r in hits)
    assert load_service_schema(str(SHARED / "schema.json")).booking_required["train"][-1] == "bookpeople"


def test_db_record_missing_field_names_file_and_record(tmp_path):
    for f in ("restaurant", "hotel", "attraction", "train"):
        (tmp_path / f"{f}_db.json").write_text((PROJECT_DB_DIR / f"{f}_db.json").read_text())
    hotels = json.loads((tmp_path / "hotel_db.json").read_text())
    del hotels[3]["area"]
    (tmp_path / "hotel_db.json").write_text(json.dumps(hotels))
    with pytest.raises(ConvsimError) as err:
        load_service_db(str(tmp_path))
    assert err.value.file.endswith("hotel_db.json") and "index 3" in str(err.value.record)
    assert err.value.field == "area"


def test_normalisation_rules():
    assert normalize_slot_name("price range") == "pricerange" and normalize_slot_name("arriveBy") == "arriveby"
    assert normalize_value("leaveat", "after 5:30 pm") == "17:30"
    assert normalize_value("arriveby", "1730") == "17:30"
    assert normalize_value("parking", "free") == "yes"
    assert normalize_value("type", "guest house") == "guesthouse"
    assert normalize_value("food", "sea food") == "seafood"
    assert normalize_value("name", "Nando's") == "nandos"
    assert normalize_value("area", "not mentioned") is None
    assert normalize_value("area", "don't care") == "dontcare"


@needs_shared
def test_replay_unified_shared_dialogues():
    dialogues = load_dialogues(SHARED / "dialogues_unified_sample.json")
    assert len(dialogues) == 5 and all(d["format"] == "unified" for d in dialogues)
    first = dialogues[0]["turns"]
    assert first[0]["gold_state"] == {"hotel-pricerange": ["cheap"], "hotel-type": ["hotel"]}
    assert first[2]["gold_intent"] == "book_hotel"
    assert first[2]["gold_act_types"] == ["Hotel-Nobook", "Hotel-Request"]


def write_multiwoz22(folder: Path) -> Path:
    dialogues = [{"dialogue_id": "PMUL0001.json", "services": ["restaurant"], "turns": [
        {"turn_id": "0", "speaker": "USER", "utterance": "I want a cheap restaurant in the centre.",
         "frames": [{"service": "restaurant", "slots": [], "state": {
             "active_intent": "find_restaurant", "requested_slots": [],
             "slot_values": {"restaurant-pricerange": ["cheap"], "restaurant-area": ["centre"]}}}]},
        {"turn_id": "1", "speaker": "SYSTEM", "utterance": "How about pizza hut city centre?", "frames": []},
        {"turn_id": "2", "speaker": "USER", "utterance": "Book it for 2 people at 8pm on friday.",
         "frames": [{"service": "restaurant", "slots": [], "state": {
             "active_intent": "book_restaurant", "requested_slots": [],
             "slot_values": {"restaurant-pricerange": ["cheap"], "restaurant-area": ["centre"],
                             "restaurant-bookpeople": ["2"], "restaurant-booktime": ["8pm", "20:00"],
                             "restaurant-bookday": ["friday"]}}}]},
        {"turn_id": "3", "speaker": "SYSTEM", "utterance": "Booked, reference ABC.", "frames": []}]}]
    acts = {"PMUL0001.json": {
        "0": {"dialog_act": {"Restaurant-Inform": [["pricerange", "cheap"], ["area", "centre"]]}, "span_info": []},
        "1": {"dialog_act": {"Restaurant-Recommend": [["name", "pizza hut city centre"]]}, "span_info": []},
        "2": {"dialog_act": {"Restaurant-Inform": [["bookpeople", "2"]]}, "span_info": []},
        "3": {"dialog_act": {"Booking-Book": [["ref", "ABC"]], "general-reqmore": [["none", "none"]]},
              "span_info": []}}}
    (folder / "test").mkdir()
    path = folder / "test" / "dialogues_001.json"
    path.write_text(json.dumps(dialogues))
    (folder / "dialog_acts.json").write_text(json.dumps(acts))
    return path


def test_replay_multiwoz22_fixture(tmp_path):
    path = write_multiwoz22(tmp_path)
    (d,) = load_dialogues(path)
    assert d["format"] == "multiwoz22" and len(d["turns"]) == 2
    t0, t1 = d["turns"]
    assert (t0["gold_domain"], t0["gold_intent"]) == ("restaurant", "find_restaurant")
    assert t0["gold_act_types"] == ["Restaurant-Inform"]            # Recommend -> Inform
    assert t1["gold_intent"] == "book_restaurant"
    assert t1["gold_state"]["restaurant-booktime"] == ["20:00", "20:00"]
    assert t1["gold_act_types"] == ["General-Reqmore", "Restaurant-Book"]
    assert load_dialogues(tmp_path / "test")[0]["dialogue_id"] == "PMUL0001.json"


def test_malformed_dialogue_file_names_file_and_record(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"dialogue_id": "d1", "domains": ["hotel"],
                                "turns": [{"speaker": "user", "utt_idx": 0}]}]))
    with pytest.raises(ConvsimError) as err:
        load_dialogues(bad)
    assert err.value.file.endswith("bad.json") and err.value.record == "d1"
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(ConvsimError, match="not valid JSON"):
        load_dialogues(tmp_path / "broken.json")


def test_unknown_domain_names_file_and_record(tmp_path):
    bad = tmp_path / "unknown.json"
    bad.write_text(json.dumps([{"dialogue_id": "d7", "domains": ["spaceport"], "turns": [
        {"speaker": "user", "utterance": "hi", "utt_idx": 0, "dialogue_acts": {}, "state": {}}]}]))
    with pytest.raises(ConvsimError, match="unknown domain 'spaceport'") as err:
        load_dialogues(bad)
    assert err.value.record == "d7" and err.value.file.endswith("unknown.json")


@pytest.mark.parametrize("speaker", [5, "martian", "user"])
def test_a_system_turn_spoken_by_someone_else_names_the_turn(tmp_path, speaker):
    # before: only the user turns' speaker was checked; a reply by 5 or "martian" was replayed as the system's
    bad = tmp_path / "speaker.json"
    bad.write_text(json.dumps([{"dialogue_id": "d3", "domains": ["hotel"], "turns": [
        {"speaker": "user", "utterance": "I need a hotel.", "utt_idx": 0, "dialogue_acts": {}, "state": {}},
        {"speaker": speaker, "utterance": "Which area?", "utt_idx": 1, "dialogue_acts": {}}]}]))
    with pytest.raises(ConvsimError, match="should be spoken by the system") as err:
        load_dialogues(bad)
    assert (err.value.record, err.value.field) == ("d3", "turns[1].speaker")


def test_a_dialog_acts_file_that_is_not_an_object_is_refused(tmp_path):
    # before: a dialog_acts.json holding a list was read as "no acts" for every dialogue
    path = write_multiwoz22(tmp_path)
    (path.parent / "dialog_acts.json").write_text("[]")
    with pytest.raises(ConvsimError, match="JSON object keyed by dialogue id") as err:
        load_dialogues(path)
    assert err.value.file.endswith("dialog_acts.json")
