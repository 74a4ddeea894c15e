"""Run comparison: Cohen's kappa equals scikit-learn's, paired tests equal scipy's."""
from __future__ import annotations

import random

import pytest

from convsim.evaluation.retrieval.compare import cohen_kappa, compare_retrieval_runs, judge_agreement, paired_tests


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_equals_sklearn_on_random_raters(weights):
    from sklearn.metrics import cohen_kappa_score
    rng = random.Random(5)
    for _ in range(40):
        n = rng.randint(5, 60)
        a = [rng.randint(0, 3) for _ in range(n)]
        b = [x if rng.random() < 0.6 else rng.randint(0, 3) for x in a]
        assert cohen_kappa(a, b, weights=weights) == pytest.approx(
            cohen_kappa_score(a, b, weights=weights, labels=[0, 1, 2, 3]), abs=1e-12)
        # labels=None: the observed label set, as sklearn's default
        assert cohen_kappa(a, b, weights=weights, labels=None) == pytest.approx(
            cohen_kappa_score(a, b, weights=weights), abs=1e-12)


def test_kappa_by_hand_and_undefined_cases():
    # 2x2: O = [[2,1],[0,1]]; po = 3/4; pe = (3/4)(2/4) + (1/4)(2/4) = 1/2; kappa = (0.75-0.5)/0.5
    assert cohen_kappa([0, 0, 0, 1], [0, 0, 1, 1], labels=(0, 1)) == pytest.approx(0.5)
    assert cohen_kappa([], []) is None
    assert cohen_kappa([2, 2, 2], [2, 2, 2]) is None
    with pytest.raises(ValueError):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError):
        cohen_kappa([1, 5], [1, 2])


def test_judge_agreement_binarises_at_two():
    a, b = [3, 2, 1, 0, 2], [2, 3, 0, 0, 1]
    result = judge_agreement(a, b)
    assert result["n"] == 5
    assert result["exactAgreement"] == pytest.approx(1 / 5)
    assert result["relevantAgreement"] == pytest.approx(4 / 5)
    assert sum(map(sum, result["confusion"])) == 5 and result["confusion"][3][2] == 1


def test_paired_tests_equal_scipy():
    from scipy import stats
    rng = random.Random(9)
    a = [rng.random() for _ in range(25)]
    b = [x + rng.gauss(0.05, 0.1) for x in a]
    out = paired_tests(a, b)
    assert out["wilcoxonP"] == pytest.approx(stats.wilcoxon(a, b).pvalue)
    assert out["tP"] == pytest.approx(stats.ttest_rel(b, a).pvalue)
    assert out["meanDiff"] == pytest.approx(sum(b) / 25 - sum(a) / 25)
    assert out["diffCiLow"] <= out["meanDiff"] <= out["diffCiHigh"]
    same = paired_tests([0.5, 0.5], [0.5, 0.5])
    assert same["meanDiff"] == 0 and same["wilcoxonP"] is None and same["tP"] is None


def _record(case: str, ndcg: float, scores: dict[str, int], variant: str = "v") -> dict:
    return {"session_id": case, "trial": 0, "variant": variant, "status": "ok",
            "dialogue_metrics": {"ndcg@10": ndcg, "judgeFailed": False},
            "judgements": [{"code": c, "score": s} for c, s in scores.items()]}


def test_compare_runs_pairs_cases_and_judges(tmp_path):
    run_a = [_record("c1", 0.5, {"X": 3, "Y": 0}), _record("c2", 0.6, {"X": 2}), _record("c3", 0.7, {"Z": 1})]
    run_b = [_record("c1", 0.6, {"X": 3, "Y": 1}), _record("c2", 0.9, {"X": 2}), _record("c4", 0.1, {"Z": 1})]
    result = compare_retrieval_runs(run_a, run_b)
    assert result["pairs"] == 2
    assert set(result["metrics"]) == {"ndcg@10"}                 # booleans are not metrics
    assert result["metrics"]["ndcg@10"]["meanDiff"] == pytest.approx(0.2)
    assert result["judgeAgreement"]["n"] == 3                    # X, Y in c1 and X in c2
    assert result["judgeAgreement"]["exactAgreement"] == pytest.approx(2 / 3)
