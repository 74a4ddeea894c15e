"""Customer-service metrics against the mutations an independent review found surviving the suite
(each one line in the metric code), and against the gaming agents it wrote: a refusal the database
does not back, an invented venue in the reply, a restated value counted as a memory transfer,
``dontcare`` counted as one, one invalid judge answer dropping the whole dialogue.

Each test names the mutation it kills; the figures are computed by hand."""
import pytest

from convsim.catalog.service.db import booking_available, load_service_db
from convsim.evaluation.service import metrics as m
from convsim.evaluation.service.judge_flags import judge_invalid_flags
from convsim.evaluation.service.refusal import UNGROUNDED_REFUSAL, action_class_of, refusal_grounded
from convsim.evaluation.service.scoring import score_dataset, score_dialogue, score_turn
from convsim.evaluation.service.text_check import text_hallucination_turn, text_mentions

ACTION_CLASS = {"search": "search", "nooffer": "search", "book": "book", "nobook": "book", "request": "request",
                "inform": "inform", "bye": "close", "welcome": "close", "unsupported": "unsupported"}
BOOKING = {"bookday": "monday", "bookpeople": "2", "bookstay": "2"}


@pytest.fixture(scope="module")
def db():
    return load_service_db()


def _turn(**kw):
    base = dict(user={"gold_domain": "restaurant", "gold_state": {}}, triage={"domain": "restaurant"},
                pred_state={}, action={"kind": "search", "acts": []}, mentions=[], missing_required=[],
                expected="search", actual="search", judge=None)
    base.update(kw)
    return score_turn(**base)


# ---------------------------------------------------------------- system correctness

def test_an_ungrounded_action_makes_the_turn_incorrect_at_the_call_site():
    # kills: score_turn passing grounded=True to system_correct_turn (ungrounded_action 0.770 -> 0.967)
    assert _turn(mentions=[{"grounded": True}])["system_correct"] == 1
    assert _turn(mentions=[{"grounded": False}])["system_correct"] == 0
    assert _turn(mentions=[{"grounded": True}, {"grounded": False}])["system_correct"] == 0


def test_an_invented_venue_in_the_reply_makes_the_turn_incorrect(db):
    # the metric definitions' system correctness example 3: "I recommend The Golden Dragon, phone: 123-456-7890"
    said = text_mentions("I recommend The Golden Dragon, phone: 123-456-7890", db)
    assert any(x["kind"] == "entity" and not x["grounded"] for x in said)
    bad = _turn(text_mentions=said)
    assert bad["system_correct"] == 0
    real = db.records["restaurant"][0]
    good = _turn(text_mentions=text_mentions(f"I recommend {real['name']}, phone {real['phone']}.", db))
    assert good["system_correct"] == 1 and good["text_hallucination"] == 0.0


def test_text_hallucination_is_the_share_of_invented_mentions_at_every_level(db):
    # kills: text hallucination always 0 (turn, dialogue and dataset figures all read it)
    said = text_mentions("I recommend The Golden Dragon, phone: 123-456-7890", db)
    assert text_hallucination_turn(said) == 1.0
    real = db.records["restaurant"][0]
    mixed = text_mentions(f"Try {real['name']}. You could also try The Golden Dragon.", db)
    assert text_hallucination_turn(mixed) == pytest.approx(1 / 2)
    turns = [_turn(text_mentions=said), _turn(text_mentions=mixed)]
    assert turns[0]["text_hallucination"] == 1.0 and turns[1]["text_hallucination"] == pytest.approx(0.5)
    dm = score_dialogue(turns, transfer_events=[], completion=None, extra={})
    # pooled over mentions: (2 + 1) ungrounded of 4
    assert dm["text_hallucination"] == pytest.approx(3 / 4) and dm["text_mentions"] == 4
    ds = score_dataset([{"dialogue_metrics": dm, "turn_metrics": turns}])
    assert ds["text_hallucination_micro"] == pytest.approx(3 / 4)


def _unavailable_day(entity):
    for day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"):
        for people in "12345678":
            booking = {"bookday": day, "bookpeople": people, "bookstay": "2"}
            if not booking_available("hotel", entity, booking):
                return booking
    raise AssertionError("no unavailable booking found")


