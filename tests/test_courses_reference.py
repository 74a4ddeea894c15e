"""Reference retrievers (configs/courses_reference.yaml): the ordering every headline metric must show
(oracle >= baseline >= random), the gaming lists caught by the gold metrics and the fixed-ideal NDCG
but not by the proxy, gold labels read by the oracle only, and judge-vs-gold kappa under an injected
disagreeing judge."""
from __future__ import annotations

import json

import pytest
import yaml

import convsim
from convsim.agents.courses.reference import oracle_ranking, random_ranking, top1_then_junk_ranking
from convsim.catalog.courses import load_courses, load_test_set
from test_courses_judge import scripted

graph_module = convsim.load_graph_module("course_retrieval")
CONFIG = convsim.contract.graphfile.project_root() / "configs" / "courses_reference.yaml"
CASES = [c for c in load_test_set().cases if not c.retrieved_courses]
CATALOG = [c["subjectCode"] for c in load_courses()]
GAMING = ("top1", "top1_then_junk", "empty")
GOLD_HEADLINE = ("ndcgGold@10", "recall@10", "mrr", "precisionGold@10")


def _variants() -> dict[str, dict]:
    cfg = yaml.safe_load(CONFIG.read_text())
    # the retrieval variants; the fixed-list ones (cases: given) are tested in tests/test_courses_catalog_check.py
    return {v["name"]: {**cfg["params"], **v["params"]} for v in cfg["variants"]
            if v["params"].get("cases", "retrieval") == "retrieval"}


def _gold_judge(gold: dict[str, int], invert: bool = False):
    """A test double of an LLM judge that answers the gold label (3 - label when ``invert``)."""
    def answer(codes):
        return json.dumps({"evaluations": [{"code": c, "score": (3 - gold.get(c, 0)) if invert else gold.get(c, 0),
                                            "reason": "gold"} for c in codes]})
    return scripted(answer)


def _run(params: dict, judge: str = "heuristic") -> list[dict]:
    p = graph_module.Params(**params, judge_cache="off")
    compiled = graph_module.build(p).compile()
    out = []
    for case in CASES:
        models = {} if judge == "heuristic" else {"judge": _gold_judge(case.gold_relevance or {}, judge == "inverted")}
        ctx = graph_module.Context(params=p, models=models, seed=11)
        init = {"session_id": case.id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
                **case.as_state()}
        out.append({**compiled.invoke(init, context=ctx), "trial": 0})
    return out


def _mean(records: list[dict], metric: str) -> float | None:
    xs = [r["dialogue_metrics"].get(metric) for r in records]
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


@pytest.fixture(scope="module")
def heuristic_runs() -> dict[str, list[dict]]:
    return {name: _run(params) for name, params in _variants().items()}


@pytest.fixture(scope="module")
def gold_judge_runs() -> dict[str, list[dict]]:
    return {name: _run(params, judge="gold") for name, params in _variants().items()}


def test_the_shipped_config_runs_the_references_beside_the_baselines():
    variants = _variants()
    assert list(variants) == ["oracle", "bm25", "tfidf", "random", "top1", "top1_then_junk", "empty"]
    assert yaml.safe_load(CONFIG.read_text())["baseline"] == "bm25"
    assert {v["retriever"] for v in variants.values()} == set(variants)


def test_gold_headline_metrics_order_oracle_above_baselines_above_random(heuristic_runs):
    means = {m: {v: _mean(rs, m) for v, rs in heuristic_runs.items()} for m in GOLD_HEADLINE}
    for m, by in means.items():
        for baseline in ("bm25", "tfidf"):
            assert by["oracle"] >= by[baseline] > by["random"], (m, by)
    assert means["ndcgGold@10"]["oracle"] == pytest.approx(1.0) and means["recall@10"]["oracle"] == pytest.approx(1.0)
    assert means["ndcgGold@10"]["bm25"] - means["ndcgGold@10"]["random"] > 0.5
    # the oracle is labelled as such wherever its numbers go
    dataset = graph_module.dataset_metrics(heuristic_runs["oracle"])
    assert "oracle" in dataset["retriever"] and "not a system" in dataset["retriever"]


def test_gaming_lists_are_caught_by_gold_and_fixed_ideal_ndcg_not_by_the_proxy(heuristic_runs):
    def m(variant, metric):
        return _mean(heuristic_runs[variant], metric)
    for gamer in ("top1", "top1_then_junk"):
        assert m(gamer, "ndcgGold@10") < m("bm25", "ndcgGold@10") - 0.2, gamer
        assert m(gamer, "recall@10") < m("bm25", "recall@10") - 0.2, gamer
        assert m(gamer, "heuristic_ndcgFixedIdeal@10") < m("bm25", "heuristic_ndcgFixedIdeal@10") - 0.1, gamer
        assert m(gamer, "heuristic_precision@10") < m("bm25", "heuristic_precision@10"), gamer
        # the proxy rates the gamers at or above the baseline: it cannot see what they left out
        assert m(gamer, "heuristic_ndcgProxy@10") >= m("bm25", "heuristic_ndcgProxy@10"), gamer
        assert m(gamer, "heuristic_ndcgProxy@10") >= 0.95, gamer
    # MRR only looks at the first relevant course, so top1 keeps it (by definition, not a defect)
    assert m("top1", "mrr") == pytest.approx(m("bm25", "mrr"), abs=0.02)
    # abstention scores 0 on everything with a cut-off, is counted, and has no proxy at all
    empty = heuristic_runs["empty"]
    for metric in (*GOLD_HEADLINE, "heuristic_ndcgFixedIdeal@10", "heuristic_precision@10"):
        assert m("empty", metric) == 0.0, metric
    assert m("empty", "retrievalEmpty") == 1.0 and m("empty", "heuristic_ndcgProxy@10") is None
    assert graph_module.dataset_metrics(empty)["retrievalEmptyCases"] == len(CASES)


