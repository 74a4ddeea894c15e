"""The course_retrieval graph: one case end to end, fixed lists judged as they are, the engine run."""
from __future__ import annotations

import json

import pytest
import yaml

import convsim
from catalog.courses import load_test_set
from test_courses_judge import good_answer, scripted

graph_module = convsim.load_graph_module("course_retrieval")
CASES = {c.id: c for c in load_test_set().cases}


def _run(case_id: str, **ctx_kwargs) -> dict:
    params = ctx_kwargs.pop("params", graph_module.Params())
    ctx = graph_module.Context(params=params, **ctx_kwargs)
    init = {"session_id": case_id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
            **CASES[case_id].as_state()}
    return graph_module.build(params).compile().invoke(init, context=ctx)


def test_one_case_with_model_none_is_retrieved_judged_and_scored():
    final = _run("v1-002", params=graph_module.Params(retriever="bm25", k=8))
    assert final["retriever"] == "bm25" and len(final["retrieved"]) == 8
    assert [j["judge"] for j in final["judgements"]] == ["heuristic"] * 8
    m = final["dialogue_metrics"]
    assert m["totalCourses"] == 8 and 0 <= m["ndcg@10"] <= 1 and m["judgeFailed"] is False
    assert m["precision@10"] == pytest.approx(sum(j["score"] >= 2 for j in final["judgements"]) / 10)
    assert m["recall@10"] is not None and m["mrr"] is not None      # the case has gold labels
    assert [t["speaker"] for t in final["transcript"]] == ["user", "retriever"]


def test_a_case_with_retrieved_courses_is_judged_as_it_is():
    case = CASES["v1-051"]
    final = _run("v1-051", params=graph_module.Params(retriever="tfidf"))
    assert final["retriever"] == "given"
    assert [j["code"] for j in final["judgements"]] == [c["subjectCode"] for c in case.retrieved_courses]


def test_the_original_precision_is_only_a_labelled_option():
    final = _run("v1-051", params=graph_module.Params(precision_over_returned=True))
    m = final["dialogue_metrics"]
    hits = sum(j["score"] >= 2 for j in final["judgements"])
    assert m["precision@10"] == pytest.approx(hits / 10)
    assert m["precisionOverReturned@10"] == pytest.approx(hits / 5)
    assert "precisionOverReturned@10" not in _run("v1-051")["dialogue_metrics"]


def test_model_judge_through_the_graph_uses_the_disk_cache(tmp_path):
    run_dir = tmp_path / "runs" / "first"
    first = scripted(good_answer)
    a = _run("v1-003", models={"judge": first}, run_dir=str(run_dir))
    second = scripted(good_answer)
    b = _run("v1-003", models={"judge": second}, run_dir=str(tmp_path / "runs" / "second"))
    assert len(first.calls) == 1 and second.calls == []
    assert b["dialogue_metrics"]["judgeCachedScores"] == 10
    assert [j["score"] for j in a["judgements"]] == [j["score"] for j in b["judgements"]]
    assert (tmp_path / "runs" / ".cache" / "relevance_judge.sqlite").exists()


def test_a_failed_judge_leaves_metrics_out_not_zero():
    bad = scripted(lambda codes: json.dumps({"evaluations": [{"code": c, "score": 4} for c in codes]}))
    final = _run("v1-003", models={"judge": bad}, params=graph_module.Params(judge_retries=0))
    m = final["dialogue_metrics"]
    assert m["judgeFailed"] is True and "ndcg@10" not in m and "averageRelevance" not in m
    assert final["judge_failures"][0]["raw"].startswith('{"evaluations"')
    assert graph_module.dataset_metrics([{**final, "trial": 0}])["judgeFailureRate"] == 1.0


@pytest.mark.slow
def test_engine_run_of_every_retriever_with_bands_and_skip_reason(tmp_path):
    cfg = yaml.safe_load(open(convsim.graphfile.project_root() / "configs" / "courses.yaml"))
    cfg.update(sessions=4, out_dir=str(tmp_path), run_id="courses_test", analysis=[], trials=2)
    path = tmp_path / "courses.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_dir = convsim.run(str(path))
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]
    assert set(summary) == {"tfidf", "bm25", "embedding", "hybrid"}
    for name in ("tfidf", "bm25", "hybrid"):
        assert summary[name]["n"] == 8 and summary[name]["errors"] == 0
        dataset = summary[name]["dataset"]
        assert dataset["ndcg@10Band"].split(" / ")[0] in ("Excellent", "Good", "Fair", "Poor")
        assert dataset["judgeKind"] == "heuristic" and dataset["iterations"] == 2
        assert dataset["labelStabilityAcrossIterations"] == 1.0      # the heuristic is deterministic
        assert summary[name]["metrics"]["ndcgGold@10"]["n"] == 8
    if not convsim.embeddings_available():
        assert "embeddings extra" in summary["embedding"]["dataset"]["skipReason"]
