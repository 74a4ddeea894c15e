"""Group-planning metrics against the one-line mutations an independent review found surviving
the suite: M10's lexical channel needing 1 token hit instead of 2, and M9 read on the repaired plan
instead of the plan as proposed. Hand-built plans; a fixed similarity table (0 everywhere)."""
import pytest

from test_group_metrics import DB, FixedSim, day

from convsim.evaluation.group.plan_metrics import plan_grounding_rate, plan_repairs, slot_satisfaction


def test_m10_lexical_channel_needs_two_token_hits():
    plan = {"days": [day(1)], "raw_output": ""}
    # "quiet", "loft", "trees": only "loft" is in the placed stay's record (Oak Loft): 1 hit of 3
    one = slot_satisfaction("a quiet loft with trees", "lodging", plan=plan, db=DB, embedder=FixedSim())
    assert one["lexical"] is False and not one["satisfied"]
    # "oak" and "loft": 2 hits
    two = slot_satisfaction("the Oak trees and a loft", "lodging", plan=plan, db=DB, embedder=FixedSim())
    assert two["lexical"] is True and two["satisfied"]


def test_m9_reads_the_plan_as_proposed_not_the_repaired_one():
    repaired = {"days": [day(1)]}                       # 5 distinct names, all in the db
    proposed = {"days": [day(1, d="Ghost Grill, X")]}   # the planner invented the dinner place
    plan = dict(repaired, as_proposed=proposed, validation={"unknown_places": ["Ghost Grill"]})
    assert plan_grounding_rate(repaired, DB) == 1.0
    assert plan_grounding_rate(plan, DB) == pytest.approx(4 / 5)
    assert plan_repairs(plan) == 1
