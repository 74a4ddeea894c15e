"""Bad data files (a dialogue CSV, a customer-service schema, a travel database, a course test set
or catalog, session ids taken from a data file): one line naming the file, the record and the field,
exit 2, no traceback, and nothing written (the checks run in preflight, before the run directory).
Before, each of these printed a traceback, was scored silently, failed every session mid-run, or
named the graph instead of the file after writing config.yaml, results.jsonl and traces/."""
import copy
import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convsim.catalog.courses import (DEFAULT_CATALOG, DEFAULT_TEST_SET, check_gold_codes, load_courses,
                             parse_test_set)
from convsim.catalog.service.db import PROJECT_DB_DIR, load_service_schema
from convsim.catalog.travel import PROJECT_TRAVEL_DIR, load_travel_db
from convsim import ConvsimError
from convsim.cli import app
from convsim.evaluation.group.dialogue_csv import read_group_csv

ROOT = Path(__file__).resolve().parents[1]
GROUP_CSV = ROOT / "tests" / "data" / "group" / "c4_project_format.csv"
RUN = ["--sessions", "1", "--quiet", "--no-analysis"]


def cli(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], terminal_width=400)
    return result.exit_code, result.output, result.exception


def one_line(args, *words):
    exit_code, out, exc = cli(*args)
    assert exit_code == 2, (out, exc)
    assert "Traceback" not in out and not (exc and not isinstance(exc, SystemExit)), (out, exc)
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), out
    return lines[0]


def _raises(fn, *, file, record, field):
    with pytest.raises(ConvsimError) as err:
        fn()
    e = err.value
    assert (str(e.file), e.record, e.field) == (str(file), record, field), str(e)
    return e


# 1. group-planning dialogue CSV: member_count ------------------------------------------------------

def _csv_with_member_count(tmp_path: Path, value, name="d.csv") -> Path:
    with GROUP_CSV.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    meta = json.loads(rows[0]["meta"])
    meta["member_count"] = value
    rows[0]["meta"] = json.dumps(meta)
    out = tmp_path / name
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


@pytest.mark.parametrize("value", ["four", {"n": 4}, [4], -3, 0, 2.5, True])
def test_group_csv_member_count_that_is_not_a_positive_integer(tmp_path, value):
    path = _csv_with_member_count(tmp_path, value)
    _raises(lambda: read_group_csv(path), file=path, record="line 2", field="meta.member_count")


def test_group_csv_member_count_bad_through_eval_is_one_line(tmp_path):
    path = _csv_with_member_count(tmp_path, "four")
    one_line(["eval", path], str(path), "record line 2", "field meta.member_count", "positive integer")


@pytest.mark.parametrize("value", [4, 4.0, "4", None, ""])
def test_group_csv_member_count_accepted_forms(tmp_path, value):
    flags = read_group_csv(_csv_with_member_count(tmp_path, value))["flags"]
    assert flags["member_count"] == 4  # the fixture has four speakers, so the assumed count is 4 too


# 2. customer-service schema and dialog_acts_path ---------------------------------------------------

def _schema(tmp_path: Path, edit) -> Path:
    services = json.loads((PROJECT_DB_DIR / "schema.json").read_text(encoding="utf-8"))
    edit(services)
    out = tmp_path / "schema.json"
    out.write_text(json.dumps(services), encoding="utf-8")
    return out


