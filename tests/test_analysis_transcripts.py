"""convsim eval (convsim.evaluation.reporting.transcripts), compare_runs and topic extraction."""

import json
from pathlib import Path

import pytest

from analysis_runs import make_run
from convsim import ConvsimError
from convsim.evaluation.reporting.compare import compare_runs
from convsim.evaluation.crs.topics import KeywordTopics, LdaTopics, lda_for_run
from convsim.evaluation.reporting.transcripts import evaluate_transcripts, read_transcripts

EXTERNAL = [
    {"session_id": "d1", "variant": "ext", "turns": [
        {"speaker": "user", "text": "I'm in the mood for a war movie.",
         "user_meta": {"focus_field": "genre", "focus_value": "War", "constraints": {"genre": "War"},
                       "shift_event": False}},
        {"speaker": "system", "text": "Try Saving Private Ryan, a war film.", "top_k": ["m1", "m2"]},
        {"speaker": "user", "text": "How about films starring Tom Hanks instead?",
         "user_meta": {"focus_field": "actor", "focus_value": "Tom Hanks",
                       "constraints": {"genre": "War", "actor": "Tom Hanks"}, "shift_event": True}},
        {"speaker": "assistant", "text": "Cast Away stars Tom Hanks.", "top_k": ["m3"]}]},
    {"turns": [{"speaker": "user", "text": "hi"}, {"speaker": "system", "text": "hello"}]},
]


def _write(tmp_path, rows, name="ext.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def test_import_format_is_converted(tmp_path):
    recs = read_transcripts(_write(tmp_path, EXTERNAL))
    assert [r["session_id"] for r in recs] == ["d1", "line2"]
    tr = recs[0]["transcript"]
    assert [t["turn"] for t in tr] == [1, 1, 2, 2]
    assert tr[3]["speaker"] == "system" and tr[3]["meta"] == {"rec_ids": ["m3"]}
    assert tr[2]["meta"]["shift_event"] is True and tr[2]["meta"]["turn"] == 2


@pytest.mark.parametrize("bad,field", [
    ({"turns": [{"speaker": "bot", "text": "x"}]}, "turns[0].speaker"),
    ({"turns": [{"speaker": "user", "text": 3}]}, "turns[0].text"),
    ({"turns": [{"speaker": "system", "text": "x"}]}, "turns[0].speaker"),
    ({"turns": [{"speaker": "user", "text": "x", "user_meta": []}]}, "turns[0].user_meta"),
    ({"turns": []}, "turns"),
])
def test_bad_records_name_the_line_and_field(tmp_path, bad, field):
    path = _write(tmp_path, [EXTERNAL[1], bad])
    with pytest.raises(ConvsimError) as err:
        read_transcripts(path)
    assert err.value.record == "line 2" and err.value.field == field


def test_bad_json_line_names_the_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(EXTERNAL[1]) + "\n{not json\n")
    with pytest.raises(ConvsimError) as err:
        read_transcripts(p)
    assert err.value.record == "line 2"


@pytest.mark.slow
def test_evaluate_external_transcripts_with_the_crs_graph(tmp_path):
    out = evaluate_transcripts(_write(tmp_path, EXTERNAL), out=tmp_path / "run",
                               params={"topic_mode": "keyword"}, analyze=False)
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    d1 = rows[0]["dialogue_metrics"]
    assert rows[0]["variant"] == "ext" and len(rows[0]["turn_metrics"]) == 2
    assert d1["tas_cas_shift_source"] == "simulator" and d1["tas_cas_n_shifts"] == 1
    assert d1["judge_heuristic"] == 1 and d1["tas_grounded"] is not None
    assert rows[1]["dialogue_metrics"]["tas_cas_shift_source"] == "detector"
    assert (out / "metrics.csv").exists()