def test_judged_headline_orders_the_references_under_a_judge_that_agrees_with_gold(gold_judge_runs):
    """With a judge that answers the gold label (a test double), the judged headline (fixed-ideal
    NDCG, P@10) must order the references as the gold metrics do."""
    for metric in ("ndcgFixedIdeal@10", "precision@10"):
        by = {v: _mean(rs, metric) for v, rs in gold_judge_runs.items()}
        for baseline in ("bm25", "tfidf"):
            assert by["oracle"] >= by[baseline] > by["random"], (metric, by)
            for gamer in GAMING:
                assert by[gamer] < by[baseline], (metric, gamer, by)
    assert graph_module.dataset_metrics(gold_judge_runs["bm25"])["judgeGoldKappa"] == pytest.approx(1.0)


def test_heuristic_judge_cannot_tell_the_oracle_from_bm25_on_the_judged_headline(heuristic_runs):
    """Documented limitation (why the gold NDCG is the headline wherever gold exists): a lexical judge
    shares the lexical retrievers' view, so its fixed-ideal NDCG puts the oracle within 0.03 of bm25
    (test-set-v1, heuristic-tfidf-2: 0.3885 vs 0.3894; heuristic-lexical-1: 0.442 vs 0.448), though it
    still separates bm25 from random. The oracle's extra courses are related topics that share no
    word with the skill (HCI for web development); bm25's are courses that do."""
    for judge, (oracle_at, bm25_at) in {"heuristic-tfidf-2": (0.3885, 0.3894),
                                        "heuristic-lexical-1": (0.4424, 0.4484)}.items():
        runs = heuristic_runs if judge == "heuristic-tfidf-2" else {
            v: _run({**_variants()[v], "heuristic_judge": judge}) for v in ("oracle", "bm25", "random")}
        oracle, bm25, rnd = (_mean(runs[v], "heuristic_ndcgFixedIdeal@10") for v in ("oracle", "bm25", "random"))
        assert (oracle, bm25) == pytest.approx((oracle_at, bm25_at), abs=6e-5), judge
        assert abs(oracle - bm25) < 0.03 and bm25 > rnd + 0.3, judge


def test_injected_disagreeing_judge_lowers_judge_gold_kappa(gold_judge_runs):
    agreeing = graph_module.dataset_metrics(gold_judge_runs["bm25"])
    inverted = graph_module.dataset_metrics(_run(_variants()["bm25"], judge="inverted"))
    assert agreeing["judgeGoldKappa"] == pytest.approx(1.0) and agreeing["judgeGoldKappaQuadratic"] == pytest.approx(1.0)
    assert inverted["judgeGoldKappa"] < 0 and inverted["judgeGoldKappaQuadratic"] < 0
    assert inverted["judgeGoldPairs"] == agreeing["judgeGoldPairs"]


@pytest.mark.parametrize("retriever", ["bm25", "tfidf", "hybrid", "random", "top1", "top1_then_junk", "empty"])
def test_only_the_oracle_reads_the_gold_labels(retriever):
    """Held-out data stays held out: every retriever but the oracle returns the same list when the
    case's gold labels are removed or replaced."""
    p = graph_module.Params(retriever=retriever, judge_cache="off")
    compiled = graph_module.build(p).compile()
    for case in CASES[:5]:
        lists = []
        for gold in (case.gold_relevance, None, {c: 3 for c in CATALOG[:20]}):
            init = {"session_id": case.id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
                    **case.as_state(), "gold_relevance": gold}
            final = compiled.invoke(init, context=graph_module.Context(params=p))
            lists.append([c["subjectCode"] for c in final["retrieved"]])
        assert lists[0] == lists[1] == lists[2], (retriever, case.id)


def test_the_oracle_follows_the_gold_labels():
    base = [{"subjectCode": c, "rank": i} for i, c in enumerate(reversed(CATALOG[:6]), start=1)]
    gold = {CATALOG[0]: 2, CATALOG[1]: 3, CATALOG[2]: 0}            # CATALOG[2] is an explicit trap
    ranking = oracle_ranking(gold, base, CATALOG[:6], 6)
    codes = [r["subjectCode"] for r in ranking]
    assert codes[:2] == [CATALOG[1], CATALOG[0]]                      # by gold label
    assert codes[2:5] == [CATALOG[5], CATALOG[4], CATALOG[3]]         # unlabelled: by base rank
    assert codes[5] == CATALOG[2]                                     # the trap last
    assert [r["rank"] for r in ranking] == [1, 2, 3, 4, 5, 6] and ranking[0]["score"] == 3.0


def test_random_and_junk_references_are_deterministic_and_question_blind():
    a = random_ranking(CATALOG, 10, seed=0, case_id="v1-001")
    assert a == random_ranking(CATALOG, 10, seed=0, case_id="v1-001")
    assert a != random_ranking(CATALOG, 10, seed=0, case_id="v1-002")
    assert len({r["subjectCode"] for r in a}) == 10
    junk = top1_then_junk_ranking([{"subjectCode": CATALOG[3], "rank": 1}], CATALOG, 10)
    assert [r["subjectCode"] for r in junk] == [CATALOG[3]] + [c for c in CATALOG if c != CATALOG[3]][:9]
