"""Replays score what was annotated, on real dialogues nobody here wrote.

Before: WOZ 2.0 system turns carry no dialogue acts and the replay read the missing label as an
empty gold set (act-type accuracy 0.000 on all 40 turns; the last user turn of every dialogue,
with no system reply, scored against an empty set too); a MultiWOZ dialogue that ends without the
customer closing was a ``simulator_failure`` and left the agent's scores."""
import json
import re
from pathlib import Path

import pytest

from convsim.catalog.service.multiwoz import load_dialogues
from convsim.config import config_from_dict
from convsim.evaluation.service.replay_notes import CLOSING
from convsim.running.runner import run
from convsim.running.store import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WOZ = DATA / "woz2" / "dialogues.json"
MWOZ = DATA / "multiwoz" / "dialogues_unified_sample.json"
pytestmark = pytest.mark.skipif(not WOZ.exists() or not MWOZ.exists(), reason="shared data absent")


def _replay(tmp_path, dialogues: list[dict], run_id: str):
    path = tmp_path / f"{run_id}.json"
    path.write_text(json.dumps(dialogues), encoding="utf-8")
    cfg = config_from_dict({"graph": "customer_service", "sessions": len(dialogues), "out_dir": str(tmp_path),
                            "run_id": run_id, "trace": False, "analysis": [],
                            "params": {"mode": "replay", "dialogues_path": str(path)}})
    run_dir = run(cfg, analyze=False)
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]["default"]
    return {r["session_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}, summary


@pytest.fixture(scope="module")
def woz():
    return json.loads(WOZ.read_text(encoding="utf-8"))


def test_the_woz_reader_leaves_absent_acts_unknown_not_empty(woz):
    assert not any("dialogue_acts" in t for d in woz for t in d["turns"] if t["speaker"] == "system")
    dialogues = load_dialogues(WOZ)
    assert all(t["gold_act_types"] is None for d in dialogues for t in d["turns"])
    assert all(t["gold_state"] is not None for d in dialogues for t in d["turns"])  # user states are there
    sample = load_dialogues(MWOZ)  # MultiWOZ annotates every system turn: acts are read, possibly empty
    assert all(t["gold_act_types"] is not None for d in sample for t in d["turns"])


def test_woz_act_accuracy_is_none_with_the_count_and_state_is_still_scored(tmp_path, woz):
    dialogues = woz[:8]
    records, summary = _replay(tmp_path, dialogues, "woz")
    n_user = sum(t["speaker"] == "user" for d in dialogues for t in d["turns"])
    assert {r["status"] for r in records.values()} == {"ok"}
    for r in records.values():
        dm = r["dialogue_metrics"]
        assert dm["act_type_accuracy"] is None  # was 0.0: a missing label scored as a miss
        assert dm["act_labels_absent"] == dm["n_turns"] and dm["state_labels_absent"] == 0
        assert dm["joint_goal_accuracy"] is not None
        assert all(t["act_type_accuracy"] is None for t in r["turn_metrics"])
    data = summary["dataset"]
    assert data["act_labels_absent"] == data["annotations_turns"] == n_user
    assert f"act labels absent on {n_user} of {n_user} system turns" in data["annotation_notes"][0]
    assert "act_type_accuracy_micro" not in data  # no annotated turn: no pooled figure
    assert summary["metrics"].get("act_type_accuracy", {}).get("n", 0) == 0


def test_a_woz_recording_without_a_goodbye_is_replayed_as_recorded_and_scored(tmp_path, woz):
    unclosed = [d for d in woz if not CLOSING.search([t for t in d["turns"] if t["speaker"] == "user"][-1]["utterance"])]
    assert unclosed  # 111 of the 1,200
    records, _ = _replay(tmp_path, unclosed[:3], "open")
    for d in unclosed[:3]:
        r = records[d["dialogue_id"]]
        assert r["status"] == "ok" and not r["simulator_flags"]  # was simulator_failure
        dm = r["dialogue_metrics"]
        assert dm["replay_unclosed"] == 1 and dm["replay_played"] == dm["replay_recorded"] == dm["n_turns"]
        assert dm["joint_goal_accuracy"] is not None


def test_a_cut_multiwoz_dialogue_is_scored_and_its_last_user_turn_is_not_scored_against_nothing(tmp_path):
    sample = json.loads(MWOZ.read_text(encoding="utf-8"))
    full, cut = sample[0], json.loads(json.dumps(sample[0]))
    cut["dialogue_id"], cut["turns"] = "cut", cut["turns"][:-3]  # ends on a user turn, no goodbye
    assert not CLOSING.search(cut["turns"][-1]["utterance"])
    records, summary = _replay(tmp_path, [full, cut], "cut")
    r = records["cut"]
    assert r["status"] == "ok" and not r["simulator_flags"]
    assert r["dialogue_metrics"]["replay_unclosed"] == 1
    assert r["turn_metrics"][-1]["act_type_accuracy"] is None  # no system reply: no act gold
    assert r["dialogue_metrics"]["act_labels_absent"] == 1
    # the scores of the turns both recordings share are the same: the cut one is scored, not dropped
    shared = len(r["turn_metrics"]) - 1
    for name in ("act_type_accuracy", "joint_goal_accuracy", "slot_accuracy"):
        assert [t[name] for t in r["turn_metrics"][:shared]] == \
            [t[name] for t in records[full["dialogue_id"]]["turn_metrics"][:shared]]
    assert summary["scored"] == 2 and summary["status_counts"]["simulator_failure"] == 0


def test_a_multiwoz22_turn_without_frames_is_unknown_not_general(tmp_path):
    """MultiWOZ 2.2: a user turn without ``frames`` and a system turn the acts file does not list
    were read as domain general, no state and no acts, and scored (act accuracy 1.0)."""
    folder = tmp_path / "mw22"
    folder.mkdir()
    turns = [{"turn_id": "0", "speaker": "USER", "utterance": "I need a cheap hotel in the north."},
             {"turn_id": "1", "speaker": "SYSTEM", "utterance": "How about the Acorn Guest House?"}]
    (folder / "dialogues_001.json").write_text(json.dumps([{"dialogue_id": "X1.json", "services": ["hotel"],
                                                            "turns": turns}]))
    (folder / "dialog_acts.json").write_text(json.dumps({"X1.json": {"0": {"dialog_act": {}}}}))
    d = load_dialogues(folder)[0]["turns"][0]
    assert d["gold_state"] is None and d["gold_domain"] is None and d["gold_act_types"] is None
