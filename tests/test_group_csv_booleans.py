"""A spec-format dialogue CSV whose boolean cells are written as pandas writes them ("True" /
"False") gives the hand-computed metrics: before, the string "False" was truthy, so a synthesis
turn flagged ``has_conflict = "False"`` counted as a reported conflict (M2 1.0 instead of 0.8,
M5 0.4 instead of 0.5)."""
import csv

import pandas as pd
import pytest

from convsim.evaluation.group.dialogue_csv import evaluate_group_csv, read_group_csv

SLOTS = ("cuisine", "attraction", "event", "accommodation", "transportation")
WISHES = {"A": ("Thai food", "museums", "jazz concerts", "a loft", "trains"),
          "B": ("Mexican food", "zoos", "football games", "a cabin", "buses")}
CONFLICT = {"cuisine": True, "attraction": True, "event": True, "accommodation": True, "transportation": False}
FEEDBACK = ("cuisine", "attraction")   # feedback turns on 2 of the 4 flagged slots


def _rows():
    rows = [{"speaker": "system", "intent": "sys_greet", "utterance": "Hello", "multi_user": True,
             "enable_synthesis": True, "use_social_theory": False, "enable_feedback": True, "member_count": 2,
             "has_conflict": None}]
    for i, slot in enumerate(SLOTS):
        for member, wishes in WISHES.items():
            rows.append({"speaker": member, "intent": f"user_provide_{slot}", "utterance": f"I want {wishes[i]}"})
        rows.append({"speaker": "system", "intent": f"sys_synthesize_{slot}",
                     "utterance": f"For {slot} we combine both wishes of the group in one choice.",
                     "has_conflict": CONFLICT[slot]})
        if slot in FEEDBACK:
            rows.append({"speaker": "A", "intent": f"user_feedback_{slot}", "utterance": "Fine by me."})
    return rows


@pytest.mark.parametrize("writer", ["pandas", "csv_words"])
def test_true_false_strings_are_booleans_and_give_the_hand_values(tmp_path, writer):
    path = tmp_path / "dialogue.csv"
    rows = _rows()
    if writer == "pandas":   # pandas writes Python booleans as True / False
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        cols = list(rows[0])
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow({k: ("" if r.get(k) is None else str(r[k])) for k in cols})
    text = path.read_text()
    assert ",False" in text and ",True" in text
    data = read_group_csv(path)
    synth = [t for t in data["turns"] if t["intent"].startswith("sys_synthesize_")]
    assert [t["meta"]["has_conflict"] for t in synth] == [True, True, True, True, False]
    assert data["flags"]["enable_feedback"] is True and data["flags"]["use_social_theory"] is False
    m = evaluate_group_csv(path)["metrics"]
    assert m["M2_recall"] == pytest.approx(4 / 5)   # 5 divergent slots, 4 flagged (the spec's M2)
    assert m["M2"] == pytest.approx(8 / 9)          # F1: 2 TP / (2 TP + FP + FN) = 8 / (8 + 0 + 1)
    assert m["M5_reported"] == pytest.approx(2 / 4)  # feedback turns on 2 of the 4 flagged slots
    assert m["M5"] == 0.0   # "Fine by me." says nothing about the member's own wish: not feedback


def test_booleans_inside_the_meta_json_column(tmp_path):
    path = tmp_path / "dialogue.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["speaker", "intent", "utterance", "meta"])
        w.writerow(["system", "sys_greet", "Hello", '{"multi_user": "True", "enable_synthesis": "True", '
                    '"use_social_theory": "False", "enable_feedback": "False", "member_count": 2}'])
        w.writerow(["A", "user_provide_cuisine", "I want Thai food", ""])
        w.writerow(["B", "user_provide_cuisine", "I want Mexican food", ""])
        w.writerow(["system", "sys_synthesize_cuisine", "We combine both wishes of the group here.",
                    '{"has_conflict": "False"}'])
    m = evaluate_group_csv(path)["metrics"]
    assert m["M2"] == 0.0   # the one divergent slot was not flagged: "False" is false