def test_a_refusal_the_database_does_not_back_is_a_wrong_action(db):
    # the never-booking agent: "no availability" for a venue that was available scored as "book"
    entity = db.entity_id("hotel", db.records["hotel"][0])
    assert booking_available("hotel", entity, BOOKING)
    lie = {"kind": "nobook", "domain": "hotel", "entity": entity, "booking": BOOKING}
    assert refusal_grounded(lie, {}, db) is False
    assert action_class_of(lie, {}, db, ACTION_CLASS) == UNGROUNDED_REFUSAL
    assert _turn(expected="book", actual=action_class_of(lie, {}, db, ACTION_CLASS))["system_correct"] == 0
    true = dict(lie, booking=_unavailable_day(entity))
    assert refusal_grounded(true, {}, db) is True
    assert action_class_of(true, {}, db, ACTION_CLASS) == "book"
    # nooffer: grounded only when nothing in the db matches what the system searched for
    area = db.records["hotel"][0]["area"]
    nooffer = {"kind": "nooffer", "domain": "hotel"}
    assert refusal_grounded(nooffer, {"hotel": {"area": area}}, db) is False
    assert refusal_grounded(nooffer, {"hotel": {"area": area, "stars": "17"}}, db) is True
    assert refusal_grounded(nooffer, {"hotel": {"name": "no such inn anywhere"}}, db) is True
    assert refusal_grounded({"kind": "book", "domain": "hotel"}, {}, db) is None


# ---------------------------------------------------------------- policy violation rate

def test_policy_violation_rate_is_per_turn_not_per_dialogue():
    # kills: dividing the violations by the dialogues (0.038 -> 0.2 in the review)
    records = [{"dialogue_metrics": {"policy_violations": 1, "n_turns": 10}, "turn_metrics": []},
               {"dialogue_metrics": {"policy_violations": 0, "n_turns": 6}, "turn_metrics": []},
               {"dialogue_metrics": {"policy_violations": 2, "n_turns": 4}, "turn_metrics": []}]
    assert score_dataset(records)["policy_violation_rate"] == pytest.approx(3 / 20)


# ---------------------------------------------------------------- memory transfer

def _switch(hotel_area, *, user_text="", repeat=1):
    first = {"gold_domain": "restaurant", "gold_state": {"restaurant-area": ["north"]},
             "pred_state": {"restaurant-area": "north"}, "user_text": "a restaurant in the north"}
    later = {"gold_domain": "hotel", "gold_state": {"restaurant-area": ["north"], "hotel-area": [hotel_area]},
             "pred_state": {"restaurant-area": "north", "hotel-area": hotel_area}, "user_text": user_text}
    return [first] + [dict(later) for _ in range(repeat)]


def test_memory_transfer_counts_each_opportunity_once():
    # kills: re-counting the opportunity on every turn the slot stays in the gold state
    turns = _switch("north", user_text="a hotel in the same area as the restaurant", repeat=4)
    events = m.memory_transfer_events(turns)
    assert len(events) == 1 and events[0]["turn"] == 1
    assert m.memory_transfer_dialogue(events) == {"score": 1.0, "opportunities": 1}


def test_dontcare_is_no_transfer():
    # kills: counting dontcare as a carried-over value
    turns = [{"gold_domain": "restaurant", "gold_state": {"restaurant-area": ["dontcare"]}, "pred_state": {}},
             {"gold_domain": "hotel", "gold_state": {"restaurant-area": ["dontcare"], "hotel-area": ["dontcare"]},
              "pred_state": {"hotel-area": "dontcare"}}]
    assert m.memory_transfer_events(turns) == []
    assert m.memory_transfer_dialogue(m.memory_transfer_events(turns))["opportunities"] == 0


def test_a_value_the_user_restated_is_no_transfer_and_is_reported():
    restated = _switch("north", user_text="I also need a hotel in the north.")
    assert m.memory_transfer_events(restated) == []
    assert m.memory_transfer_restated(restated) == 1
    carried = _switch("north", user_text="I also need a hotel in the same area as the restaurant.")
    assert len(m.memory_transfer_events(carried)) == 1 and m.memory_transfer_restated(carried) == 0
    # "northern" is no restatement of "north"; a turn log without user_text (old records) counts as before
    assert len(m.memory_transfer_events(_switch("north", user_text="somewhere northern"))) == 1
    assert len(m.memory_transfer_events([{k: v for k, v in t.items() if k != "user_text"}
                                         for t in restated])) == 1
    records = [{"dialogue_metrics": {"memory_transfer": 1.0, "memory_transfer_opportunities": 1,
                                     "memory_transfer_restated": 0}},
               {"dialogue_metrics": {"memory_transfer": None, "memory_transfer_opportunities": 0,
                                     "memory_transfer_restated": 2}}]
    out = score_dataset(records)
    assert (out["memory_transfer_macro"], out["memory_transfer_dialogues"], out["memory_transfer_opportunities"],
            out["memory_transfer_restated"]) == (1.0, 1, 1, 2)


