"""Dialogue CSV export and evaluation (the metric definitions' columns), and errors on malformed CSVs."""

import csv
from pathlib import Path

import pytest

from convsim import ConvsimError
from convsim.evaluation.group.dialogue_csv import COLUMNS, evaluate_group_csv, export_group_csv, read_group_csv

DATA = Path(__file__).parent / "data" / "group"
EXTERNAL = DATA / "external_C3_dialogue.csv"


def test_external_csv_metrics_by_hand():
    out = evaluate_group_csv(EXTERNAL)
    m = out["metrics"]
    assert out["flags"] == {"multi_user": True, "enable_synthesis": True, "use_social_theory": False,
                            "enable_feedback": False, "member_count": 2}   # C3 from the file name
    assert m["M1"] == 1.0
    # divergent (lexical): cuisine and attraction; lodging token sets differ too ("smoking")
    # only cuisine's text says "different": recall 1/3 (the spec's M2), precision 1, M2 = F1 =
    # 2 TP / (2 TP + FP + FN) = 2 / (2 + 0 + 2)
    assert m["M2_recall"] == pytest.approx(1 / 3) and m["M2_precision"] == 1.0
    assert m["M2"] == pytest.approx(0.5)
    assert m["M2_false_alarm"] is None and m["M2_agreeing_slots"] == 0   # no slot where both agree
    assert m["M4"] == 0.0 and m["M5"] == 0.0 and m["M6"] == 1.0
    assert m["M9"] == 1.0
    # Ann: Italian (yes), Museum (yes), private room (yes); Bo: Mexican (yes), Zoo (no), private (yes)
    assert m["M10"] == pytest.approx(5 / 6) and m["W1"] == pytest.approx(5 / 6)
    assert m["W2"] == pytest.approx(2 / 3) and m["M11"] == 0.5
    assert m["M16"] == 1.0
    # M8_placed, M8's word rule on the placed items' records: Ann's Italian (Roma House) and both
    # private rooms (Oak Loft) yes; Bo's "Mexican tacos" (1 of 2 words: the record says "Taco
    # Corner"), Ann's "museums, especially a Museum of history" (1 of 4) and Bo's "see the Zoo" no
    assert m["M8_placed"] == pytest.approx(3 / 6)
    assert out["settings"]["embedder"].startswith("tfidf") and out["settings"]["thresholds"]["M10"] == 0.42


def test_export_then_evaluate_round_trip(tmp_path):
    from convsim.graphs.group_planning import Context, Params, graph, sessions
    from convsim import stable_seed
    p = Params(condition="C5", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=3))))
    state = graph.invoke(s, context=Context(params=p, seed=stable_seed(3, s["session_id"]), session_id=s["session_id"]))
    path = export_group_csv(state, tmp_path / "session.csv")
    with path.open() as fh:
        assert tuple(csv.DictReader(fh).fieldnames) == COLUMNS
    out = evaluate_group_csv(path)
    for k, v in out["metrics"].items():
        assert state["dialogue_metrics"][k] == v, k


def _rewrite(tmp_path, name, edit):
    with EXTERNAL.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    edit(rows)
    out = tmp_path / name
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def test_bad_json_cell_names_the_line(tmp_path):
    def edit(rows):
        rows[9]["plan"] = '{"days": ['          # the sys_present_plan row: line 11 of the file
    with pytest.raises(ConvsimError) as e:
        evaluate_group_csv(_rewrite(tmp_path, "bad.csv", edit))
    assert (e.value.record, e.value.field) == ("line 11", "plan")

    def edit_state(rows):
        rows[2]["constraint_state"] = "{cuisine: Italian}"
    with pytest.raises(ConvsimError) as e:
        evaluate_group_csv(_rewrite(tmp_path, "bad2.csv", edit_state))
    assert (e.value.record, e.value.field) == ("line 4", "constraint_state")


def test_bad_plan_json_and_missing_column(tmp_path):
    bad = tmp_path / "bad_plan.csv"
    bad.write_text("speaker,intent,utterance,plan\nA,user_provide_cuisine,Thai,\nsystem,sys_present_plan,x,{oops\n")
    with pytest.raises(ConvsimError) as e:
        read_group_csv(bad)
    assert (e.value.record, e.value.field) == ("line 3", "plan")
    missing = tmp_path / "missing.csv"
    missing.write_text("speaker,utterance\nA,hi\n")
    with pytest.raises(ConvsimError, match="missing column"):
        read_group_csv(missing)
    empty = tmp_path / "empty.csv"
    empty.write_text("speaker,intent,utterance\n")
    with pytest.raises(ConvsimError, match="no rows"):
        read_group_csv(empty)


