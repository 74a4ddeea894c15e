"""hello_chat's metrics: hand-computed, and moving with the defect each measures. With model none
they are constant by construction (the rule agent answers from the fact table; docs/metrics.md)."""
from types import SimpleNamespace

import pytest

from convsim import load_graph_module

mod = load_graph_module("hello_chat")


def _turn(answer: str, topic: str = "capital of france") -> dict:
    state = {"turn": 1, "questions": [topic], "transcript": [
        {"turn": 1, "speaker": "user", "text": f"What is the {topic}?", "meta": {"topic": topic}},
        {"turn": 1, "speaker": "agent", "text": answer, "meta": {}}]}
    ctx = mod.Context(params=mod.Params())
    return mod.evaluate_turn(state, SimpleNamespace(context=ctx, stream_writer=lambda e: None))["turn_metrics"][0]


@pytest.mark.parametrize("answer,correct,words", [
    ("The capital of france is Paris.", 1.0, 6),
    ("paris", 1.0, 1),                          # case-insensitive
    ("The capital of france is Lyon.", 0.0, 6),  # the defect: a wrong fact
    ("I do not know.", 0.0, 4),                  # the defect: no answer
    ("Parisian cafes are nice.", 0.0, 4),        # a word that only contains the fact is not the fact
])
def test_turn_metrics_hand_computed(answer, correct, words):
    m = _turn(answer)
    assert m["correct"] == correct and m["answer_words"] == words


def test_accuracy_and_the_pooled_figure_hand_computed():
    state = {"turn_metrics": [{"correct": 1.0}, {"correct": 0.0}, {"correct": 1.0}]}
    assert mod.evaluate_dialogue(state)["dialogue_metrics"] == {"accuracy": pytest.approx(2 / 3), "turns": 3}
    records = [{"turn_metrics": [{"correct": 1.0}, {"correct": 0.0}]}, {"turn_metrics": [{"correct": 1.0}]}]
    assert mod.dataset_metrics(records)["pooled_turn_accuracy"] == pytest.approx(2 / 3)
