"""Metric validity of the customer-service system, each metric against an injected defect:

* the reply text must state its action (response grounding): a system whose replies say nothing
  useful is no success, whatever its actions were, and its heuristic quality is capped;
* a simulated customer that misstates its own goal is a simulator failure, not the agent's score;
* intent, slot and joint-goal accuracy, system correctness, task completion and the act-type
  precision/recall each fall for an agent broken in the way they claim to measure.
"""
import json
from pathlib import Path

import pytest

import convsim
import convsim.graphs.customer_service as cs
from convsim.agents.service.fidelity import misstated_values
from convsim.agents.service.judge import heuristic_judge
from convsim.agents.service.paraphrase import realise
from convsim.agents.service.response import template_response
from convsim.catalog.service.db import load_service_db
from convsim import rng_for, stable_seed
from convsim.config import ExperimentConfig
from convsim.evaluation.service.response_grounding import response_grounding

SHARED = Path(__file__).parents[1].parent / "shared" / "data" / "multiwoz"
SILENT = "Sorry, I cannot help with that. Goodbye."
N = 12


def _run(n=N, params=None, **kw):
    p = params or cs.Params(n_sessions=n, judge=True, **kw)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
        state = cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                context=c, config={"recursion_limit": 10_000})
        out.append({**state, "session_id": init["session_id"], "status": "ok"})
    return out


def _mean(records, name):
    vals = [r["dialogue_metrics"][name] for r in records if r["dialogue_metrics"].get(name) is not None]
    return sum(vals) / len(vals)


def _pooled(records, name):
    vals = [t[name] for r in records for t in r["turn_metrics"] if t.get(name) is not None]
    return sum(vals) / len(vals), len(vals)


@pytest.fixture(scope="module")
def clean():
    return _run()


# --- response grounding (the reply text against its action) ---------------------------------------

def _actions(db):
    r, h, t = db.records["restaurant"][0], db.records["hotel"][0], db.records["train"][0]
    return {
        "search": {"kind": "search", "domain": "restaurant", "entity": r["name"], "informed": {"phone": r["phone"]},
                   "requested": [], "count": 3},
        "book": {"kind": "book", "domain": "hotel", "entity": h["name"], "reference": "AB12CD34",
                 "informed": {"ref": "AB12CD34"}, "booking": {"bookpeople": "2"}, "requested": []},
        "train": {"kind": "book", "domain": "train", "entity": t["trainid"], "reference": "ZZ99YY88",
                  "informed": {"ref": "ZZ99YY88", "price": t["price"]}, "booking": {"bookpeople": "1"},
                  "requested": []},
        "inform": {"kind": "inform", "domain": "restaurant", "entity": r["name"],
                   "informed": {"address": r["address"], "postcode": r["postcode"]}, "requested": []},
        "request": {"kind": "request", "domain": "hotel", "entity": None, "informed": {},
                    "requested": ["bookday", "bookpeople"]},
        "nooffer": {"kind": "nooffer", "domain": "hotel", "entity": None, "informed": {}, "requested": [], "count": 0},
    }


def test_template_replies_state_their_acts_and_a_silent_or_empty_reply_states_none():
    db = load_service_db()
    for name, action in _actions(db).items():
        good = response_grounding(template_response(action), action)
        assert good["score"] == 1.0 and good["ungrounded"] == 0, (name, good)
        for text in (SILENT, ""):
            bad = response_grounding(text, action)
            if name == "nooffer":  # "Sorry, I cannot ..." does say there is none
                continue
            assert bad["score"] == 0 and bad["ungrounded"] == 1, (name, text, bad)
    book = _actions(db)["book"]
    partial = response_grounding(f"Your booking at {book['entity']} is confirmed.", book)  # no reference
    assert partial["score"] == 0.5 and partial["ungrounded"] == 0
    assert [i["act"] for i in partial["items"] if not i["stated"]] == ["reference"]
    # an LLM's wording of the same facts is grounded: title case, spaced phone, "the" dropped
    search = _actions(db)["search"]
    name = search["entity"].removeprefix("the ").title()
    phone = search["informed"]["phone"]
    said = f"How about {name}? You can call them on {phone[:5]} {phone[5:]}."
    assert response_grounding(said, search)["score"] == 1.0
    for kind in ("bye", "welcome", "unsupported"):
        assert response_grounding(SILENT, {"kind": kind})["score"] is None


