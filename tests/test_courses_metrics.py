"""Retrieval metrics: hand-computed values and equality with ir-measures (pytrec_eval provider)."""
from __future__ import annotations

import math
import random

import pytest

from convsim.evaluation.retrieval.metrics import (
    NDCG_BANDS, PRECISION_BANDS, average_relevance, case_metrics, dcg, highly_relevant_rate, interpretation_band,
    irrelevant_rate, ndcg_at_k, ndcg_fixed_ideal_at_k, precision_at_k, recall_at_k, reciprocal_rank,
    score_distribution,
)

# The reference's worked example: qrels d1:3 d2:0 d3:2 d4:1 d5:3 d6:3; run d2 d1 d4 d3 d5.
RANKED = [0, 3, 1, 2, 3]
QRELS = [3, 0, 2, 1, 3, 3]


def test_ndcg_matches_the_reference_worked_example():
    assert ndcg_at_k(RANKED, 10, ideal=QRELS) == pytest.approx(0.5778, abs=1e-4)   # trec_eval ndcg_cut.10
    assert ndcg_at_k(RANKED, 10) == pytest.approx(0.6981, abs=1e-4)                # the spec's proxy
    assert ndcg_at_k(RANKED, 10, ideal=QRELS, gain="exponential") == pytest.approx(0.5373, abs=1e-4)


def test_dcg_by_hand():
    # 3/log2(2) + 2/log2(3) + 0 + 1/log2(5)
    assert dcg([3, 2, 0, 1]) == pytest.approx(3 + 2 / math.log2(3) + 1 / math.log2(5))
    assert dcg([3, 2, 0, 1], 2) == pytest.approx(3 + 2 / math.log2(3))
    assert dcg([2], gain="exponential") == pytest.approx(3.0)
    assert dcg([]) == 0.0


def test_ndcg_none_when_nothing_relevant_and_one_when_perfect():
    assert ndcg_at_k([0, 0, 0], 10) is None
    assert ndcg_at_k([], 5) is None
    assert ndcg_at_k([3, 2, 1], 3) == pytest.approx(1.0)
    assert ndcg_at_k([0, 0], 5, ideal=[3]) == 0.0


def test_precision_divides_by_k_and_the_original_option_by_returned():
    assert precision_at_k(RANKED, 10) == pytest.approx(0.3)
    assert precision_at_k(RANKED, 10, denominator="returned") == pytest.approx(0.6)
    assert precision_at_k(RANKED, 2) == pytest.approx(0.5)
    assert precision_at_k(RANKED, None) == pytest.approx(0.6)
    # an empty list: nothing relevant in the top 5 is 0 / 5 = 0; only 0 / 0 is undefined
    assert precision_at_k([], 5) == 0.0
    assert precision_at_k([], None) is None and precision_at_k([], 5, denominator="returned") is None


def test_recall_and_reciprocal_rank_by_hand():
    assert recall_at_k(RANKED, 4, 10) == pytest.approx(3 / 4)
    assert recall_at_k(RANKED, 4, 2) == pytest.approx(1 / 4)
    assert recall_at_k(RANKED, 0, 10) is None
    assert reciprocal_rank(RANKED) == pytest.approx(0.5)
    assert reciprocal_rank([0, 1, 1]) == 0.0
    assert reciprocal_rank([0, 1, 1], threshold=1) == pytest.approx(0.5)


def test_basic_rates_by_hand():
    scores = [3, 0, 2, 3, 1]
    assert average_relevance(scores) == pytest.approx(9 / 5)
    assert highly_relevant_rate(scores) == pytest.approx(40.0)
    assert irrelevant_rate(scores) == pytest.approx(20.0)
    assert score_distribution(scores) == {0: 1, 1: 1, 2: 1, 3: 2}
    assert average_relevance([]) is None and highly_relevant_rate([]) is None


def test_bad_input_is_rejected():
    with pytest.raises(ValueError):
        ndcg_at_k([1, 2], 0)
    with pytest.raises(ValueError):
        precision_at_k([1, -1], 2)
    with pytest.raises(ValueError):
        dcg([1], gain="cubic")


