"""PEPPER preference coverage and iEvaLM Recall@K by hand."""

import pytest

from evaluation.crs import coverage as cov


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


def test_coverage_metrics_from_a_transcript():
    tr = [{"speaker": "user", "text": "x", "meta": {"user_meta": {"anchor": "m1"}}},
          {"speaker": "system", "text": "y", "meta": {"top_k": ["m2", "m1"]}},
          {"speaker": "user", "text": "x", "meta": {"anchor": "m3"}},
          {"speaker": "system", "text": "y", "meta": {"top_k": ["m4"]}}]
    out = cov.coverage_metrics(tr, ks=(1, 2))
    assert out == {"pc_final": 0.5, "pc_mean": 0.5, "recall_at_1": 0.0, "recall_at_2": 0.0}
