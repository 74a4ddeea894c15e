"""The policy gate where it changes a result.

``task_completion_gated`` = task completion AND zero policy violations. With a customer that
accepts any booking reference, a booking made before the details were given ends the domain
with a required slot never filled, so completion is 0 either way and the gate never moved a
result. A customer that checks the booking's details (``check_booking``) says them again and
gets its booking on a later turn: the task is completed, the violation stays, and only the gate
tells the two agents apart; the supervisor (the gate that blocks the violating booking) keeps
the result."""
import pytest

import convsim.graphs.customer_service as cs
from convsim import stable_seed


def _run(**params):
    p = cs.Params(n_sessions=30, judge=False, policy_request_rate=0.5, **params)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return [r["dialogue_metrics"] for r in out]


def _rate(dms, name):
    vals = [d[name] for d in dms if d.get(name) is not None]
    return sum(vals) / len(vals)


@pytest.fixture(scope="module")
def runs():
    broken = dict(fault="book_missing_slots", supervisor=False)
    return {"clean": _run(), "clean_checked": _run(check_booking=True),
            "violating": _run(**broken), "violating_checked": _run(**broken, check_booking=True),
            "blocked_checked": _run(fault="book_missing_slots", supervisor=True, check_booking=True)}


def test_a_checking_customer_changes_nothing_for_an_agent_that_books_right(runs):
    keys = ("task_completion", "task_completion_gated", "task_success", "n_turns")
    assert [[d[k] for k in keys] for d in runs["clean"]] == [[d[k] for k in keys] for d in runs["clean_checked"]]


def test_the_gate_changes_task_completion_when_the_customer_checks_the_booking(runs):
    v = runs["violating_checked"]
    flipped = [d for d in v if d["task_completion"] == 1 and d["task_completion_gated"] == 0]
    assert flipped and all(d["policy_violations"] > 0 for d in flipped)
    assert _rate(v, "task_completion") > _rate(v, "task_completion_gated")
    # the state-graded view sees the violating booking too (it stays in the bookings table)
    assert _rate(v, "policy_compliance_state") < 1
    # ungated, the violating agent ties the clean one; gated, it falls below it
    assert _rate(v, "task_completion") == _rate(runs["clean_checked"], "task_completion")
    assert _rate(v, "task_completion_gated") < _rate(runs["clean_checked"], "task_completion_gated")


def test_without_the_check_the_gate_never_moved_a_result(runs):
    # the observation, kept as the reason for the condition above
    v = runs["violating"]
    assert sum(d["policy_violations"] for d in v) > 0
    assert all(d["task_completion"] == d["task_completion_gated"] for d in v if d["task_completion"] is not None)


def test_the_blocking_gate_keeps_the_result(runs):
    b = runs["blocked_checked"]
    assert sum(d["policy_violations"] for d in b) == 0
    assert all(d["task_completion"] == d["task_completion_gated"] for d in b if d["task_completion"] is not None)
    assert _rate(b, "task_completion_gated") > _rate(runs["violating_checked"], "task_completion_gated")
    assert _rate(b, "policy_compliance_state") == 1.0
