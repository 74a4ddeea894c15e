"""The heuristic judges against gold labels (agents/courses/judge_gold.py): the judge never reads
gold, and its agreement on the development set (test-set-v1) and the held-out set (test-set-v2) is
pinned, so a change of tokenizer, catalog or rule shows here. The figures are deterministic; the
tolerance only absorbs float noise. See docs/course_retrieval.md, "The heuristic judge"."""
from __future__ import annotations

import dataclasses

import pytest

import convsim
from convsim.agents.courses.relevance_judge import HEURISTIC_JUDGES
from convsim.catalog.courses import load_test_set
from convsim.agents.courses.judge_gold import agreement, judged_items

graph_module = convsim.load_graph_module("course_retrieval")

# (judge, test set) -> {items: (n, kappa, quadratic kappa, agreement on relevant >= 2)}
PINNED = {
    ("heuristic-tfidf-2", "test-set-v1"): {"labelled": (264, 0.356, 0.681, 0.818), "pool": (625, 0.494, 0.800, 0.912)},
    ("heuristic-lexical-1", "test-set-v1"): {"labelled": (264, 0.210, 0.579, 0.754), "pool": (625, 0.134, 0.540, 0.834)},
    # held out: scored once, after the tfidf judge was fixed on test-set-v1
    ("heuristic-tfidf-2", "test-set-v2"): {"labelled": (61, 0.321, 0.530, 0.754), "pool": (156, 0.429, 0.647, 0.846)},
    ("heuristic-lexical-1", "test-set-v2"): {"labelled": (61, 0.348, 0.376, 0.721), "pool": (156, 0.269, 0.420, 0.782)},
}


@pytest.mark.parametrize("judge,test_set", sorted(PINNED))
def test_judge_gold_agreement_is_pinned(judge, test_set):
    got = agreement(judged_items(test_set, heuristic=judge))
    for items, (n, kappa, kappa_q, relevant) in PINNED[(judge, test_set)].items():
        a = got[items]
        assert a["n"] == n, items
        assert (a["kappa"], a["kappaQuadratic"], a["relevantAgreement"]) == pytest.approx(
            (kappa, kappa_q, relevant), abs=6e-4), items


def test_the_tfidf_judge_beats_the_lexical_one_on_the_held_out_pool():
    """The decision rule fixed while tuning on test-set-v1 (the mean of the labelled and the pool kappa)
    favours heuristic-tfidf-2 on test-set-v2 too, which is why it is the default. On the labelled
    courses alone the unweighted kappa is 0.321 vs 0.348 (a case bootstrap puts the difference at
    -0.03 [-0.18, 0.11]); see the docs."""
    def objective(judge):
        a = agreement(judged_items("test-set-v2", heuristic=judge))
        return (a["labelled"]["kappa"] + a["pool"]["kappa"]) / 2
    assert objective("heuristic-tfidf-2") > objective("heuristic-lexical-1") + 0.05


def test_every_heuristic_judge_is_a_graph_setting():
    field = graph_module.Params.model_fields["heuristic_judge"]
    assert set(field.annotation.__args__) == set(HEURISTIC_JUDGES) and field.default == "heuristic-tfidf-2"


@pytest.mark.parametrize("judge", HEURISTIC_JUDGES)
def test_the_judge_never_reads_gold(judge):
    """Replacing every gold label (same codes, other values) or dropping the labels changes no judgement,
    in the graph and in judge_gold (which reads the labels only after the judge has scored)."""
    cases = [c for c in load_test_set().cases if not c.retrieved_courses][:6]
    p = graph_module.Params(retriever="bm25", judge_cache="off", heuristic_judge=judge)
    compiled = graph_module.build(p).compile()
    for case in cases:
        judged = []
        for gold in (case.gold_relevance, {c: 3 - g for c, g in case.gold_relevance.items()}, None):
            init = {"session_id": case.id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
                    **case.as_state(), "gold_relevance": gold}
            final = compiled.invoke(init, context=graph_module.Context(params=p))
            judged.append([(j["code"], j["score"], j["reason"], j["promptVersion"]) for j in final["judgements"]])
        assert judged[0] == judged[1] == judged[2] and judged[0][0][3] == judge, case.id
    flipped = [dataclasses.replace(c, gold_relevance={k: 3 - g for k, g in c.gold_relevance.items()}) for c in cases]
    test_set = load_test_set()
    before = judged_items(dataclasses.replace(test_set, cases=cases), heuristic=judge)
    after = judged_items(dataclasses.replace(test_set, cases=flipped), heuristic=judge)
    assert [(i["code"], i["judged"]) for i in before] == [(i["code"], i["judged"]) for i in after]
    assert [i["gold"] for i in before] != [i["gold"] for i in after]


def test_the_graph_shows_the_judge_the_catalog_description_and_records_the_version():
    """The judge reads the description (the records keep name and outcomes only); the dataset names the
    judge version, so runs of two heuristics are not read as one."""
    case = next(c for c in load_test_set().cases if c.id == "v1-012")   # entrepreneurship
    records = []
    for judge in HEURISTIC_JUDGES:
        p = graph_module.Params(retriever="bm25", judge_cache="off", heuristic_judge=judge)
        init = {"session_id": case.id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}, **case.as_state()}
        final = graph_module.build(p).compile().invoke(init, context=graph_module.Context(params=p))
        assert not any("description" in c for c in final["retrieved"])
        records.append({**final, "trial": 0})
        assert graph_module.dataset_metrics([records[-1]])["judgeVersion"] == judge
    assert graph_module.dataset_metrics(records)["judgeVersion"] == "heuristic-lexical-1,heuristic-tfidf-2"
    # BUS205 New Venture Creation: "Builds on BUS102 Entrepreneurship and Innovation" is in its description only
    tfidf = {j["code"]: j for j in records[0]["judgements"]}
    assert "BUS205" in tfidf and tfidf["BUS205"]["score"] >= 2 and "sentence 1.000" in tfidf["BUS205"]["reason"]
