"""graphs/crs_shift.py through the engine: one session with model none, pairing across CRS
variants, determinism of results.jsonl."""

import json

import pytest
import yaml

import convsim
from convsim import load_graph_module


@pytest.fixture(scope="module")
def graph_module():
    return load_graph_module("crs_shift")


def run_session(module, seed, **params):
    p = module.Params(**params)
    init = next(iter(module.sessions(p, None)))
    ctx = module.Context(params=p, seed=seed, session_id=init["session_id"])
    return module.graph.invoke({**init, "transcript": [], "turn_metrics": [],
                                "dialogue_metrics": {}}, context=ctx)


def test_one_session_with_model_none(graph_module):
    out = run_session(graph_module, seed=3, n_turns=20)
    assert [e["speaker"] for e in out["transcript"]] == ["user", "system"] * 20
    assert [m["turn"] for m in out["turn_metrics"]] == list(range(1, 21))
    for m in out["turn_metrics"]:
        assert set(m) >= {"cc", "cr", "copy_penalty", "tas"}
    dm = out["dialogue_metrics"]
    assert dm["tas_grounded"] is not None and -1 <= dm["tas_grounded"] <= 1
    assert dm["n_shifts"] == sum(m["shift_event"] for m in out["turn_metrics"]) >= 1
    assert len(out["shift_events"]) == dm["n_shifts"]
    assert dm["off_catalog_titles_total"] == 0
    for e in out["transcript"]:
        if e["speaker"] == "system":
            assert len(e["meta"]["rec_ids"]) <= 10
    json.dumps(out)  # the whole state must be JSON-serialisable


def write_config(tmp_path, variants, sessions=4, n_turns=12):
    cfg = {"name": "crs_pairing", "graph": "crs_shift", "params": {"n_turns": n_turns},
           "sessions": sessions, "seed": 5, "concurrency": 2, "trace": False, "analysis": [],
           "models": {"crs": "none", "user": "none"}, "variants": variants}
    path = tmp_path / "crs.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def records(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_pairing_across_crs_variants(tmp_path):
    # two different recommenders: templates naming 2 films vs 1 film with a shorter top-k
    cfg = write_config(tmp_path, [{"name": "two_films", "params": {}},
                                  {"name": "one_film", "params": {"n_mention": 1, "top_k": 3}}])
    run_dir = convsim.run(cfg, out=str(tmp_path / "runs"), run_id="pairing")
    recs = records(run_dir)
    by = {(r["variant"], r["session_id"]): r for r in recs}
    sessions = sorted({r["session_id"] for r in recs})
    differing = 0
    for sid in sessions:
        a, b = by[("two_films", sid)], by[("one_film", sid)]
        assert a["seed"] == b["seed"]
        ua = [e for e in a["transcript"] if e["speaker"] == "user"]
        ub = [e for e in b["transcript"] if e["speaker"] == "user"]
        # identical shift schedules and stage sequences, whatever the system said
        assert [e["meta"]["shift_event"] for e in ua] == [e["meta"]["shift_event"] for e in ub]
        assert [e["meta"]["stage"] for e in ua] == [e["meta"]["stage"] for e in ub]
        reacted = [i for i, (x, y) in enumerate(zip(ua, ub))
                   if x["meta"]["reaction"] or y["meta"]["reaction"]]
        first = reacted[0] if reacted else len(ua)
        assert [e["text"] for e in ua[:first]] == [e["text"] for e in ub[:first]]
        differing += [e["text"] for e in a["transcript"] if e["speaker"] == "system"] != \
            [e["text"] for e in b["transcript"] if e["speaker"] == "system"]
    assert differing > 0, "the two CRS variants must actually answer differently"


def test_same_config_same_results(tmp_path):
    cfg = write_config(tmp_path, [{"name": "template", "params": {}}], sessions=3, n_turns=8)
    keys = ("session_id", "transcript", "turn_metrics", "dialogue_metrics", "seed")
    outs = []
    for run_id in ("a", "b"):
        run_dir = convsim.run(cfg, out=str(tmp_path / "runs"), run_id=run_id)
        outs.append(sorted(({k: r[k] for k in keys} for r in records(run_dir)),
                           key=lambda r: r["session_id"]))
    assert outs[0] == outs[1]


def test_dataset_metrics_pool_over_shifts(graph_module):
    recs = [{"status": "ok", "dialogue_metrics": {"off_catalog_titles_total": 1,
                                                  "recommended_titles_total": 3},
             "dialogue_details": {"recovery": {"shifts": [
                 {"turn": 3, "recovered": True, "delay": 0}]}}},
            {"status": "ok", "dialogue_metrics": {"off_catalog_titles_total": 0,
                                                  "recommended_titles_total": 4},
             "dialogue_details": {"recovery": {"shifts": [
                 {"turn": 3, "recovered": False, "delay": None},
                 {"turn": 5, "recovered": True, "delay": 2},
                 {"turn": 9, "recovered": False, "delay": None}]}}}]
    out = graph_module.dataset_metrics(recs)
    # pooled 2/4, not the mean of per-session rates (1 + 1/3) / 2
    assert out["recovery_rate_pooled"] == 0.5
    assert out["avg_recovery_delay_pooled"] == 1.0
    assert out["off_catalog_titles_total"] == 1
    assert out["off_catalog_rate_pooled"] == pytest.approx(1 / 8)
    assert graph_module.dataset_metrics([])["recovery_rate_pooled"] is None


def test_each_turn_text_is_scanned_once_per_reader(graph_module):
    """The user turn is scanned once (the crs node's concepts are reused by evaluate_turn); the
    system turn of the template recommender (model none) once, by the evaluator (an LLM's answer is
    also scanned by the recommender, titles and title-like spans together)."""
    from collections import Counter

    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.movies.concepts import ConceptExtractor

    scans: Counter = Counter()

    class Counting(ConceptExtractor):
        def _scan(self, text, **kw):
            scans[text] += 1
            return super()._scan(text, **kw)

    p = graph_module.Params(n_turns=4, judge=False, topic_mode="keyword")
    init = next(iter(graph_module.sessions(p, None)))
    ctx = graph_module.Context(params=p, seed=3, session_id=init["session_id"],
                               extractor=Counting(load_movie_catalog()))
    out = graph_module.graph.invoke({**init, "transcript": [], "turn_metrics": [],
                                     "dialogue_metrics": {}}, context=ctx)
    for e in out["transcript"]:
        # (the template recommender with model none knows the films it names: it does not scan its answer)
        assert scans[e["text"]] == 1, e
