"""summary.json and stats.json depend on what happened, never on the order sessions finished in:
not on record order, executor, concurrency or PYTHONHASHSEED."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from convsim.results.summary import summarise_run
from convsim.evaluation.reporting.compare import compare_runs
from convsim.evaluation.reporting.records import load_run
from convsim.evaluation.reporting.run_stats import run_statistics

ROOT = Path(__file__).resolve().parents[1]


def _records(n=40):
    rng = np.random.default_rng(4)
    out = []
    for v in ("beta", "alpha", "gamma"):
        for i in range(n):
            out.append({"variant": v, "session_id": f"s{i}", "trial": 0, "seed": i, "status": "ok",
                        "dialogue_metrics": {"tas": float(rng.normal(0.5, 0.2)), "turns": int(rng.integers(2, 9)),
                                             "judge_quality": float(rng.integers(1, 6))}})
    return out


def _write(run_dir: Path, records) -> Path:
    run_dir.mkdir(parents=True)
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return run_dir


def test_shuffled_records_give_identical_summary_stats_and_compare(tmp_path):
    recs = _records()
    shuffled = recs[:]
    random.Random(1).shuffle(shuffled)
    module = SimpleNamespace(dataset_metrics=lambda ok: {"n_sessions": len(ok),
                                                         "first": ok[0]["session_id"] if ok else None})
    a, b = _write(tmp_path / "a", recs), _write(tmp_path / "b", shuffled)
    summarise_run(a, module)
    summarise_run(b, module)
    assert (a / "summary.json").read_bytes() == (b / "summary.json").read_bytes()
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()
    sa = json.dumps(run_statistics(load_run(a).ok_records))
    sb = json.dumps(run_statistics(load_run(b).ok_records))
    assert sa == sb
    assert json.dumps(run_statistics(shuffled)) == sa  # also without load_run's sort
    other = [dict(r, dialogue_metrics={k: v + 0.1 for k, v in r["dialogue_metrics"].items()}) for r in recs]
    c = _write(tmp_path / "c", other)
    d = _write(tmp_path / "d", list(reversed(other)))
    rows_ac, rows_bd = compare_runs(a, c)["rows"], compare_runs(b, d)["rows"]
    assert rows_ac and json.dumps(rows_ac) == json.dumps(rows_bd)


CONFIG = """\
name: det
graph: crs_shift
params: {n_turns: 3, first_shift_turn: 2}
sessions: 3
seed: 3
models: {crs: none, user: none, judge: none}
variants:
  - {name: two_films, params: {n_mention: 2}}
  - {name: one_film, params: {n_mention: 1}}
"""


def _run(tmp_path, run_id, *args, hashseed="0"):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=hashseed)
    proc = subprocess.run([sys.executable, "-m", "convsim", "run", str(tmp_path / "det.yaml"), "--out",
                           str(tmp_path / "runs"), "--run-id", run_id, "-q", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = tmp_path / "runs" / run_id
    return (run_dir / "summary.json").read_bytes(), (run_dir / "stats.json").read_bytes()


@pytest.mark.slow
def test_executors_concurrency_and_hash_seed_give_identical_files(tmp_path):
    (tmp_path / "det.yaml").write_text(CONFIG, encoding="utf-8")
    one = _run(tmp_path, "c1", "--concurrency", "1")
    eight = _run(tmp_path, "c8", "--concurrency", "8", hashseed="12345")
    process = _run(tmp_path, "proc", "--executor", "process", "--workers", "2", hashseed="777")
    assert json.loads(one[1])["n_records"] == 6
    assert one == eight == process


PROBE = """
import json
from convsim.agents.courses.retrievers import BM25Retriever
from convsim.catalog.courses import load_courses
from convsim.evaluation.crs.topics import KeywordTopics
movies = [{"genre": ["Drama", "War"], "plot": "a soldier and a nurse in a war"},
          {"genre": ["Comedy"], "plot": "a nurse and a dog"}, {"genre": ["Horror"], "plot": "a dog in a house"}]
courses = load_courses(None)[:40] + [{"subjectCode": f"X{i}", "subjectName": "common words everywhere",
                                      "cleanedLearningOutcomes": ["common words"]} for i in range(60)]
bm25 = BM25Retriever(courses)
keywords = sorted(KeywordTopics.from_catalog(movies, n_plot_words=3).keywords)
print(json.dumps({"floor": repr(min(bm25.idf.values())), "keywords": keywords}))
"""


@pytest.mark.parametrize("hashseed", ["1", "2", "3"])
def test_corpus_statistics_built_from_sets_do_not_follow_string_hashing(hashseed):
    # BM25's IDF floor summed IDFs in set order, and the keyword topics broke frequency ties in set
    # order: both follow PYTHONHASHSEED unless ordered (fsum; ties by word, genres sorted)
    def probe(seed):
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)
    assert probe(hashseed) == probe("0")
