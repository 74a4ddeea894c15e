"""SQLite files that concurrent sessions, threads and worker processes open at once.

Two course_retrieval sessions opening a fresh relevance-judge cache together could crash one of
them with ``database is locked`` (the WAL switch does not wait for SQLite's busy timeout): a
``code_error`` that CI met about once in a few full runs. Measured before the fix with the loop
below: 16 failures in 300 trials of 8 threads.
"""
import sqlite3
import threading

from convsim.agents.courses.relevance_judge import JudgeCache
from convsim.providers.cache import ResponseCache
from convsim.running.sqlitewal import connect, switch_to_wal


def _open_together(open_one, n_threads: int = 8, trials: int = 120) -> list[str]:
    errors: list[str] = []
    for trial in range(trials):
        barrier = threading.Barrier(n_threads)

        def worker(i: int, trial=trial, barrier=barrier) -> None:
            try:
                barrier.wait()
                open_one(trial, i)
            except Exception as exc:  # noqa: BLE001 — every failure is what the test counts
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return errors


def test_a_fresh_judge_cache_opened_by_many_sessions_at_once(tmp_path):
    def open_one(trial, i):
        cache = JudgeCache(tmp_path / str(trial) / "relevance_judge.sqlite")
        cache.put(f"k{i}", {"score": i % 4})
        assert cache.get(f"k{i}") == {"score": i % 4}

    assert _open_together(open_one) == []


def test_a_fresh_response_cache_opened_by_many_workers_at_once(tmp_path):
    assert _open_together(lambda trial, i: ResponseCache(tmp_path / f"{trial}.sqlite")) == []


def test_one_judge_cache_per_file_and_a_removed_file_is_opened_again(tmp_path):
    path = tmp_path / ".cache" / "relevance_judge.sqlite"
    first = JudgeCache.at(path)
    assert JudgeCache.at(tmp_path / ".cache" / ".." / ".cache" / "relevance_judge.sqlite") is first
    first.put("k", {"score": 2})
    path.unlink()  # a user clears the cache between two runs of one process
    again = JudgeCache.at(path)
    assert again is not first and again.get("k") is None
    again.put("k", {"score": 3})
    assert again.get("k") == {"score": 3}


def test_every_opener_of_a_fresh_file_ends_in_wal_mode(tmp_path):
    # the helper the checkpoint database, the response cache and the judge cache use

    def open_one(trial, i):
        path = tmp_path / f"c{trial}.sqlite"
        with connect(path) as conn:
            switch_to_wal(conn, path)
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()

    assert _open_together(open_one, trials=40) == []
    assert sqlite3.connect(tmp_path / "c0.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_in_memory_response_cache_opens_at_once():
    # ":memory:" answers journal mode "memory": the switch loop waited 30 s for a WAL that never comes
    cache = ResponseCache(":memory:")
    cache.put("k", {"content": "x"})
    assert cache.get("k") == {"content": "x"}
