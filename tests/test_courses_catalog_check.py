"""Fixed course lists checked against the catalog (evaluation/retrieval/catalog_check.py): a
submitted course whose text differs from its catalog entry is judged on the catalog's text and the
mismatch is counted; the relabelled-list gaming reference gains nothing on any headline metric."""
import yaml

import convsim.graphs.course_retrieval as graph_module
from convsim.catalog.courses import load_courses, load_test_set
from convsim.contract.graphfile import project_root
from convsim.evaluation.gaming import gaming_rows
from convsim.evaluation.retrieval.catalog_check import checked_against_catalog, relabelled_list
from convsim.evaluation.retrieval.gaming_refs import GAMING, HEADLINE

CATALOG = load_courses()


def test_a_relabelled_course_is_judged_on_the_catalog_text_and_counted():
    entry = CATALOG[0]
    honest = {k: entry[k] for k in ("subjectCode", "subjectName", "cleanedLearningOutcomes")}
    fake = {**honest, "subjectName": "Python programming", "cleanedLearningOutcomes": ["Learn Python"]}
    unknown = {"subjectCode": "NOPE999", "subjectName": "Python programming"}
    shown, report = checked_against_catalog([honest, fake, unknown], CATALOG)
    assert shown[1]["subjectName"] == entry["subjectName"]
    assert shown[1]["cleanedLearningOutcomes"] == entry["cleanedLearningOutcomes"]
    assert report["mismatches"] == [{"code": entry["subjectCode"], "rank": 2,
                                     "fields": ["subjectName", "cleanedLearningOutcomes"]}]
    assert report["not_in_catalog"] == ["NOPE999"] and report["checked"] == 3
    # case and spacing are no mismatch
    same = {**honest, "subjectName": "  " + entry["subjectName"].upper()}
    assert checked_against_catalog([same], CATALOG)[1]["mismatches"] == []


def _run(**params):
    p = graph_module.Params(cases="given", judge_cache="off", **params)
    compiled = graph_module.build(p).compile()
    out = []
    for case in [c for c in load_test_set(None).cases if c.retrieved_courses]:
        ctx = graph_module.Context(params=p, models={}, seed=11)
        init = {"session_id": case.id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
                **case.as_state()}
        out.append(compiled.invoke(init, context=ctx)["dialogue_metrics"])
    return out


def test_the_relabelled_list_beats_the_given_lists_on_no_headline_metric():
    given, gamed = _run(), _run(given_list="relabelled")
    assert all(m["catalogMismatches"] == 0 for m in given)
    assert all(m["catalogMismatchRate"] == 1.0 for m in gamed)

    def summary(ms):
        return {"metrics": {k: {"mean": sum(m[k] for m in ms if m.get(k) is not None) / len(ms)}
                            for k in HEADLINE if any(m.get(k) is not None for m in ms)}}
    rows = gaming_rows({"variants": {"given_lists": summary(given), "relabelled_lists": summary(gamed)}},
                       GAMING, HEADLINE)
    assert [r for r in rows if r["beats"] is not None]
    assert not [r for r in rows if r["beats"]], [r for r in rows if r["beats"]]
    by = {r["metric"]: r for r in rows}
    assert by["heuristic_averageRelevance"]["gaming_value"] < by["heuristic_averageRelevance"]["baseline_value"]


def test_the_reference_config_ships_the_fixed_list_gaming_reference():
    cfg = yaml.safe_load((project_root() / "configs" / "courses_reference.yaml").read_text())
    variants = {v["name"]: v["params"] for v in cfg["variants"]}
    assert variants["relabelled_lists"] == {"cases": "given", "given_list": "relabelled"}
    assert variants["given_lists"] == {"cases": "given"}
    assert "convsim.evaluation.retrieval.gaming_refs:write_courses_gaming_check" in cfg["analysis"]


def test_relabelled_list_takes_gold_zero_courses_first():
    gold = {CATALOG[3]["subjectCode"]: 0, CATALOG[4]["subjectCode"]: 3}
    out = relabelled_list(gold, CATALOG, skill="Python programming", question="How?", k=3)
    assert out[0]["subjectCode"] == CATALOG[3]["subjectCode"] and out[0]["subjectName"] == "Python programming"
    assert CATALOG[4]["subjectCode"] not in [c["subjectCode"] for c in out]