SCHEMA_CASES = {
    "slots_not_a_list": (lambda s: s[1].__setitem__("slots", 5), "hotel (index 1)", "slots"),
    "slot_without_name": (lambda s: s[0]["slots"][1].pop("name"), "restaurant (index 0)", "slots[1].name"),
    "slot_name_without_dash": (lambda s: s[0]["slots"][1].__setitem__("name", "area"), "restaurant (index 0)",
                               "slots[1].name"),
    "slot_not_an_object": (lambda s: s[0]["slots"].__setitem__(0, "restaurant-area"), "restaurant (index 0)",
                           "slots[0]"),
    "intent_is_an_int": (lambda s: s[2]["intents"].__setitem__(0, 7), "attraction (index 2)", "intents[0]"),
    "possible_values_ints": (lambda s: s[0]["slots"][0].__setitem__("possible_values", [1, 2]),
                             "restaurant (index 0)", "slots[0].possible_values"),
    "possible_values_a_string": (lambda s: s[0]["slots"][0].__setitem__("possible_values", "cheap"),
                                 "restaurant (index 0)", "slots[0].possible_values"),
    "required_slot_without_dash": (lambda s: s[0]["intents"][1].__setitem__("required_slots", ["bookday"]),
                                   "restaurant (index 0)", "intents[1].required_slots[0]"),
    "service_name_not_a_string": (lambda s: s[3].__setitem__("service_name", 3), 3, "service_name"),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_CASES))
def test_service_schema_malformed_service_names_file_service_and_field(tmp_path, case):
    edit, record, field = SCHEMA_CASES[case]
    path = _schema(tmp_path, edit)
    _raises(lambda: load_service_schema(str(path)), file=path, record=record, field=field)


def test_service_schema_bad_in_a_run_is_one_line_and_writes_nothing(tmp_path):
    path = _schema(tmp_path, SCHEMA_CASES["slot_without_name"][0])
    out = tmp_path / "runs"
    one_line(["run", "customer_service", *RUN, "--out", out, "--set", f"schema_path={path}"],
             str(path), "record restaurant (index 0)", "field slots[1].name")
    assert not out.exists()


def test_service_schema_project_and_valid_file_still_load():
    schema = load_service_schema(None)
    assert schema.booking_required["restaurant"] == ("name", "bookday", "bookpeople", "booktime")
    assert schema.categorical["restaurant"]["pricerange"] == ("cheap", "moderate", "expensive")


@pytest.mark.parametrize("mode", ["simulate", "replay"])
def test_missing_dialog_acts_path_is_refused_in_preflight(tmp_path, mode):
    out, missing = tmp_path / "runs", tmp_path / "nonexist.json"
    dialogues = tmp_path / "d.json"  # never read: the preflight hook stops first
    dialogues.write_text("[]", encoding="utf-8")
    one_line(["run", "customer_service", *RUN, "--out", out, "--set", f"mode={mode}",
              "--set", f"dialogues_path={dialogues}", "--set", f"dialog_acts_path={missing}"],
             str(missing), "field params.dialog_acts_path")
    assert not out.exists()


# 3. group-planning travel database: optional numeric fields ----------------------------------------

