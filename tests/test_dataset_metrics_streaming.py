"""Dataset metrics rewritten to stream (they get a RecordSet read from disk): hand-computed values,
and each moves when the defect it measures is injected."""
import json

from convsim import load_graph_module
from convsim.results.recordset import RecordSet


def _recordset(tmp_path, records):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({"variant": "v", "status": "ok", **r}) + "\n" for r in records))
    return RecordSet.scan(path)


def test_hello_chat_pooled_turn_accuracy_counts_turns_not_sessions(tmp_path):
    dataset_metrics = load_graph_module("hello_chat").dataset_metrics
    right = [{"session_id": "s1", "turn_metrics": [{"correct": 1}] * 3},
             {"session_id": "s2", "turn_metrics": [{"correct": 1}]}]
    assert dataset_metrics(_recordset(tmp_path, right)) == {"pooled_turn_accuracy": 1.0}
    # a wrong answer in the one-turn session: pooled over 4 turns (3/4), not per session (1/2)
    wrong = [right[0], {"session_id": "s2", "turn_metrics": [{"correct": 0}]}]
    assert dataset_metrics(_recordset(tmp_path, wrong)) == {"pooled_turn_accuracy": 0.75}
    assert dataset_metrics(_recordset(tmp_path, [{"session_id": "s", "turn_metrics": []}])) == \
        {"pooled_turn_accuracy": None}


def _case(sid, trial, ndcg, labels):
    return {"session_id": sid, "trial": trial, "dialogue_metrics": {"ndcg@10": ndcg},
            "judgements": [{"code": c, "score": s, "judge": "model"} for c, s in labels.items()]}


def test_course_iteration_stability_drops_when_the_judge_changes_its_labels(tmp_path):
    dataset_metrics = load_graph_module("course_retrieval").dataset_metrics
    stable = [_case("q1", t, 0.8, {"A": 3, "B": 1}) for t in (0, 1)] + \
             [_case("q2", t, 0.5, {"C": 2}) for t in (0, 1)]
    out = dataset_metrics(_recordset(tmp_path, stable))
    assert out["iterations"] == 2
    assert out["labelStabilityAcrossIterations"] == 1.0 and out["ndcg@10StdAcrossIterations"] == 0.0
    # the judge gives B another label on the second iteration, and q1's NDCG moves 0.8 -> 0.6
    flaky = [_case("q1", 0, 0.8, {"A": 3, "B": 1}), _case("q1", 1, 0.6, {"A": 3, "B": 2})] + stable[2:]
    out = dataset_metrics(_recordset(tmp_path, flaky))
    assert out["labelStabilityAcrossIterations"] == 2 / 3  # A and C kept their label, B did not
    assert abs(out["ndcg@10StdAcrossIterations"] - (0.1 + 0.0) / 2) < 1e-12  # pstdev(0.8, 0.6) = 0.1