def test_interpretation_bands_follow_the_spec():
    assert interpretation_band(0.9) == ("Excellent", "Near-perfect ranking")
    assert interpretation_band(0.75)[0] == "Good"
    assert interpretation_band(0.5)[0] == "Fair"
    assert interpretation_band(0.49)[0] == "Poor"
    assert interpretation_band(0.8, PRECISION_BANDS)[0] == "Excellent"
    assert interpretation_band(0.39, PRECISION_BANDS)[0] == "Poor"
    assert interpretation_band(None) is None
    assert NDCG_BANDS[-1][1] == "Poor"


def _random_case(rng: random.Random, n_docs: int = 30):
    """A query's qrels (graded 0-3, at least one label >= 2) and a run over a doc pool."""
    docs = [f"d{i}" for i in range(n_docs)]
    judged = rng.sample(docs, rng.randint(3, 15))
    qrels = {d: rng.choice([0, 0, 1, 2, 3]) for d in judged}
    qrels[judged[0]] = rng.choice([2, 3])
    retrieved = rng.sample(docs, rng.randint(1, 20))
    # Strictly decreasing scores: trec_eval breaks ties by docno, not by input order.
    run = {d: float(len(retrieved) - i) for i, d in enumerate(retrieved)}
    return qrels, run, retrieved


def test_equal_to_ir_measures_on_random_runs_and_qrels():
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import P, R, RR, nDCG
    rng = random.Random(20240611)
    qrels_all, run_all, ours = {}, {}, {}
    for q in range(60):
        qid = f"q{q}"
        qrels, run, retrieved = _random_case(rng)
        qrels_all[qid], run_all[qid] = qrels, run
        ranked = [qrels.get(d, 0) for d in retrieved]
        n_rel = sum(1 for v in qrels.values() if v >= 2)
        ours[qid] = {}
        for k in (1, 3, 5, 10, 20):
            ours[qid][str(nDCG @ k)] = ndcg_at_k(ranked, k, ideal=list(qrels.values()))
            ours[qid][str(P(rel=2) @ k)] = precision_at_k(ranked, k)
            ours[qid][str(R(rel=2) @ k)] = recall_at_k(ranked, n_rel, k)
        ours[qid][str(RR(rel=2))] = reciprocal_rank(ranked)
    measures = [m for k in (1, 3, 5, 10, 20) for m in (nDCG @ k, P(rel=2) @ k, R(rel=2) @ k)] + [RR(rel=2)]
    checked = 0
    # The pytrec_eval provider is the trec_eval reference; name it so a fallback cannot hide.
    provider = ir_measures.providers.registry["pytrec_eval"]
    for metric in provider.iter_calc(measures, qrels_all, run_all):
        assert ours[metric.query_id][str(metric.measure)] == pytest.approx(metric.value, abs=1e-9), \
            (metric.query_id, str(metric.measure))
        checked += 1
    assert checked == 60 * 16


def test_exponential_gain_equals_ir_measures_custom_gains():
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import nDCG
    rng = random.Random(7)
    qrels_all, run_all, ours = {}, {}, {}
    for q in range(30):
        qrels, run, retrieved = _random_case(rng)
        qrels_all[f"q{q}"], run_all[f"q{q}"] = qrels, run
        ours[f"q{q}"] = ndcg_at_k([qrels.get(d, 0) for d in retrieved], 10, ideal=list(qrels.values()),
                                  gain="exponential")
    # Computed alone: mixing gains= with other nDCG variants in one call is unreliable (reference §3a).
    measure = nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}) @ 10
    provider = ir_measures.providers.registry["pytrec_eval"]
    values = {m.query_id: m.value for m in provider.iter_calc([measure], qrels_all, run_all)}
    assert values.keys() == ours.keys()
    for qid, value in values.items():
        assert ours[qid] == pytest.approx(value, abs=1e-9)


def test_proxy_ndcg_equals_library_ndcg_with_qrels_restricted_to_the_retrieved():
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import nDCG
    rng = random.Random(11)
    qrels_all, run_all, ours = {}, {}, {}
    for q in range(30):
        n = rng.randint(2, 12)
        labels = [rng.randint(0, 3) for _ in range(n)]
        labels[rng.randrange(n)] = 3
        docs = [f"c{i}" for i in range(n)]
        qrels_all[f"q{q}"] = dict(zip(docs, labels))
        run_all[f"q{q}"] = {d: float(n - i) for i, d in enumerate(docs)}
        ours[f"q{q}"] = ndcg_at_k(labels, 10)
    provider = ir_measures.providers.registry["pytrec_eval"]
    for m in provider.iter_calc([nDCG @ 10], qrels_all, run_all):
        assert ours[m.query_id] == pytest.approx(m.value, abs=1e-9)


