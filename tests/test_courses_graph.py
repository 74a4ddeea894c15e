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
    # the heuristic judge's figures carry its name; the gold-label ones do not depend on the judge
    assert "ndcg@10" not in m and "precision@10" not in m
    assert m["totalCourses"] == 8 and 0 <= m["heuristic_ndcg@10"] <= 1 and m["judgeFailed"] is False
    assert m["heuristic_precision@10"] == pytest.approx(sum(j["score"] >= 2 for j in final["judgements"]) / 10)
    assert m["recall@10"] is not None and m["mrr"] is not None      # the case has gold labels
    assert [t["speaker"] for t in final["transcript"]] == ["user", "retriever"]


def test_a_case_with_retrieved_courses_is_judged_as_it_is():
    case = CASES["v1-051"]
    final = _run("v1-051", params=graph_module.Params(retriever="tfidf", cases="given"))
    assert final["retriever"] == "given"
    assert [j["code"] for j in final["judgements"]] == [c["subjectCode"] for c in case.retrieved_courses]


def test_the_original_precision_is_only_a_labelled_option():
    final = _run("v1-051", params=graph_module.Params(precision_over_returned=True, cases="given"))
    m = final["dialogue_metrics"]
    hits = sum(j["score"] >= 2 for j in final["judgements"])
    assert m["heuristic_precision@10"] == pytest.approx(hits / 10)
    assert m["heuristic_precisionOverReturned@10"] == pytest.approx(hits / 5)
    assert "heuristic_precisionOverReturned@10" not in _run("v1-051", params=graph_module.Params(
        cases="given"))["dialogue_metrics"]


def test_model_judge_through_the_graph_uses_the_disk_cache(tmp_path):
    run_dir = tmp_path / "runs" / "first"
    first = scripted(good_answer)
    a = _run("v1-003", models={"judge": first}, run_dir=str(run_dir))
    second = scripted(good_answer)
    b = _run("v1-003", models={"judge": second}, run_dir=str(tmp_path / "runs" / "second"))
    assert len(first.calls) == 1 and second.calls == []
    assert b["judge_cached"] and not a["judge_cached"] and "judgeCachedScores" not in b["dialogue_metrics"]
    assert [j["score"] for j in a["judgements"]] == [j["score"] for j in b["judgements"]]
    assert (tmp_path / "runs" / ".cache" / "relevance_judge.sqlite").exists()


def test_a_failed_judge_leaves_metrics_out_not_zero():
    bad = scripted(lambda codes: json.dumps({"evaluations": [{"code": c, "score": 4} for c in codes]}))
    final = _run("v1-003", models={"judge": bad}, params=graph_module.Params(judge_retries=0))
    m = final["dialogue_metrics"]
    assert m["judgeFailed"] is True and not any("ndcg@10" in k or "averageRelevance" in k for k in m)
    assert final["judge_failures"][0]["raw"].startswith('{"evaluations"')
    assert graph_module.dataset_metrics([{**final, "trial": 0}])["judgeFailureRate"] == 1.0


def test_a_model_judge_names_its_metrics_plainly():
    final = _run("v1-003", models={"judge": scripted(good_answer)})
    m = final["dialogue_metrics"]
    assert "ndcg@10" in m and not any(k.startswith("heuristic_") for k in m)


@pytest.mark.slow
def test_engine_run_of_every_retriever_with_fixed_lists_apart(tmp_path):
    cfg = yaml.safe_load(open(convsim.graphfile.project_root() / "configs" / "courses.yaml"))
    cfg.update(sessions=4, out_dir=str(tmp_path), run_id="courses_test", analysis=[], trials=2)
    if not convsim.embeddings_available():
        cfg["variants"] = [v for v in cfg["variants"] if v["name"] != "embedding"]
    path = tmp_path / "courses.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_dir = convsim.run(str(path))
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]
    retrievers = {"tfidf", "bm25", "hybrid"} | ({"embedding"} if convsim.embeddings_available() else set())
    assert set(summary) == retrievers | {"given_lists"}
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    given_ids = {c.id for c in CASES.values() if c.retrieved_courses}
    for r in records:   # fixed-list cases never enter a retriever's mean, and only they are in given_lists
        assert (r["session_id"] in given_ids) == (r["variant"] == "given_lists"), (r["variant"], r["session_id"])
    for name in retrievers:
        assert summary[name]["n"] == 8 and summary[name]["errors"] == 0
        dataset = summary[name]["dataset"]
        assert dataset["heuristic_ndcg@10Band"].split(" / ")[0] in ("Excellent", "Good", "Fair", "Poor")
        assert dataset["judgeKind"] == "heuristic" and dataset["iterations"] == 2
        assert dataset["labelStabilityAcrossIterations"] == 1.0      # the heuristic is deterministic
        assert dataset["judgeGoldConfusion"].startswith("judge\\gold 0-3: j0: ")
        assert summary[name]["metrics"]["ndcgGold@10"]["n"] == 8
    assert summary["given_lists"]["n"] == 2 * len(given_ids)
