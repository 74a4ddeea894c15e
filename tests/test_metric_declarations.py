"""Every graph file's headline metrics (``SUMMARY_METRICS``) declare their range (``METRIC_RANGES``),
a one-line meaning (``METRIC_DESCRIPTIONS``) and which way is better (``METRIC_DIRECTIONS``): the
report's answer sentences and headline table print them, and no CI of a headline metric leaves its
range. Plus the defect course_retrieval's ndcgGold@K / recall@K ranges rest on: a course listed twice."""
import pytest

from convsim import list_graphs, load_graph_module
from convsim.evaluation.reporting.answer import declaration, metric_info
from convsim.evaluation.retrieval.metrics import case_metrics
from convsim.results.metric_ranges import metric_ranges, range_of

GRAPHS = sorted(list_graphs())


@pytest.mark.parametrize("name", GRAPHS)
def test_every_headline_metric_declares_range_meaning_and_direction(name):
    mod = load_graph_module(name)
    ranges = metric_ranges(mod)
    headline = list(getattr(mod, "SUMMARY_METRICS", None) or []) or list(getattr(mod, "METRIC_RANGES", {}))
    assert headline, f"{name}: no headline metric"
    no_range = [m for m in headline if range_of(ranges, m) is None]
    assert not no_range, f"{name}: headline metrics without a METRIC_RANGES entry: {no_range}"
    descriptions = getattr(mod, "METRIC_DESCRIPTIONS", {})
    no_meaning = [m for m in headline if not declaration(descriptions, m)]
    assert not no_meaning, f"{name}: headline metrics without a METRIC_DESCRIPTIONS entry: {no_meaning}"
    directions = getattr(mod, "METRIC_DIRECTIONS", {})
    for m in headline:
        found = [k for k in directions if k == m] or [k for k in directions if declaration({k: 1}, m)]
        assert found, f"{name}: {m} has no METRIC_DIRECTIONS entry (higher, lower or None)"
        assert directions[found[0]] in ("higher", "lower", None)
        info = metric_info(mod, m)
        assert info["meaning"] and "\n" not in info["meaning"] and len(info["meaning"]) <= 130


def test_course_retrieval_headline_ranges_are_the_unit_interval():
    ranges = metric_ranges(load_graph_module("course_retrieval"))
    for m in ("ndcgGold@10", "ndcgGold@5", "ndcgGold@all", "recall@10", "recall@all"):
        assert range_of(ranges, m) == (0.0, 1.0)


def test_a_course_listed_twice_no_longer_takes_ndcg_gold_and_recall_past_one():
    from convsim.graphs.course_retrieval import gold_of_ranked
    gold = {"A": 3, "B": 0, "C": 0}
    codes = ["A", "A", "A"]           # the defect: one relevant course listed three times
    labels = [gold[c] for c in codes]  # what evaluate passed before
    before = case_metrics([3, 3, 3], gold_ranked=labels, gold_all=list(gold.values()), cutoffs=(10,))
    assert before["recall@10"] == 3.0 and before["ndcgGold@10"] > 1  # past the range it now declares
    after = case_metrics([3, 3, 3], gold_ranked=gold_of_ranked(codes, gold), gold_all=list(gold.values()),
                         cutoffs=(10,))
    assert after["recall@10"] == 1.0 and after["ndcgGold@10"] == 1.0  # listed once: the same
    once = case_metrics([3], gold_ranked=gold_of_ranked(["A"], gold), gold_all=list(gold.values()), cutoffs=(10,))
    assert once["recall@10"] == after["recall@10"] and once["ndcgGold@10"] == after["ndcgGold@10"]