# ---------------------------------------------------------------- task completion

def test_task_completion_needs_every_required_slot():
    # kills: removing the required-slots check (a booking made without its slots completed the task)
    goals = {"hotel": ["bookday", "bookpeople", "bookstay"]}
    full = {"hotel-bookday": "monday", "hotel-bookpeople": "2", "hotel-bookstay": "2"}
    done = dict(booking_goals=goals, booked_domains={"hotel"}, requested={}, informed={}, offered={"hotel"})
    assert m.task_completion_dialogue(final_state=full, **done) == 1
    for slot in full:
        partial = {k: v for k, v in full.items() if k != slot}
        assert m.task_completion_dialogue(final_state=partial, **done) == 0, slot


# ---------------------------------------------------------------- judge failures

def test_one_invalid_judge_answer_drops_that_turn_not_the_dialogue():
    turns = [{"turn": 1, "judge_failed": 0, "heuristic_response_quality": 5, "policy_compliance": 1},
             {"turn": 2, "judge_failed": 1, "heuristic_response_quality": None, "judge_raw": "garbage",
              "policy_compliance": 1},
             {"turn": 3, "judge_failed": 0, "heuristic_response_quality": 3, "policy_compliance": 1}]
    assert judge_invalid_flags(turns) == []
    dm = score_dialogue(turns, transfer_events=[], completion=None, extra={})
    assert dm["heuristic_response_quality"] == 4.0 and dm["judge_failures"] == 1 and dm["judge_calls"] == 3
    every = [dict(t, judge_failed=1, judge_raw="garbage") for t in turns]
    flags = judge_invalid_flags(every)
    assert [f["detail"].split(":")[0] for f in flags] == ["turn 1", "turn 2", "turn 3"]
    assert all("garbage" in f["detail"] for f in flags)
    assert judge_invalid_flags([{"turn": 1, "judge_failed": None}]) == []


# ---------------------------------------------------------------- the never-booking gaming reference, run

def test_the_never_booking_agent_beats_clean_on_no_headline_metric():
    import convsim.graphs.customer_service as cs
    from convsim import stable_seed
    from convsim.evaluation.gaming import gaming_rows
    from convsim.evaluation.service.gaming_refs import HEADLINE

    def run(**params):
        p = cs.Params(n_sessions=12, judge=True, **params)
        records = []
        for init in cs.sessions(p, cs.Context(params=p, seed=7)):
            c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
            state = cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                    context=c, config={"recursion_limit": 10_000})
            records.append({**state, "session_id": init["session_id"], "status": "ok"})
        dms = [r["dialogue_metrics"] for r in records]
        metrics = {k: {"mean": m.mean_or_none(d.get(k) for d in dms)} for k, (src, _) in HEADLINE.items()
                   if src == "metrics"}
        return {"metrics": metrics, "dataset": cs.dataset_metrics(records)}, records

    clean, _ = run()
    gaming, records = run(fault="never_book")
    refused = [t for r in records for t in r["turn_metrics"] if t["actual_action"] == UNGROUNDED_REFUSAL]
    assert refused and all(t["system_correct"] == 0 for t in refused)  # each lie is a wrong action
    rows = gaming_rows({"variants": {"clean": clean, "never_book": gaming}}, {"never_book": "clean"}, HEADLINE)
    assert not [r for r in rows if r["beats"]], [r for r in rows if r["beats"]]
    by = {r["metric"]: r for r in rows}
    assert by["system_correctness"]["gaming_value"] < by["system_correctness"]["baseline_value"]
    assert by["task_completion"]["gaming_value"] < by["task_completion"]["baseline_value"]
    assert by["heuristic_response_quality"]["gaming_value"] < by["heuristic_response_quality"]["baseline_value"]


def test_fault_check_reads_never_book_against_the_clean_bookings():
    from convsim.evaluation.service.fault_check import fault_rows
    summary = {"variants": {
        "clean": {"metrics": {"system_correctness": {"mean": 0.96}}, "dataset": {"bookings_made": 22}, "n": 40},
        "never_book": {"metrics": {"system_correctness": {"mean": 0.67}}, "dataset": {"bookings_made": 0}, "n": 40}}}
    params = {"clean": {}, "never_book": {"fault": "never_book"}}
    (row,) = fault_rows(summary, params)
    assert (row["verdict"], row["opportunities"], row["clean"], row["faulty"]) == ("caught", 22, 0.96, 0.67)
    summary["variants"]["never_book"]["metrics"]["system_correctness"]["mean"] = 1.0
    assert fault_rows(summary, params)[0]["verdict"] == "missed"