def _travel_db(tmp_path: Path, kind: str, field: str, value) -> tuple[Path, str]:
    folder = tmp_path / "travel"
    shutil.copytree(PROJECT_TRAVEL_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    rows = json.loads((folder / f"{kind}.json").read_text(encoding="utf-8"))
    rows[1][field] = value
    (folder / f"{kind}.json").write_text(json.dumps(rows), encoding="utf-8")
    return folder, rows[1]["name"]


@pytest.mark.parametrize("kind,field,value", [
    ("attractions", "visit_duration", "long"), ("attractions", "visit_duration", 0),
    ("attractions", "visit_duration", -1.5), ("attractions", "visit_duration", None),
    ("attractions", "visit_duration", float("inf")), ("attractions", "rating", "good"),
    ("events", "rating", [5]), ("restaurants", "rating", float("nan")),
])
def test_travel_db_bad_numeric_field(tmp_path, kind, field, value):
    folder, name = _travel_db(tmp_path, kind, field, value)
    _raises(lambda: load_travel_db(str(folder)), file=folder / f"{kind}.json", record=name, field=field)


def test_travel_db_bad_visit_duration_stops_the_run_in_preflight(tmp_path):
    folder, name = _travel_db(tmp_path, "attractions", "visit_duration", "long")
    out = tmp_path / "runs"
    one_line(["run", "group_planning", *RUN, "--out", out, "--set", "n_days=1", "--set", f"db_path={folder}"],
             str(folder / "attractions.json"), f"record {name}", "field visit_duration")
    assert not out.exists()


def test_travel_db_numeric_optional_fields_accepted(tmp_path):
    folder, _ = _travel_db(tmp_path, "attractions", "rating", 4)
    assert load_travel_db(str(folder)).attractions[1]["rating"] == 4


# 4. course-retrieval test set and catalog ----------------------------------------------------------

def _test_set(tmp_path: Path, edit, name="set.json") -> Path:
    data = json.loads(DEFAULT_TEST_SET.read_text(encoding="utf-8"))
    data["cases"] = data["cases"][:3]
    edit(data["cases"])
    out = tmp_path / name
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def test_gold_label_for_a_course_not_in_the_catalog_stops_the_run(tmp_path):
    path = _test_set(tmp_path, lambda cases: cases[1].__setitem__("goldRelevance", {"NOPE999": 3}))
    case_id = json.loads(path.read_text())["cases"][1]["id"]
    out = tmp_path / "runs"
    one_line(["run", "course_retrieval", *RUN, "--out", out, "--set", f"test_set={path}"],
             str(path), f"record {case_id}", "field goldRelevance.NOPE999", "not in the catalog")
    assert not out.exists()


def test_gold_label_of_a_given_list_course_outside_the_catalog_is_accepted():
    course = {"subjectCode": "EXT100", "subjectName": "External course", "cleanedLearningOutcomes": ["x"]}
    data = {"version": 1, "name": "t", "cases": [
        {"id": "g1", "question": "q?", "skill": "s", "retrievedCourses": [course], "goldRelevance": {"EXT100": 3}}]}
    ts = parse_test_set(data, file="t.json")
    check_gold_codes(ts, load_courses())  # EXT100 is the case's own course
    data["cases"][0]["goldRelevance"] = {"NOPE999": 2}
    ts = parse_test_set(data, file="t.json")
    _raises(lambda: check_gold_codes(ts, load_courses()), file="t.json", record="g1", field="goldRelevance.NOPE999")


def test_empty_gold_relevance_is_refused(tmp_path):
    path = _test_set(tmp_path, lambda cases: cases[0].__setitem__("goldRelevance", {}))
    case_id = json.loads(path.read_text())["cases"][0]["id"]
    data = json.loads(path.read_text())
    _raises(lambda: parse_test_set(data, file=path), file=path, record=case_id, field="goldRelevance")


@pytest.mark.parametrize("field,value", [("credits", "four"), ("credits", 0), ("credits", True),
                                         ("level", 3), ("faculty", None)])
def test_catalog_course_with_a_bad_optional_field(tmp_path, field, value):
    data = json.loads(DEFAULT_CATALOG.read_text(encoding="utf-8"))
    courses = data["courses"] if isinstance(data, dict) else data
    courses[2][field] = value
    path = tmp_path / f"courses-{field}-{value!s}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    _raises(lambda: load_courses(path), file=path.resolve(), record=courses[2]["subjectCode"], field=field)


# 5. session ids taken from a data file -------------------------------------------------------------

def test_bad_case_id_names_the_test_set_and_writes_nothing(tmp_path):
    path = _test_set(tmp_path, lambda cases: cases[1].__setitem__("id", "a/b"))
    out = tmp_path / "runs"
    one_line(["run", "course_retrieval", *RUN, "--out", out, "--set", f"test_set={path}"],
             str(path), "record 'a/b' (#1)", "field id", "one path component")
    assert not out.exists()


def test_bad_dialogue_id_names_the_dialogue_file_and_writes_nothing(tmp_path, shared_data):
    sample = json.loads((shared_data / "multiwoz" / "dialogues_unified_sample.json").read_text(encoding="utf-8"))
    items = copy.deepcopy(list(sample.values()) if isinstance(sample, dict) else sample)[:3]
    items[1]["dialogue_id"] = "../../etc"
    path = tmp_path / "dialogues.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    out = tmp_path / "runs"
    one_line(["run", "customer_service", "--quiet", "--no-analysis", "--out", out, "--set", "mode=replay",
              "--set", f"dialogues_path={path}"],
             str(path), "record '../../etc' (index 1)", "field dialogue_id", "one path component")
    assert not out.exists()
