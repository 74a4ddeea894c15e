"""customer_service's dialogue- and dataset-level figures against hand-computed values, and the
defects each one measures (a metrics audit found these without a test; see docs/customer_service.md)."""
import pytest

from convsim.evaluation.service.scoring import score_dataset, score_dialogue, score_turn


def _turn(**kw):
    base = {"policy_compliance": 1, "system_correct": 1, "slot_accuracy": 1.0, "joint_goal_accuracy": 1,
            "slot_precision": 1.0}
    return {**base, **kw}


def test_task_completion_gated_drops_a_completed_task_that_broke_policy():
    clean = score_dialogue([_turn(), _turn()], transfer_events=[], completion=1, extra={})
    assert clean["task_completion"] == 1 and clean["task_completion_gated"] == 1
    # the defect: the task was completed, but one turn booked with required slots missing
    broke = score_dialogue([_turn(), _turn(policy_compliance=0)], transfer_events=[], completion=1, extra={})
    assert broke["policy_violations"] == 1
    assert broke["task_completion"] == 1 and broke["task_completion_gated"] == 0
    failed = score_dialogue([_turn()], transfer_events=[], completion=0, extra={})
    assert failed["task_completion_gated"] == 0
    assert score_dialogue([_turn()], transfer_events=[], completion=None, extra={})["task_completion_gated"] is None


def test_slot_false_discovery_is_the_share_of_predicted_slots_the_user_never_gave():
    user = {"gold_state": {"hotel-area": ["north"]}, "gold_domain": "hotel", "gold_intent": "find_hotel"}
    common = dict(user=user, triage={"domain": "hotel", "intent": "find_hotel"}, action={"kind": "inform", "acts": []},
                  mentions=[], missing_required=[], expected=None, actual="inform", judge=None)
    exact = score_turn(pred_state={"hotel-area": "north"}, **common)
    assert exact["slot_precision"] == 1.0 and exact["slot_false_discovery"] == 0.0
    # the defect: the tracker invents a price range the user never stated (1 of 2 predicted slots)
    invented = score_turn(pred_state={"hotel-area": "north", "hotel-pricerange": "cheap"}, **common)
    assert invented["slot_precision"] == pytest.approx(0.5) and invented["slot_false_discovery"] == pytest.approx(0.5)


def _record(sid, *, turns, **dm):
    return {"session_id": sid, "turn_metrics": turns, "dialogue_metrics": dm}


def test_dataset_figures_hand_computed():
    records = [
        _record("a", turns=[{"slot_accuracy": 1.0, "joint_goal_accuracy": 1, "slot_precision": 1.0,
                             "judge_failed": 0}, {"slot_accuracy": 0.5, "joint_goal_accuracy": 0, "slot_precision": 0.5,
                                                  "judge_failed": 1}],
                task_success=1, sim_complete=1, task_completion=1, judge_failures=1, judge_calls=2, n_turns=2,
                agent_errors=0, simulator_errors=0),
        _record("b", turns=[{"slot_accuracy": 0.0, "joint_goal_accuracy": 0, "slot_precision": None}],
                task_success=0, sim_complete=1, task_completion=0, judge_failures=0, judge_calls=1, n_turns=1,
                agent_errors=1, simulator_errors=0),
        _record("c", turns=[{"slot_accuracy": 1.0, "joint_goal_accuracy": 1, "slot_precision": 1.0}],
                task_success=1, sim_complete=0, task_completion=None, judge_failures=0, judge_calls=0, n_turns=1,
                agent_errors=0, simulator_errors=2),
    ]
    out = score_dataset(records)
    # pooled over turns, not averaged over dialogues: (1 + .5 + 0 + 1) / 4 and 2 of 4 joint goals
    assert out["slot_accuracy_micro"] == pytest.approx(2.5 / 4) and out["slot_accuracy_micro_n_turns"] == 4
    assert out["joint_goal_accuracy_micro"] == pytest.approx(0.5)
    assert out["slot_precision_micro"] == pytest.approx(2.5 / 3) and out["slot_precision_micro_n_turns"] == 3
    # task_success vs the simulator's own "complete": a agrees, b and c disagree
    assert out["success_complete_agreement"] == pytest.approx(1 / 3)
    assert out["sim_complete_rate"] == pytest.approx(2 / 3)
    assert out["task_completion_rate"] == pytest.approx(1 / 2)  # c has no completion (None): left out
    assert out["judge_failure_rate"] == pytest.approx(1 / 3)    # 1 failure in 3 judged turns
    assert out["agent_errors"] == 1 and out["simulator_errors"] == 2


def test_agreement_and_error_counts_move_with_their_defects():
    agree = [_record("a", turns=[], task_success=1, sim_complete=1), _record("b", turns=[], task_success=0, sim_complete=0)]
    assert score_dataset(agree)["success_complete_agreement"] == 1.0
    # the defect: a simulator that says "complete" where the task failed
    lying = [_record("a", turns=[], task_success=1, sim_complete=1), _record("b", turns=[], task_success=0, sim_complete=1)]
    assert score_dataset(lying)["success_complete_agreement"] == 0.5
    assert score_dataset(agree)["judge_failure_rate"] is None  # no judged turn: not 0