def test_bad_ref_info_record_names_the_field(tmp_path):
    # spec 002 defines no room-type values: one it does not name is kept as written (issue 36);
    # a field of the wrong type is still bad input naming the record and the field
    def castle(rows):
        rows[0]["ref_info_accommodations"] = rows[0]["ref_info_accommodations"].replace("private_room", "castle")
    assert evaluate_group_csv(_rewrite(tmp_path, "C3_castle.csv", castle))["metrics"]
    def edit(rows):
        rows[0]["ref_info_accommodations"] = rows[0]["ref_info_accommodations"].replace('"private_room"', "7")
    with pytest.raises(ConvsimError) as e:
        evaluate_group_csv(_rewrite(tmp_path, "C3_bad_ref.csv", edit))
    assert e.value.field == "ref_info_accommodations.roomType" and e.value.record == "Oak Loft"


SPEC_FORMAT = DATA / "c4_spec_format.csv"          # the spec's columns + metadata columns, literal plan keys
PROJECT_FORMAT = DATA / "c4_project_format.csv"    # the same session in the project's own export
COLUMNS_ONLY = DATA / "spec_columns_only_C4.csv"   # the spec's columns only: flags from the file name


def test_spec_format_round_trips_to_the_project_csv_metrics(capsys):
    with SPEC_FORMAT.open() as fh:
        header = csv.DictReader(fh).fieldnames
    assert "meta" not in header and {"speaker", "intent", "utterance", "constraint_state", "plan"} <= set(header)
    assert '"meals"' in SPEC_FORMAT.read_text() and '"poi_list"' in SPEC_FORMAT.read_text()
    spec, own = evaluate_group_csv(SPEC_FORMAT), evaluate_group_csv(PROJECT_FORMAT)
    assert spec["flags"] == own["flags"] and spec["metrics"] == own["metrics"]
    assert spec["metrics"]["M4"] == 1.0 and spec["metrics"]["M16"] == 1.0
    assert spec["warnings"] == [] and capsys.readouterr().err == ""


def test_spec_columns_only_warn_once_and_keep_what_the_text_shows(capsys):
    out = evaluate_group_csv(COLUMNS_ONLY)
    # the warning is returned (the API prints nothing; `convsim eval` prints it as one stderr line)
    assert capsys.readouterr().err == ""
    assert len(out["warnings"]) == 1 and "taken from C4 in the file name" in out["warnings"][0]
    from typer.testing import CliRunner

    from convsim.cli import app
    result = CliRunner().invoke(app, ["eval", str(COLUMNS_ONLY)])
    lines = [x for x in result.output.splitlines() if x.startswith("warning: ")]
    assert result.exit_code == 0 and len(lines) == 1 and "taken from C4 in the file name" in lines[0]
    assert out["flags"]["use_social_theory"] is True
    own = evaluate_group_csv(PROJECT_FORMAT)["metrics"]
    # the "Strategy: …" line and the plan's literal keys carry M4, M16 and W2 without metadata
    for k in ("M1", "M2", "M4", "M9", "M10", "M16", "W1", "W2", "W3"):
        assert out["metrics"][k] == own[k], k


def test_flag_columns_are_read_as_written(tmp_path):
    path = tmp_path / "dialogue.csv"   # no condition in the name: flags come from the columns
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["speaker", "intent", "utterance", "multi_user", "enable_synthesis", "use_social_theory",
                    "enable_feedback", "member_count"])
        w.writerow(["system", "sys_greet", "Hello", "True", "False", "false", "0", "3"])
        w.writerow(["A", "user_provide_cuisine", "I want Thai food", "", "", "", "", ""])
    data = read_group_csv(path)
    assert data["flags"] == {"multi_user": True, "enable_synthesis": False, "use_social_theory": False,
                             "enable_feedback": False, "member_count": 3}
    assert data["warnings"] == [f"{path}: no plan"]


def test_literal_plan_keys_and_missing_keys_warn(tmp_path):
    from convsim.evaluation.group.plan_parse import normalize_plan
    plan, notes = normalize_plan({"days": [{"meals": ["Bean Cafe, X", "Roma House, X", "Taco Corner, X"],
                                            "attractions": [{"name": "City Museum", "city": "X"}]}]})
    day = plan["days"][0]
    assert (day["breakfast"], day["lunch"], day["dinner"]) == ("Bean Cafe, X", "Roma House, X", "Taco Corner, X")
    assert day["attraction"] == "City Museum, X;"
    assert notes == ["meals given as a list: read in the order breakfast, lunch, dinner",
                     "plan days lack accommodations, events, poi_list (taken as empty)"]


def test_convsim_eval_cli_gives_the_same_metrics_for_both_formats():
    import json
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    outs = []
    for f in (SPEC_FORMAT, PROJECT_FORMAT, COLUMNS_ONLY):
        res = subprocess.run([sys.executable, "-m", "convsim", "eval", str(f)], capture_output=True, text=True,
                             env=env, cwd=root, check=True)
        outs.append((json.loads(res.stdout), res.stderr))
    assert outs[0][0]["metrics"] == outs[1][0]["metrics"] and "warning:" not in outs[0][1]
    assert sum(line.startswith("warning: ") for line in outs[2][1].splitlines()) == 1
