"""The customer-service and group-planning simulator checks: each catches its injected defect, and
the shipped rule-based simulators (and real MultiWOZ replays) never trip them."""
import copy
import json

import pytest

from convsim.agents.group.fidelity import group_simulator_checks
from convsim.agents.service.fidelity import service_simulator_checks
from convsim import ExperimentConfig, run
from conftest import ROOT

SHARED = ROOT.parent / "shared" / "data" / "multiwoz"


def _records(cfg: ExperimentConfig):
    return [json.loads(x) for x in (run(cfg, analyze=False) / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def service_sim(tmp_path_factory):
    return _records(ExperimentConfig(name="s", graph="customer_service", sessions=40, seed=7, trace=False,
                                     analysis=[], params={"mode": "simulate", "n_sessions": 40, "max_turns": 20},
                                     out_dir=str(tmp_path_factory.mktemp("svc")), run_id="sim"))


def test_rule_based_service_users_are_clean(service_sim):
    assert len(service_sim) == 40 and all(r["simulator_flags"] == [] for r in service_sim)


@pytest.mark.parametrize("text, check", [
    ("I need a hotel with pricerange cheap and bookpeople 2.", "_check_goal_leak"),
    ("My goal is to book a train.", "_check_goal_leak"),
    ("Hello, how can I help you today?", "_check_agent_voice"),
    ("I have booked it, your reference number is 0042.", "_check_agent_voice"),
])
def test_each_service_check_catches_its_defect(service_sim, text, check):
    state = copy.deepcopy(service_sim[0])
    user_turns = [t for t in state["transcript"] if t["speaker"] == "user"]
    user_turns[-1]["text"] = text
    assert [f["check"] for f in service_simulator_checks(state)] == [check]


@pytest.mark.skipif(not (SHARED / "dialogues_unified_sample.json").exists(), reason="MultiWOZ sample not found")
def test_a_replay_that_ends_without_a_goodbye_is_scored_as_recorded(tmp_path):
    dialogues = json.loads((SHARED / "dialogues_unified_sample.json").read_text())
    full = dialogues[0]
    cut = copy.deepcopy(full)
    cut["dialogue_id"] += "-cut"
    cut["turns"] = cut["turns"][:4]  # user, system, user, system: the customer never closes
    path = tmp_path / "dialogues.json"
    path.write_text(json.dumps([full, cut]))
    recs = _records(ExperimentConfig(
        name="r", graph="customer_service", trace=False, analysis=[], out_dir=str(tmp_path), run_id="rep",
        params={"mode": "replay", "dialogues_path": str(path), "db_path": str(SHARED / "db"),
                "schema_path": str(SHARED / "schema.json")}))
    status = {r["session_id"]: (r["status"], [f["check"] for f in r["simulator_flags"]]) for r in recs}
    assert status[full["dialogue_id"]] == ("ok", [])
    # a recording is no simulator: it ends where it was cut, is scored, and the fact is a figure
    # (before: simulator_failure _check_replay_exhausted, out of the agent's scores)
    assert status[cut["dialogue_id"]] == ("ok", [])
    cut_rec = next(r for r in recs if r["session_id"] == cut["dialogue_id"])
    assert cut_rec["dialogue_metrics"]["replay_unclosed"] == 1


def test_group_member_checks():
    turn = {"speaker": "Ana", "text": "For lodging I'd prefer a private room, and visitors should be allowed.",
            "meta": {"slot": "lodging", "preference_option": "private_room", "preference_reject": None}}
    assert group_simulator_checks({"member_turns": [turn]}) == []
    wrong = dict(turn, text="For lodging I'd prefer a shared room.")
    assert group_simulator_checks({"member_turns": [wrong]})[0]["check"] == "_check_member_profile"
    food = {"speaker": "Bo", "text": "I want Seafood tonight.",
            "meta": {"slot": "cuisine", "preference_option": "Seafood", "preference_reject": "Seafood"}}
    assert "rejects" in group_simulator_checks({"member_turns": [food]})[0]["detail"]


def test_rule_based_group_members_are_clean(tmp_path):
    recs = _records(ExperimentConfig(name="g", graph="group_planning", sessions=4, seed=7, trace=False, analysis=[],
                                     params={"condition": "C4", "n_days": 2}, out_dir=str(tmp_path), run_id="g"))
    assert recs and all(r["status"] == "ok" and r["simulator_flags"] == [] for r in recs)