def test_compare_runs_pairs_matching_sessions(tmp_path):
    a = make_run(tmp_path / "a", variants=("x", "y"), sessions=10, seed=1)
    b = make_run(tmp_path / "b", variants=("x", "y"), sessions=10, seed=2)
    res = compare_runs(a, b)
    rows = {(r["variant_a"], r["metric"]): r for r in res["rows"]}
    row = rows[("x", "tas_cas")]
    assert row["test"] == "paired Wilcoxon" and row["n_paired"] == 10
    assert row["ci_low"] <= row["diff"] <= row["ci_high"]
    assert row["diff"] == pytest.approx(row["mean_b"] - row["mean_a"])
    assert ("x", "judge_failed") not in rows and all("p_holm" in r for r in res["rows"])


def test_compare_runs_without_shared_variants_fails_clearly(tmp_path):
    a = make_run(tmp_path / "a", variants=("x", "y"), sessions=3)
    b = make_run(tmp_path / "b", variants=("p", "q"), sessions=3)
    with pytest.raises(ConvsimError):
        compare_runs(a, b)


DOCS = ["a soldier fights in the war against the enemy army"] * 5 + \
       ["two lovers fall in love and marry after a romance"] * 5 + \
       ["the detective solves a murder crime in the city"] * 5 + \
       ["a chef cooks food in the kitchen of a restaurant"] * 5


def test_lda_is_saved_with_the_run_and_reloaded(tmp_path):
    m = lda_for_run(DOCS, tmp_path, n_topics=4, seed=1)
    assert (tmp_path / "topics_lda.joblib").exists()
    again = lda_for_run(DOCS, tmp_path, n_topics=4, seed=1)
    assert again is not m  # reloaded from the file
    assert again.topics("the war army") == m.topics("the war army")
    assert m.topics("who stars in it?") == frozenset()  # no in-vocabulary word: no topic
    assert "war" in m.topics("a war with the army and the enemy soldier")
    assert isinstance(again, LdaTopics)


def test_keyword_topics_use_word_boundaries():
    kw = KeywordTopics(["war", "science fiction", "love"])
    assert kw.topics("I want a science fiction war movie") == {"war", "science fiction"}
    assert kw.topics("award winning lovely software") == frozenset()


@pytest.mark.slow
def test_eval_of_a_runs_own_results_reproduces_its_metrics(tmp_path):
    import convsim
    from convsim import load_config
    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "crs_models_demo.yaml").model_copy(update={
        "params": {"n_turns": 4, "n_sessions": 2, "first_shift_turn": 2, "topic_mode": "keyword"},
        "sessions": 2, "variants": [], "trace": False, "analysis": [], "out_dir": str(tmp_path)})
    run_dir = convsim.run(cfg, analyze=False)
    out = evaluate_transcripts(run_dir / "results.jsonl", out=tmp_path / "re",
                               params={"n_turns": 4, "topic_mode": "keyword"}, analyze=False)
    before = {r["session_id"]: r["dialogue_metrics"] for r in map(json.loads, (run_dir / "results.jsonl").open())}
    after = {r["session_id"]: r["dialogue_metrics"] for r in map(json.loads, (out / "results.jsonl").open())}
    assert before.keys() == after.keys() and len(before) == 2
    for sid in before:
        assert after[sid] == before[sid]


def test_processes_sharing_a_run_directory_train_the_topic_model_once(tmp_path):
    """Process and Ray workers start together: the first trains and saves, the others load."""
    import multiprocessing
    import os

    import convsim.evaluation.crs.topics as topics
    trained = tmp_path / "trained.txt"
    real = topics.LdaTopics.train

    def counting_train(*args, **kwargs):
        with open(trained, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    def worker(run_dir, out):
        topics.LdaTopics.train = counting_train  # in the child only
        model = lda_for_run(DOCS, run_dir, n_topics=4, seed=1)
        out.put(sorted(model.topics("the war army")))

    topics._trained.cache_clear()  # an earlier test of this process may have trained on DOCS
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    run_dir = tmp_path / "run"
    procs = [ctx.Process(target=worker, args=(run_dir, out)) for _ in range(3)]
    for p in procs:
        p.start()
    answers = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(trained.read_text().split()) == 1  # without the lock: one training per process
    assert answers[0] == answers[1] == answers[2]