# --- F8: an empty retrieved list is scored, not dropped ---------------------------------------------

def test_an_empty_list_scores_zero_at_every_cutoff_and_none_only_where_zero_over_zero():
    m = case_metrics([], gold_ranked=[], gold_all=[3, 2, 0, 1], cutoffs=(5, 10))
    assert m["retrievalEmpty"] == 1 and m["totalCourses"] == 0
    for key in ("ndcgGold@5", "ndcgGold@10", "ndcgGold@all", "recall@10", "recall@all", "mrr",
                "precisionGold@10", "precision@10", "ndcgFixedIdeal@10"):
        assert m[key] == 0.0, key
    # undefined for an empty list, and why: each divides by the number returned, or normalises by
    # the returned list's own scores (0 / 0)
    for key in ("averageRelevance", "highlyRelevantRate", "irrelevantRate", "ndcgProxy@10",
                "precision@all", "precisionGold@all"):
        assert m[key] is None, key
    # without a relevant gold course, recall and mrr stay undefined (no denominator), empty or not
    m = case_metrics([], gold_ranked=[], gold_all=[0, 1])
    assert m["recall@10"] is None and m["mrr"] is None and m["ndcgGold@10"] == 0.0
    assert case_metrics([3])["retrievalEmpty"] == 0


def test_an_empty_run_equals_trec_eval_zero():
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import P, R, RR, nDCG
    qrels = {"q1": {"a": 3, "b": 2, "c": 0}}
    measures = [nDCG @ 10, P(rel=2) @ 10, R(rel=2) @ 10, RR(rel=2)]
    values = {str(m.measure): m.value for m in
              ir_measures.providers.registry["pytrec_eval"].iter_calc(measures, qrels, {"q1": {}})}
    ours = case_metrics([], gold_ranked=[], gold_all=[3, 2, 0])
    assert values == {"nDCG@10": 0.0, "P(rel=2)@10": 0.0, "R(rel=2)@10": 0.0, "RR(rel=2)": 0.0}
    assert [ours["ndcgGold@10"], ours["precisionGold@10"], ours["recall@10"], ours["mrr"]] == [0.0] * 4


# --- F7: the fixed-ideal NDCG, a headline that can fail -----------------------------------------------

def _idcg3(k):   # DCG of k courses scored 3
    return sum(3 / math.log2(i + 1) for i in range(1, k + 1))


def test_fixed_ideal_ndcg_by_hand():
    assert _idcg3(10) == pytest.approx(13.63068, abs=1e-5)
    assert ndcg_fixed_ideal_at_k([3], 10) == pytest.approx(3 / 13.63068, abs=1e-5)            # 0.2201
    assert ndcg_fixed_ideal_at_k([3, 2, 0, 1], 5) == pytest.approx(
        (3 + 2 / math.log2(3) + 1 / math.log2(5)) / _idcg3(5))                                # 0.5305
    assert ndcg_fixed_ideal_at_k([3, 2, 0, 1], 5) == pytest.approx(0.53051, abs=1e-5)
    assert ndcg_fixed_ideal_at_k([3] * 10, 10) == pytest.approx(1.0)
    assert ndcg_fixed_ideal_at_k([], 10) == 0.0
    assert ndcg_fixed_ideal_at_k([1], 1, gain="exponential") == pytest.approx(1 / 7)
    with pytest.raises(ValueError):
        ndcg_fixed_ideal_at_k([3], None)
    with pytest.raises(ValueError):
        ndcg_fixed_ideal_at_k([4], 10)