def test_heuristic_judge_caps_a_reply_that_states_none_of_its_acts():
    base = dict(requested=[], informed={}, grounded=True, compliant=True, action_ok=True)
    assert heuristic_judge(response="Your booking at x is confirmed, reference AB12CD34.", **base)["score"] == 5
    assert heuristic_judge(response=SILENT, **base, text_ungrounded=True)["score"] == 2
    assert heuristic_judge(response="Booked.", **base, unstated=["reference"])["score"] == 4


def test_silent_replies_are_no_task_success_and_score_low_quality(clean, monkeypatch):
    # an audit: replies of "Sorry, I cannot help with that. Goodbye." scored task success 0.933 and
    # heuristic quality 4.96, exactly the templates' figures (the simulator reads the action)
    monkeypatch.setattr(cs, "template_response", lambda action: SILENT)
    silent = _run()
    ok, _ = _pooled(clean, "response_grounding")
    assert ok == 1.0 and _mean(clean, "task_success") == _mean(clean, "task_success_structured") > 0.5
    assert _mean(silent, "task_success") == 0 and _mean(silent, "task_completion") == 0
    assert _mean(silent, "task_success_structured") == _mean(clean, "task_success")  # the actions were right
    assert _mean(silent, "response_grounding") < 0.1
    capped = [t["heuristic_response_quality"] for r in silent for t in r["turn_metrics"]
              if t.get("response_ungrounded") == 1]
    assert capped and max(capped) <= 2
    assert _mean(silent, "heuristic_response_quality") < _mean(clean, "heuristic_response_quality") - 1.5
    # an empty reply as well (before it lost 1 point only: 3.96)
    monkeypatch.setattr(cs, "template_response", lambda action: "")
    mute = _run(n=6)
    assert _mean(mute, "task_success") == 0 and _mean(mute, "heuristic_response_quality") < 3


def test_a_reply_that_drops_only_the_booking_reference_is_no_success(clean, monkeypatch):
    real = cs.template_response

    def no_reference(action):
        text = real(action)
        return text.replace(f" Your reference number is {action['reference']}", "") if action["kind"] == "book" else text
    monkeypatch.setattr(cs, "template_response", no_reference)
    records = _run()
    booked = [r for r in records if any(g.get("book") for g in r["goal"]["domains"])]
    assert booked and all(r["dialogue_metrics"]["task_success"] == 0 for r in booked)
    unbooked_clean = {r["session_id"]: r["dialogue_metrics"]["task_success"] for r in clean
                      if not any(g.get("book") for g in r["goal"]["domains"])}
    assert {r["session_id"]: r["dialogue_metrics"]["task_success"] for r in records
            if r["session_id"] in unbooked_clean} == unbooked_clean


# --- a simulated customer that misstates its goal ---------------------------------------------------

def test_misstated_values_compares_the_text_with_what_the_simulator_meant():
    db = load_service_db()
    out = {"gold_domain": "restaurant", "gold_state": {"restaurant-bookpeople": ["5"], "restaurant-bookday": ["friday"],
                                                       "restaurant-booktime": ["16:30"]},
           "user_acts": [{"intent": "inform", "domain": "restaurant", "slot": s}
                         for s in ("bookpeople", "bookday", "booktime")]}
    assert misstated_values("Please book it for 5 people on friday at 16:30.", out, db) == []
    assert misstated_values("Please book it for 3 people on friday at 16:30.", out, db) == \
        [{"slot": "bookpeople", "meant": "5", "said": "3"}]
    assert misstated_values("Book it for five people on friday at 16:30 please.", out, db) == []
    assert misstated_values("There will be 5 of us on friday for 16:30.", out, db) == []  # not "16 people"
    # a value the rules cannot read is not a misstatement, nor is a value said by negation
    hotel = {"gold_domain": "hotel", "gold_state": {"hotel-parking": ["no"], "hotel-area": ["north"]},
             "user_acts": [{"intent": "inform", "domain": "hotel", "slot": "parking"},
                           {"intent": "inform", "domain": "hotel", "slot": "area"}]}
    assert misstated_values("Somewhere up north; I won't have a car so parking is irrelevant.", hotel, db) == []
    assert misstated_values("A place in the south please, no parking needed.", hotel, db)[0]["said"] == "south"


