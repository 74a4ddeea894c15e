"""The MAS4CS metrics on its worked examples and pass^k."""
from math import comb

import pytest

from convsim.evaluation.service import metrics as m


def test_domain_routing_example():  # predicted hotel, gold find_restaurant -> 0
    assert m.domain_routing_turn("hotel", "restaurant") == 0
    assert m.domain_routing_turn("restaurant", "restaurant") == 1
    assert m.domain_routing_turn("hotel", None) is None


def test_intent_accuracy_and_multi_intent_diagnostics():
    assert m.intent_accuracy_turn("find_restaurant", "find_restaurant") == 1
    assert m.intent_accuracy_turn("find_hotel", "find_restaurant") == 0
    missing = m.set_precision_recall(["find_hotel"], ["find_hotel", "book_hotel"])
    assert missing == {"precision": 1.0, "recall": 0.5}
    extra = m.set_precision_recall(["find_hotel", "book_hotel"], ["find_hotel"])
    assert extra == {"precision": 0.5, "recall": 1.0}


def test_act_type_accuracy_examples():
    assert m.act_type_accuracy_turn(["Restaurant-Inform"], ["Restaurant-Inform"]) == 1
    assert m.act_type_accuracy_turn(["Restaurant-Request"], ["Restaurant-Inform"]) == 0
    partial = m.set_precision_recall(["Restaurant-Inform"], ["Restaurant-Inform", "Restaurant-Request"])
    assert partial == {"precision": 1.0, "recall": 0.5}
    extra = m.set_precision_recall(["Hotel-Inform", "Hotel-Request", "Hotel-Book"], ["Hotel-Inform", "Hotel-Request"])
    assert extra["recall"] == 1.0 and extra["precision"] == pytest.approx(2 / 3)
    assert m.act_type_accuracy_turn(["Hotel-Inform"], None) is None


def test_slot_accuracy_example_and_extra_slots_ignored():
    pred = {"restaurant-area": "centre", "restaurant-pricerange": "expensive"}
    gold = {"restaurant-area": ["centre"], "restaurant-pricerange": ["cheap"]}
    assert m.slot_accuracy_turn(pred, gold) == 0.5
    gold2 = {"restaurant-area": "centre", "restaurant-pricerange": "expensive"}
    assert m.slot_accuracy_turn({**pred, "restaurant-food": "thai"}, gold2) == 1.0
    assert m.slot_accuracy_turn(pred, {}) is None


def test_joint_goal_accuracy_examples():
    gold = {"restaurant-area": ["centre"], "restaurant-pricerange": ["expensive"]}
    assert m.joint_goal_turn({"restaurant-area": "centre", "restaurant-pricerange": "expensive"}, gold) == 1
    assert m.joint_goal_turn({"restaurant-area": "centre", "restaurant-pricerange": "cheap"}, gold) == 0
    assert m.joint_goal_turn({"restaurant-area": "centre"}, gold) == 0            # missing
    assert m.joint_goal_turn({"restaurant-area": "centre", "restaurant-pricerange": "expensive",
                              "hotel-area": "north"}, gold) == 0               # extra
    # MultiWOZ 2.2: any listed gold value counts
    assert m.joint_goal_turn({"restaurant-booktime": "20:00"}, {"restaurant-booktime": ["8pm", "20:00"]}) == 1


def test_slot_precision_is_the_hallucination_example():
    # predicted area=north, gold south -> 1 hallucinated of 1: precision 0, "hallucination" 1
    assert m.slot_precision_turn({"restaurant-area": "north"}, {"restaurant-area": ["south"]}, "restaurant") == 0.0
    # wrong domain (hotel slots while restaurant is active) are not in the active domain
    pred = {"restaurant-area": "south", "restaurant-food": "thai", "hotel-area": "east"}
    assert m.slot_precision_turn(pred, {"restaurant-area": ["south"]}, "restaurant") == 0.5
    assert m.slot_precision_turn({}, {"restaurant-area": ["south"]}, "restaurant") is None


def test_db_grounding_golden_dragon():
    mentions = [{"name": "the golden dragon", "grounded": False}, {"name": "pizza hut city centre", "grounded": True}]
    assert m.db_grounding_turn(mentions) == 0.5
    assert m.db_grounding_turn([]) is None


def test_memory_transfer_example_and_denominator():
    turns = [{"gold_domain": "restaurant", "gold_state": {"restaurant-area": ["north"]},
              "pred_state": {"restaurant-area": "north"}},
             {"gold_domain": "hotel", "gold_state": {"restaurant-area": ["north"], "hotel-area": ["north"]},
              "pred_state": {"restaurant-area": "north", "hotel-area": "north"}}]
    events = m.memory_transfer_events(turns)
    assert [(e["from"], e["to"], e["slot"], e["correct"]) for e in events] == [("restaurant", "hotel", "area", 1)]
    assert m.memory_transfer_dialogue(events) == {"score": 1.0, "opportunities": 1}
    turns[1]["pred_state"] = {"restaurant-area": "north"}
    assert m.memory_transfer_dialogue(m.memory_transfer_events(turns)) == {"score": 0.0, "opportunities": 1}
    no_switch = turns[:1]
    assert m.memory_transfer_dialogue(m.memory_transfer_events(no_switch)) == {"score": None, "opportunities": 0}


