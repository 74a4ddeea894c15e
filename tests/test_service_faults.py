"""Fault injection: each broken agent moves the metric that claims to catch it, the clean system
does not, and the supervisor, when enabled, catches the faults it claims to (policy, grounding)."""
import pytest

import convsim.graphs.customer_service as cs
from convsim import stable_seed
from convsim.evaluation.service.fault_check import fault_rows, markdown

N = 24  # sessions per variant: enough for every fault to have eligible turns (asserted below)


def _records(**params):
    p = cs.Params(n_sessions=N, judge=False, **params)
    ctx = cs.Context(params=p, seed=7)
    out = []
    for init in cs.sessions(p, ctx):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
        state = cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                context=c, config={"recursion_limit": 10_000})
        out.append({**state, "session_id": init["session_id"], "status": "ok"})
    return out


@pytest.fixture(scope="module")
def clean():
    return cs.dataset_metrics(_records())


def _routing(records):
    vals = [r["dialogue_metrics"]["domain_routing"] for r in records]
    return sum(vals) / len(vals)


def test_clean_system_shows_no_fault(clean):
    assert clean["policy_violation_rate"] == 0 and clean["text_hallucination_micro"] == 0
    assert clean["db_grounding_proposed_micro"] == 1 and clean["memory_transfer_macro"] == 1
    assert clean["memory_transfer_opportunities"] >= 1  # forget_area below has something to break


def test_booking_with_missing_slots_is_a_policy_violation_and_the_supervisor_blocks_it(clean):
    off = cs.dataset_metrics(_records(fault="book_missing_slots", supervisor=False))
    on = cs.dataset_metrics(_records(fault="book_missing_slots", supervisor=True))
    assert off["policy_violation_rate"] > 0
    assert on["policy_violation_rate"] == 0 and on["supervisor_corrections"] > 0
    assert clean["supervisor_corrections"] == 0


def test_ungrounded_action_lowers_grounding_before_the_supervisor_only():
    off = cs.dataset_metrics(_records(fault="ungrounded_action", supervisor=False, fault_rate=0.5))
    on = cs.dataset_metrics(_records(fault="ungrounded_action", supervisor=True, fault_rate=0.5))
    assert off["db_grounding_proposed_micro"] < 1 and off["db_grounding_micro"] < 1
    assert on["db_grounding_proposed_micro"] < 1 and on["db_grounding_micro"] == 1
    assert on["supervisor_corrections"] > 0


def test_invented_entity_in_the_response_text_is_caught():
    ds = cs.dataset_metrics(_records(fault="invent_entity", fault_rate=0.5))
    assert ds["text_hallucination_micro"] > 0
    # the structured action was fine: only the text check sees this fault
    assert ds["db_grounding_micro"] == 1


def test_memory_that_forgets_the_area_breaks_transfer():
    ds = cs.dataset_metrics(_records(fault="forget_area"))
    assert ds["memory_transfer_macro"] < 1


def test_misrouting_triage_lowers_routing_roughly_by_its_rate():
    records = _records(fault="misroute", fault_rate=0.3)
    routing = _routing(records)
    assert routing < 1
    assert 0.4 < routing < 0.95  # about 30 % of the routable turns, plus knock-on effects


def test_fault_table_marks_a_metric_that_does_not_move_as_not_caught():
    summary = {"variants": {
        "clean": {"n": 5, "dataset": {"text_hallucination_micro": 0.0}, "metrics": {}},
        "invent": {"n": 5, "dataset": {"text_hallucination_micro": 0.0, "text_mentions": 12}, "metrics": {}},
        "misroute": {"n": 5, "dataset": {"domain_routing_micro_n_turns": 30},
                     "metrics": {"domain_routing": {"mean": 0.7}}}}}
    rows = fault_rows(summary, {"clean": {}, "invent": {"fault": "invent_entity"},
                                "misroute": {"fault": "misroute"}})
    assert [(r["variant"], r["caught"]) for r in rows] == [("invent", False), ("misroute", True)]


def test_silent_replies_are_caught_by_response_grounding_and_task_success(clean):
    # the gaming reference (an audit): every action right, every reply "Sorry, I cannot help with
    # that. Goodbye."; the simulated customer reads the action, so before only the text checks could
    # have seen it, and none did: task success, completion and heuristic quality equalled the clean run
    ds = cs.dataset_metrics(_records(fault="silent_actions"))
    assert clean["response_grounding_micro"] == 1 and clean["response_ungrounded_turns"] == 0
    assert ds["response_grounding_micro"] < 0.1 and ds["response_ungrounded_turns"] > 0
    assert clean["task_success_rate"] > 0.5 and ds["task_success_rate"] == 0
    assert ds["task_success_structured_rate"] == clean["task_success_rate"]  # the actions were as good
    assert ds["task_completion_rate"] == 0
    rows = fault_rows({"variants": {"clean": {"n": N, "dataset": clean, "metrics": {}},
                                    "silent": {"n": N, "dataset": ds, "metrics": {}}}},
                      {"clean": {}, "silent": {"fault": "silent_actions"}})
    assert [(r["verdict"], r["caught"]) for r in rows] == [("caught", True)]
    assert rows[0]["opportunities"] >= 5


def test_a_fault_with_too_few_opportunities_is_neither_caught_nor_missed():
    # an audit: memory_transfer was marked caught on 1 opportunity in 30 sessions
    def summary(opportunities, value):
        return {"variants": {
            "clean": {"n": 30, "dataset": {"memory_transfer_macro": 1.0, "memory_transfer_opportunities": 1},
                      "metrics": {}},
            "forget": {"n": 30, "dataset": {"memory_transfer_macro": value,
                                            "memory_transfer_opportunities": opportunities}, "metrics": {}}}}
    params = {"clean": {}, "forget": {"fault": "forget_area"}}
    (thin,) = fault_rows(summary(1, 0.0), params)
    assert thin["caught"] is None and thin["verdict"] == "not enough opportunities (1 < 5)"
    assert "not enough opportunities (1 < 5)" in markdown([thin]) and "| yes |" not in markdown([thin])
    (enough,) = fault_rows(summary(6, 0.5), params)
    assert enough["caught"] is True and enough["verdict"] == "caught"
    (missed,) = fault_rows(summary(6, 1.0), params)
    assert missed["caught"] is False and "| NO |" in markdown([missed])
    (lenient,) = fault_rows(summary(1, 0.0), params, min_opportunities=1)
    assert lenient["caught"] is True
    # a summary that does not count the opportunities cannot give a verdict either
    (uncounted,) = fault_rows({"variants": {"clean": {"n": 3, "dataset": {}, "metrics": {}},
                                            "forget": {"n": 3, "dataset": {"memory_transfer_macro": 0.0},
                                                       "metrics": {}}}}, params)
    assert uncounted["caught"] is None and "not counted" in uncounted["verdict"]