def test_the_clean_simulator_never_misstates_in_either_wording():
    # the check parses with the rules: it must not charge their misreadings to the simulator
    for surface in ("templates", "heldout"):
        records = _run(n=30, params=cs.Params(n_sessions=30, judge=False, surface=surface, policy_request_rate=0.2))
        assert not [f for r in records for f in cs.simulator_checks(r) if f["check"] == "user_misstated"], surface
        assert all(r["dialogue_metrics"]["simulator_misstatements"] == 0 for r in records)
    # the held-out wording says every value it is given, misstating none
    db = load_service_db()
    book = {"gold_domain": "hotel", "user_acts": [{"intent": "inform", "domain": "hotel", "slot": s}
                                                  for s in ("bookpeople", "bookday", "bookstay")],
            "gold_state": {"hotel-bookpeople": ["3"], "hotel-bookday": ["friday"], "hotel-bookstay": ["2"]}}
    for seed in range(20):
        assert misstated_values(realise("book", book, {}, rng_for(seed, "t")), book, db) == []


def _read(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def test_a_simulator_that_misstates_the_party_size_is_a_simulator_failure(tmp_path, monkeypatch):
    # an audit: the simulated customer said party size 3 while its goal said 5; sessions stayed ok,
    # simulator_errors 0, and task success fell 0.933 -> 0.467, charged to the agent
    import convsim.agents.service.user_simulator as sim
    real = sim._say_booking

    def misstating(domain, values):
        v = dict(values)
        if "bookpeople" in v:
            v["bookpeople"] = str(int(v["bookpeople"]) % 8 + 1)
        return real(domain, v)
    cfg = dict(graph="customer_service", sessions=12, seed=7, trace=False, analysis=[], concurrency=1,
               params={"mode": "simulate", "max_turns": 20, "judge": False}, out_dir=str(tmp_path))
    clean = _read(convsim.run(ExperimentConfig(name="m", run_id="clean", **cfg), analyze=False))
    monkeypatch.setattr(sim, "_say_booking", misstating)
    run_dir = convsim.run(ExperimentConfig(name="m", run_id="misstating", **cfg), analyze=False)
    bad = _read(run_dir)
    assert all(r["status"] == "ok" for r in clean)
    failed = [r for r in bad if r["status"] == "simulator_failure"]
    assert failed and all(any(f["check"] == "user_misstated" for f in r["simulator_flags"]) for r in failed)
    assert "said bookpeople=" in failed[0]["simulator_flags"][0]["detail"]
    assert all(r["dialogue_metrics"]["simulator_misstatements"] > 0 for r in failed)
    # what is still scored is not charged with the simulator's error
    scored = [r for r in bad if r["status"] == "ok"]
    before = {r["session_id"]: r["dialogue_metrics"]["task_success"] for r in clean}
    assert scored and all(r["dialogue_metrics"]["task_success"] == before[r["session_id"]] for r in scored)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sum(v["status_counts"]["simulator_failure"] for v in summary["variants"].values()) == len(failed)


# --- defect injection: each metric falls for the defect it claims to measure ------------------------

def test_intent_accuracy_falls_for_a_triage_that_confuses_find_and_book(clean, monkeypatch):
    real = cs.rule_triage

    def confused(*args, **kwargs):
        t = real(*args, **kwargs)
        kind, _, domain = t["intent"].partition("_")
        swap = {"find": "book", "book": "find"}
        return {**t, "intent": f"{swap[kind]}_{domain}"} if kind in swap else t
    monkeypatch.setattr(cs, "rule_triage", confused)
    broken = _run()
    good, n = _pooled(clean, "intent_accuracy")
    bad, _ = _pooled(broken, "intent_accuracy")
    assert n >= 20 and good == 1.0 and bad < 0.3


def test_slot_accuracy_and_joint_goal_fall_for_a_triage_that_drops_a_slot(clean, monkeypatch):
    real = cs.rule_triage

    def forgetful(*args, **kwargs):
        t = real(*args, **kwargs)
        slots = dict(t["slots"])
        for slot in ("area", "day", "bookpeople"):  # one of them in most domains' turns
            slots.pop(slot, None)
        return {**t, "slots": slots}
    monkeypatch.setattr(cs, "rule_triage", forgetful)
    broken = _run()
    for name in ("slot_accuracy", "joint_goal_accuracy"):
        good, n = _pooled(clean, name)
        bad, _ = _pooled(broken, name)
        assert n >= 20 and bad < good - 0.2, (name, good, bad)


def test_system_correctness_falls_for_an_action_agent_that_searches_when_asked_for_facts(clean, monkeypatch):
    real = cs.decide_action

    def wrong(*args, **kwargs):
        act = real(*args, **kwargs)
        return {**act, "kind": "search", "acts": [a.replace("Request", "Inform") for a in act["acts"]]} \
            if act["kind"] in ("inform", "request") else act
    monkeypatch.setattr(cs, "decide_action", wrong)
    broken = _run()
    good, bad = _pooled(clean, "system_correct")[0], _pooled(broken, "system_correct")[0]
    assert bad < good - 0.1
    # the turns it got wrong are those the wrong action was taken on, not grounding or policy
    wrong_turns = [t for r in broken for t in r["turn_metrics"] if t["system_correct"] == 0]
    assert wrong_turns and all(t["actual_action"] != t["expected_action"] for t in wrong_turns)


def test_task_completion_falls_for_an_action_agent_that_never_books(clean, monkeypatch):
    real = cs.decide_action

    def never_books(*args, **kwargs):
        act = real(*args, **kwargs)
        if act["kind"] == "book":
            domain = act["domain"].capitalize()
            return {**act, "kind": "nobook", "reference": None, "informed": {}, "requested": ["bookday"],
                    "acts": [f"{domain}-Nobook", f"{domain}-Request"]}
        return act
    monkeypatch.setattr(cs, "decide_action", never_books)
    broken = _run()
    booking = {r["session_id"] for r in clean if any(g.get("book") for g in r["goal"]["domains"])}
    assert booking
    assert all(r["dialogue_metrics"]["task_completion"] == 0 for r in broken if r["session_id"] in booking)
    assert _mean(broken, "task_completion") < _mean(clean, "task_completion") - 0.2


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/multiwoz is absent")
def test_act_type_precision_and_recall_fall_for_missing_and_spurious_acts(monkeypatch):
    params = cs.Params(mode="replay", dialogues_path=str(SHARED / "dialogues_unified_sample.json"),
                       db_path=str(SHARED / "db"), schema_path=str(SHARED / "schema.json"), judge=False)
    clean = _run(params=params)
    real = cs.decide_action

    def acts_edit(edit):
        def decide(*args, **kwargs):
            act = real(*args, **kwargs)
            return {**act, "acts": edit(list(act["acts"]))}
        return decide
    monkeypatch.setattr(cs, "decide_action", acts_edit(lambda acts: acts[:1]))  # drops every act but the first
    dropped = _run(params=params)
    monkeypatch.setattr(cs, "decide_action", acts_edit(lambda acts: acts + ["General-Invented"]))  # one act too many
    spurious = _run(params=params)
    p0, n = _pooled(clean, "act_type_precision")
    r0, _ = _pooled(clean, "act_type_recall")
    assert n >= 10
    assert _pooled(dropped, "act_type_recall")[0] < r0 - 0.1
    assert _pooled(spurious, "act_type_precision")[0] < p0 and _pooled(spurious, "act_type_recall")[0] == r0
    assert _pooled(spurious, "act_type_accuracy")[0] < _pooled(clean, "act_type_accuracy")[0]