def test_policy_compliance_example():  # book_hotel with bookstay missing -> violation
    assert m.policy_compliance_turn(booked=True, missing_required=["bookstay"]) == 0
    assert m.policy_compliance_turn(booked=True, missing_required=[]) == 1
    assert m.policy_compliance_turn(booked=False, missing_required=["bookstay"]) == 1


def test_system_correctness_examples():
    # Example 1: booking asked with missing name/day/stay -> request is right
    exp = m.expected_action(user_act="inform", intent="book_hotel", domain="hotel",
                            missing_required=["name", "bookday", "bookstay"])
    assert exp == "request"
    assert m.system_correct_turn(expected=exp, actual="request", grounded=True, compliant=True) == 1
    # Example 3: search answered with an entity not in the db
    exp = m.expected_action(user_act="inform", intent="find_restaurant", domain="restaurant", missing_required=[])
    assert exp == "search"
    assert m.system_correct_turn(expected=exp, actual="search", grounded=False, compliant=True) == 0
    # Example 4: complete booking answered with a search
    exp = m.expected_action(user_act="inform", intent="book_hotel", domain="hotel", missing_required=[])
    assert m.system_correct_turn(expected=exp, actual="search", grounded=True, compliant=True) == 0
    assert m.expected_action(user_act="bye", intent="general", domain="general", missing_required=[]) == "close"


def _completion(final, booked):
    return m.task_completion_dialogue(booking_goals={"hotel": ["name", "bookday", "bookpeople", "bookstay"]},
                                      booked_domains=booked, final_state=final, requested={}, informed={},
                                      offered=set())


def test_task_completion_examples():
    full = {"hotel-name": "university arms", "hotel-bookday": "saturday", "hotel-bookpeople": "2", "hotel-bookstay": "2"}
    assert _completion(full, {"hotel"}) == 1                                    # example 1
    no_name = {k: v for k, v in full.items() if k != "hotel-name"}
    assert _completion(no_name, set()) == 0                                     # example 2
    assert _completion(full, set()) == 0                                        # example 3
    info = m.task_completion_dialogue(booking_goals={}, booked_domains=set(), final_state={},
                                      requested={"restaurant": ["phone"]}, informed={"restaurant": {"phone"}},
                                      offered={"restaurant"})
    assert info == 1
    assert m.task_completion_dialogue(booking_goals={}, booked_domains=set(), final_state={}, requested={},
                                      informed={}, offered=set()) is None


def test_pass_hat_k_matches_tau_bench_formula():
    trials = {"a": [True, True, False, True], "b": [False, False, True, False], "c": [True] * 4}
    for k in (1, 2, 3, 4):
        want = sum(comb(c, k) / comb(4, k) for c in (3, 1, 4)) / 3
        assert m.pass_hat_k(trials, k) == pytest.approx(want)
    assert m.pass_hat_k(trials, 1) == pytest.approx(8 / 12)
    assert m.pass_hat_k(trials, 5) is None


def test_every_metric_has_an_aggregation_convention():
    for name in ("domain_routing", "intent_accuracy", "act_type_accuracy", "slot_accuracy",
                 "joint_goal_accuracy", "slot_precision", "memory_transfer", "policy_compliance",
                 "system_correctness", "task_completion", "response_quality", "db_grounding", "task_success"):
        assert name in m.AGGREGATION


def test_expected_action_for_unsupported_and_small_talk():
    assert m.expected_action(user_act="inform", intent="find_police", domain="police", missing_required=[],
                             unsupported=True) == "unsupported"
    assert m.expected_action(user_act="bye", intent="general", domain="police", missing_required=[],
                             unsupported=True) == "close"
    assert m.expected_action(user_act="inform", intent="general", domain="general", missing_required=[]) is None


def test_dialogue_pools_text_mentions_and_proposed_grounding():
    from convsim.evaluation.service.scoring import score_dialogue
    turns = [{"policy_compliance": 1, "system_correct": 1, "text_mentions": 2, "text_ungrounded": 1,
              "db_mentions_proposed": 1, "db_grounded_proposed": 0, "supervisor_correction": 1},
             {"policy_compliance": 0, "system_correct": None, "system_correct_unscored": 1, "text_mentions": 2,
              "text_ungrounded": 0, "db_mentions_proposed": 1, "db_grounded_proposed": 1}]
    dm = score_dialogue(turns, transfer_events=[], completion=None, extra={})
    assert dm["text_hallucination"] == 0.25 and dm["db_grounding_proposed"] == 0.5
    assert dm["supervisor_corrections"] == 1 and dm["policy_violations"] == 1
    assert dm["system_correctness"] == 1.0 and dm["system_correct_unscored"] == 1
