"""Memory transfer's denominator comes from the simulated user's goal, not from the agent.

An opportunity is a goal domain whose script refers back to an earlier domain's value ("in the
same area as the restaurant"); the earlier domain's opening says that value (``sample_goal``).
Before, opportunities were read off the gold state the dialogue happened to reach, so an agent
that lost the user before the second domain had fewer of them (3 -> 0 below) and its
memory_transfer was None instead of 0."""
import convsim.graphs.customer_service as cs
from convsim import stable_seed
from convsim.agents.service.user_simulator import sample_goal
from convsim.catalog.service.db import load_service_db
from convsim.evaluation.service import metrics as m

GOAL = {"domains": [
    {"domain": "restaurant", "constraints": {"area": "north", "food": "thai"}, "reuse": None},
    {"domain": "hotel", "constraints": {"area": "north", "stars": "4"}, "reuse": {"slot": "area", "from": "restaurant"}}]}


def _turns(hotel_pred, *, user_text="I also need a place to stay in the same area as the restaurant."):
    first = {"gold_domain": "restaurant", "gold_state": {"restaurant-area": ["north"]},
             "pred_state": {"restaurant-area": "north"}, "user_text": "a thai restaurant in the north"}
    hotel = {"gold_domain": "hotel", "gold_state": {"restaurant-area": ["north"], "hotel-area": ["north"]},
             "pred_state": {"restaurant-area": "north", **({"hotel-area": hotel_pred} if hotel_pred else {})},
             "user_text": user_text}
    return [first, hotel, dict(hotel)]


def test_opportunities_come_from_the_goal_and_outcomes_from_the_turns():
    carried = m.memory_transfer_goal_events(GOAL, _turns("north"))
    assert [(e["turn"], e["reached"], e["correct"]) for e in carried] == [(1, 1, 1)]
    assert m.memory_transfer_dialogue(carried) == {"score": 1.0, "opportunities": 1}
    lost = m.memory_transfer_goal_events(GOAL, _turns(None))
    assert m.memory_transfer_dialogue(lost) == {"score": 0.0, "opportunities": 1}
    wrong = m.memory_transfer_goal_events(GOAL, _turns("south"))
    assert m.memory_transfer_dialogue(wrong) == {"score": 0.0, "opportunities": 1}
    # the user never got to the hotel: still an opportunity, missed (the old count gave 0 of 0)
    unreached = m.memory_transfer_goal_events(GOAL, _turns("north")[:1])
    assert [(e["reached"], e["correct"]) for e in unreached] == [(0, 0)]
    assert m.memory_transfer_dialogue(unreached) == {"score": 0.0, "opportunities": 1}
    assert m.memory_transfer_events(_turns("north")[:1]) == []
    # a value the user restated needs no memory: no opportunity, counted apart
    restated = m.memory_transfer_goal_events(GOAL, _turns("north", user_text="a hotel in the north too"))
    assert restated[0]["restated"] == 1 and m.memory_transfer_dialogue(restated)["opportunities"] == 0


def test_no_reference_in_the_goal_is_no_opportunity_even_when_values_coincide():
    # both domains happen to want the north, and the user says so each time: nothing to carry
    goal = {"domains": [dict(GOAL["domains"][0]), dict(GOAL["domains"][1], reuse=None)]}
    assert m.memory_transfer_goal_events(goal, _turns("north", user_text="a hotel in the north")) == []
    # dontcare is never an opportunity
    dc = {"domains": [GOAL["domains"][0], dict(GOAL["domains"][1], constraints={"area": "dontcare"})]}
    assert m.memory_transfer_goal_events(dc, _turns("dontcare")) == []


def test_the_referred_value_is_said_in_the_earlier_domains_opening():
    db = load_service_db()
    reused = 0
    for seed in range(300):
        goal = sample_goal(db, seed, domains=["restaurant", "hotel", "attraction"])
        for g in goal["domains"]:
            if g.get("reuse"):
                reused += 1
                source = next(x for x in goal["domains"] if x["domain"] == g["reuse"]["from"])
                assert source["order"][0] == "area" and source["constraints"]["area"] == g["constraints"]["area"]
    assert reused >= 10


def _run(**params):
    p = cs.Params(n_sessions=30, judge=False, goal_domains=["restaurant", "hotel", "attraction"], **params)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return out


def test_two_agents_get_the_same_denominator():
    clean, lost = _run(), _run(fault="misroute", fault_rate=0.5)
    n_clean = [r["dialogue_metrics"]["memory_transfer_opportunities"] for r in clean]
    n_lost = [r["dialogue_metrics"]["memory_transfer_opportunities"] for r in lost]
    goals = [sum(bool(g.get("reuse")) for g in r["goal"]["domains"]) for r in clean]
    assert n_clean == n_lost == goals and sum(goals) >= 2
    # the misrouting agent loses the user before the reference: missed, not dropped
    assert sum(r["dialogue_metrics"]["memory_transfer_unreached"] for r in lost) > 0
    score = lambda rs: [r["dialogue_metrics"]["memory_transfer"] for r in rs if r["dialogue_metrics"]["memory_transfer"] is not None]
    assert len(score(clean)) == len(score(lost)) and sum(score(lost)) < sum(score(clean))
    # the old gold-state count gave the two agents different denominators
    old = lambda rs: sum(len(m.memory_transfer_events(r["turn_log"])) for r in rs)
    assert old(clean) != old(lost)