def test_one_good_course_and_junk_padding_fool_the_proxy_not_the_fixed_ideal_or_gold():
    """The auditor's F7: one good course scores 1.0 on the proxy, so does one good course + 9 junk
    (judged 0; the auditor's 0.983 came from junk the heuristic scored 1). The proxy does not move
    when junk is added; the fixed-ideal and gold NDCG are low for both, P@10 and irrelevantRate see
    the junk."""
    gold_all = [3, 3, 2, 2]                       # the case has 4 relevant courses
    one = case_metrics([3], gold_ranked=[3], gold_all=gold_all)
    padded = case_metrics([3] + [0] * 9, gold_ranked=[3] + [0] * 9, gold_all=gold_all)
    full = case_metrics([3, 3, 2, 2] + [0] * 6, gold_ranked=[3, 3, 2, 2] + [0] * 6, gold_all=gold_all)
    assert one["ndcgProxy@10"] == padded["ndcgProxy@10"] == full["ndcgProxy@10"] == 1.0   # blind
    assert interpretation_band(padded["ndcgProxy@10"])[0] == "Excellent"    # why it gets no band
    gold_idcg = 3 + 3 / math.log2(3) + 2 / math.log2(4) + 2 / math.log2(5)
    assert one["ndcgGold@10"] == padded["ndcgGold@10"] == pytest.approx(3 / gold_idcg)    # 3 / 6.7542 = 0.4442
    assert one["ndcgGold@10"] == pytest.approx(0.44417, abs=1e-5) and full["ndcgGold@10"] == 1.0
    assert one["ndcgFixedIdeal@10"] == pytest.approx(0.22009, abs=1e-5)
    assert padded["ndcgFixedIdeal@10"] == one["ndcgFixedIdeal@10"]
    # the fixed ideal's price: the perfect list of this 4-relevant case reaches only 6.7542 / 13.6307
    assert full["ndcgFixedIdeal@10"] == pytest.approx(gold_idcg / _idcg3(10)) == pytest.approx(0.49551, abs=1e-5)
    assert padded["precision@10"] == pytest.approx(0.1) and padded["irrelevantRate"] == pytest.approx(90.0)
    assert one["recall@10"] == pytest.approx(0.25) and full["recall@10"] == 1.0


def test_fixed_ideal_equals_ir_measures_with_k_phantom_threes_and_brackets_full_judging():
    """fixed-ideal NDCG@k == trec_eval ndcg_cut.k when the qrels add k never-retrieved courses labelled
    3; and fixedIdeal <= NDCG with the whole catalog judged <= proxy (the proxy is an upper bound)."""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import nDCG
    rng = random.Random(5)
    provider = ir_measures.providers.registry["pytrec_eval"]
    phantom_qrels, full_qrels, run_all, ours_fixed, ours_proxy = {}, {}, {}, {}, {}
    for q in range(40):
        qid = f"q{q}"
        catalog = {f"d{i}": rng.choice([0, 0, 0, 1, 2, 3]) for i in range(25)}   # every course judged
        retrieved = rng.sample(sorted(catalog), rng.randint(1, 12))
        labels = [catalog[d] for d in retrieved]
        run_all[qid] = {d: float(len(retrieved) - i) for i, d in enumerate(retrieved)}
        phantom_qrels[qid] = {**{d: catalog[d] for d in retrieved}, **{f"ideal{i}": 3 for i in range(10)}}
        full_qrels[qid] = catalog
        ours_fixed[qid] = ndcg_fixed_ideal_at_k(labels, 10)
        ours_proxy[qid] = ndcg_at_k(labels, 10)
    fixed = {m.query_id: m.value for m in provider.iter_calc([nDCG @ 10], phantom_qrels, run_all)}
    full = {m.query_id: m.value for m in provider.iter_calc([nDCG @ 10], full_qrels, run_all)}
    assert fixed.keys() == ours_fixed.keys()
    for qid in fixed:
        assert ours_fixed[qid] == pytest.approx(fixed[qid], abs=1e-9)
        assert ours_fixed[qid] <= full[qid] + 1e-12
        if ours_proxy[qid] is not None:
            assert full[qid] <= ours_proxy[qid] + 1e-12


# --- defect injection: the rates ----------------------------------------------------------------------

def test_junk_injected_into_a_list_raises_irrelevant_rate_and_lowers_highly_relevant_rate():
    clean = case_metrics([3, 3, 2])
    junk = case_metrics([3, 3, 2, 0, 0, 0])
    assert clean["irrelevantRate"] == 0.0 and junk["irrelevantRate"] == pytest.approx(50.0)       # 3/6
    assert clean["highlyRelevantRate"] == pytest.approx(200 / 3) and junk["highlyRelevantRate"] == pytest.approx(100 / 3)
    assert junk["averageRelevance"] == pytest.approx(8 / 6) and clean["averageRelevance"] == pytest.approx(8 / 3)
