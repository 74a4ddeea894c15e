"""PEPPER preference coverage and iEvaLM Recall@K by hand."""

import pytest

from convsim.evaluation.crs import coverage as cov


def test_preference_coverage_is_cumulative():
    lists = [["a", "b"], ["c"], ["b", "d"]]
    assert cov.preference_coverage(lists, {"b", "d", "z", "y"}) == [0.25, 0.25, 0.5]
    assert cov.preference_coverage(lists, set()) is None


def test_recall_at_k_uses_the_last_list():
    lists = [["t1", "x"], [], ["x", "y", "t2"]]
    assert cov.recall_at_k(lists, {"t1"}, 10) == 0.0  # t1 was in an earlier list only
    assert cov.recall_at_k(lists, {"t2"}, 2) == 0.0
    assert cov.recall_at_k(lists, {"t2"}, 3) == 1.0
    assert cov.recall_at_k([[], []], {"t2"}, 3) is None
    with pytest.raises(ValueError):
        cov.recall_at_k(lists, {"t"}, 0)


def test_coverage_metrics_from_a_transcript_against_hidden_targets():
    tr = [{"speaker": "user", "text": "x", "meta": {"anchor": "m1"}},
          {"speaker": "system", "text": "y", "meta": {"top_k": ["m2", "m1"]}},
          {"speaker": "user", "text": "x", "meta": {"anchor": "m3"}},
          {"speaker": "system", "text": "y", "meta": {"top_k": ["m4"]}}]
    out = cov.coverage_metrics(tr, {"m2", "m9"}, ks=(1, 2))
    # PC_1 = |{m2, m1} ∩ T| / 2 = 0.5, PC_2 = 0.5; last list [m4] holds no target
    assert out == {"pc_final": 0.5, "pc_mean": 0.5, "recall_at_1": 0.0, "recall_at_2": 0.0}


def test_the_users_own_anchors_are_not_targets():
    """The leak: a system that repeats the film the user named scored Recall@1 = 1.0. Targets are
    now the hidden ones of the final user state; the anchors do not count."""
    tr = [{"speaker": "user", "text": "I loved m1", "meta": {"anchor": "m1"}},
          {"speaker": "system", "text": "m1!", "meta": {"top_k": ["m1"]}}]
    state = {"transcript": tr, "user_state": {"targets": ["m7", "m8"]}}
    out = cov.coverage_metrics(tr, cov.hidden_targets(state), ks=(1,))
    assert out["recall_at_1"] == 0.0 and out["pc_final"] == 0.0
    assert cov.coverage_metrics(tr, cov.hidden_targets({"transcript": tr}), ks=(1,))["recall_at_1"] is None


def test_hidden_targets_from_the_transcript_when_the_state_is_gone():
    tr = [{"speaker": "user", "text": "x", "meta": {"hidden_targets": ["m7"]}},
          {"speaker": "system", "text": "y", "meta": {"top_k": ["m7"]}}]
    assert cov.hidden_targets({"transcript": tr}) == {"m7"}
    assert cov.hidden_targets({"transcript": tr, "user_state": {"targets": ["m8"]}}) == {"m8"}
