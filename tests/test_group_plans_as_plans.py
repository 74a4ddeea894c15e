"""Plans scored as plans (evaluation/group/plan_feasibility.py): the lived plan within each day's
budget, timed, grounded and feasible; house rules against the member's wish; precision and the
over-full cap; members accepting by their own view (agents/group/member_view.py); and the plan that
places everything losing to the honest plan on a real session."""
import pytest

from test_group_metrics import DB, FixedSim, day

from convsim import stable_seed
from convsim.agents.group.member_view import member_view, view_verdict
from convsim.catalog.travel import TravelDB
from convsim.evaluation.group.plan_feasibility import (house_rule_ok, house_rule_wishes, lived_plan,
                                                       plan_quality, plan_satisfaction)

POI = "Oak Loft, stay from 07:00 to 08:30;City Museum, visit from 09:00 to 11:00"


def test_an_honest_plan_lives_everything_it_places():
    plan = {"days": [day(1, poi=POI)]}
    lived, counts = lived_plan(plan, DB, group_size=2)
    assert counts["plan_placed"] == counts["plan_lived"] == 5
    assert plan_quality(counts) == {"plan_precision": 1.0, "plan_quality_factor": 1.0}


def test_items_past_the_budget_untimed_or_overlapping_are_not_lived():
    d = day(1, poi=POI + ";Wild Zoo, visit from 10:00 to 12:00")
    d["lunch"] = "Roma House, X;Taco Corner, X"          # 2 places for one meal: 1 over budget
    d["attraction"] = "City Museum, X;Wild Zoo, X;"      # Wild Zoo's window overlaps the museum's
    d["event"] = "Derby Day, X"                          # no window: untimed on a timed day
    lived, counts = lived_plan({"days": [d]}, DB, group_size=2)
    assert counts["plan_over_budget"] == 1 and counts["plan_untimed"] == 1 and counts["plan_infeasible"] == 1
    assert counts["plan_placed"] == 8 and counts["plan_lived"] == 5
    assert plan_quality(counts)["plan_precision"] == pytest.approx(5 / 8)
    assert lived["days"][0]["event"] == "-" and "Wild Zoo" not in lived["days"][0]["attraction"]


def test_an_entire_home_too_small_for_the_group_is_infeasible():
    db = TravelDB(accommodations=[{"name": "Tiny Home", "pricing": 50, "roomType": "entire_room", "house_rules": "",
                                   "max_occupancy": 2, "rating": 4.0, "City": "X"}], restaurants=[], attractions=[],
                  events=[])
    plan = {"days": [{"days": 1, "accommodation": "Tiny Home, X"}]}
    assert lived_plan(plan, db, group_size=2)[1]["plan_infeasible"] == 0
    assert lived_plan(plan, db, group_size=4)[1]["plan_infeasible"] == 1


def test_house_rules_are_scored_against_the_members_wish():
    assert house_rule_wishes("a private room, and pets must be allowed, we bring the dog") == ["pets_allowed"]
    assert house_rule_ok("pets must be allowed", [{"house_rules": "No pets & No smoking"}]) is False
    assert house_rule_ok("pets must be allowed", [{"house_rules": "No smoking"}]) is True
    assert house_rule_ok("it has to be a no smoking place", [{"house_rules": "No smoking"}]) is True
    assert house_rule_ok("it has to be a no smoking place", [{"house_rules": ""}]) is False
    assert house_rule_ok("a private room", [{"house_rules": ""}]) is None
    # Oak Loft: private room, "No smoking". The room type is right; the dog is not allowed? it is (no "No pets")
    prefs = {("A", "lodging"): "a private room, and pets must be allowed", ("B", "lodging"): "a private room, "
             "and it has to be a no smoking place", ("C", "lodging"): "a private room, and visitors should be allowed"}
    out = plan_satisfaction(prefs, plan={"days": [day(1, poi=POI)]}, db=DB, embedder=FixedSim(), group_size=2)
    assert out["metrics"]["M10"] == 1.0 and out["metrics"]["house_rule_violations"] == 0
    db = TravelDB(accommodations=[{**DB.accommodations[0], "house_rules": "No pets & No visitors"}],
                  restaurants=DB.restaurants, attractions=DB.attractions, events=DB.events)
    out = plan_satisfaction(prefs, plan={"days": [day(1, poi=POI)]}, db=db, embedder=FixedSim(), group_size=2)
    assert out["metrics"]["M10"] == pytest.approx(0.0)   # no smoking is not in the rules either
    assert out["metrics"]["house_rule_violations"] == 3


def test_precision_scales_satisfaction_and_an_overfull_day_caps_it_at_zero():
    prefs = {("A", "cuisine"): "I love Italian cuisine", ("A", "attraction"): "I love Museum visits"}
    honest = plan_satisfaction(prefs, plan={"days": [day(1, poi=POI)]}, db=DB, embedder=FixedSim(), group_size=2)
    assert honest["metrics"]["W1"] == 1.0 and honest["metrics"]["M11"] == 1.0
    d = day(1, poi=POI)
    d["dinner"] = "Taco Corner, X;Bean Cafe, X"          # one item over budget: P = 5 / 6
    padded = plan_satisfaction(prefs, plan={"days": [d]}, db=DB, embedder=FixedSim(), group_size=2)
    assert padded["metrics"]["W1"] == pytest.approx(5 / 6) and padded["metrics"]["M10"] == pytest.approx(5 / 6)
    assert padded["metrics"]["M11"] == 0.0
    d["attraction"] = "City Museum, X;" + "Wild Zoo, X;" * 16   # 22 items on the day: past 2 x 8
    full = plan_satisfaction(prefs, plan={"days": [d]}, db=DB, embedder=FixedSim(), group_size=2)
    assert full["metrics"]["plan_overfull_days"] == 1
    assert full["metrics"]["W1"] == full["metrics"]["M10"] == full["metrics"]["W3"] == 0.0


MEMBER = {"name": "A", "preferences": {
    "cuisine": {"option": "Italian", "also_ok": None, "reject": "Mexican"},
    "attraction": {"option": "Museum", "also_ok": None, "reject": None},
    "event": {"option": "Sports", "also_ok": None, "reject": None},
    "lodging": {"room_type": "private_room", "house_rule": "no_smoking", "reject": None, "also_ok": None}}}


def test_a_member_judges_by_its_own_profile_and_dislikes():
    lived, counts = lived_plan({"days": [dict(day(1, poi=POI + ";Derby Day, visit from 19:00 to 21:00"),
                                              event="Derby Day, X")]}, DB, group_size=2)
    v = member_view(MEMBER, lived, DB)
    # Italian, Museum, Sports and a private no-smoking room are all there; Mexican (Taco Corner) is disliked
    assert v["served"] == ["Italian", "Museum", "Sports", "private_room"] and v["disliked"] == ["Mexican"]
    assert v["view"] == pytest.approx(3 / 4)
    ok, _, detail = view_verdict(MEMBER, lived, counts, DB, seed=1, threshold=0.0)
    assert ok and detail["tolerance"] == 0.0
    ok, text, _ = view_verdict(MEMBER, lived, counts, DB, seed=1, threshold=1.0)
    assert not ok and "I said no Mexican" in text
    ok, text, _ = view_verdict(MEMBER, lived, {**counts, "plan_overfull_days": 1}, DB, seed=1, threshold=0.0)
    assert not ok   # an over-full plan is rejected whatever the tolerance


def test_the_plan_that_places_everything_loses_to_the_honest_plan():
    from convsim.graphs.group_planning import Context, Params, graph, sessions
    out = {}
    for ref in (None, "place_everything"):
        p = Params(condition="C4", n_sessions=3, reference=ref)
        ms = []
        for s in sessions(p, Context(params=p, seed=7)):
            st = graph.invoke(s, context=Context(params=p, seed=stable_seed(7, s["session_id"]),
                                                 session_id=s["session_id"]))
            ms.append(st["dialogue_metrics"])
        out[ref] = {k: sum(m[k] for m in ms) / len(ms) for k in ("W1", "W2", "W3", "M10", "M11", "M6", "M16")}
    honest, gaming = out[None], out["place_everything"]
    for k in ("W1", "W2", "M10", "M6", "M16"):
        assert gaming[k] < honest[k], (k, gaming, honest)
    assert gaming["W3"] <= honest["W3"] and gaming["M11"] <= honest["M11"]


def test_the_self_reporting_talker_loses_on_process_and_outcomes():
    from convsim.evaluation.gaming import gaming_rows
    from convsim.evaluation.group.gaming_refs import HEADLINE
    from convsim.graphs.group_planning import Context, Params, graph, sessions
    variants = {}
    for name, ref in (("C4", None), ("self_reporter", "self_reporter")):
        p = Params(condition="C4", n_sessions=10, reference=ref)   # M11 needs 10: at 4 one-member plans tie or win by chance
        ms = []
        for s in sessions(p, Context(params=p, seed=7)):
            st = graph.invoke(s, context=Context(params=p, seed=stable_seed(7, s["session_id"]),
                                                 session_id=s["session_id"]))
            ms.append(st["dialogue_metrics"])
            if ref:   # what it claims: a conflict and a strategy on every slot, a feedback exchange per slot
                synth = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
                assert all(t["meta"]["has_conflict"] and t["meta"]["resolution_strategy"] == "include_both"
                           for t in synth)
                assert sum(t["meta"].get("intent", "").startswith("user_feedback_") for t in st["transcript"]) == len(synth)
        variants[name] = {"metrics": {k: {"mean": sum(m[k] for m in ms if m.get(k) is not None) /
                                          max(1, sum(m.get(k) is not None for m in ms))}
                                      for k in HEADLINE if any(m.get(k) is not None for m in ms)}}
    rows = gaming_rows({"variants": variants}, {"self_reporter": "C4"}, HEADLINE)
    assert not [r for r in rows if r["beats"]], [r for r in rows if r["beats"]]
    by = {r["metric"]: r for r in rows}
    for k in ("W1", "W2", "M6", "M3", "M4"):   # M3, M4 from behaviour: its claims no longer score
        assert by[k]["gaming_value"] < by[k]["baseline_value"], k
    assert by["M2_false_alarm"]["gaming_value"] > by["M2_false_alarm"]["baseline_value"]
