"""The run's writer: pre-encoded lines are written as given; fsync runs off the caller's thread."""
import json
import os
import threading

import convsim.running.store as store_mod
from convsim.running.store import RunStore, dumps


def test_a_pre_encoded_line_is_written_as_is(tmp_path):
    store = RunStore(tmp_path).open()
    rec = {"variant": "v", "session_id": "s1", "trial": 0, "status": "ok", "x": [1, {"é": 2.5}]}
    store.append({"variant": "v", "session_id": "s1", "trial": 0, "status": "ok"}, dumps(rec))
    store.append({"variant": "v", "session_id": "s2", "trial": 0, "status": "ok", "y": 1})
    store.close()
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[0] == json.dumps(rec, ensure_ascii=False)  # the line, not the slim record beside it
    assert [json.loads(x) for x in lines] == RunStore(tmp_path).records()
    assert RunStore(tmp_path).records()[0]["x"] == [1, {"é": 2.5}]


def test_fsync_runs_in_a_background_thread_and_close_syncs_the_tail(tmp_path, monkeypatch):
    calls = []
    real = os.fsync

    def spy(fd):
        calls.append(threading.current_thread().name)
        real(fd)
    monkeypatch.setattr(store_mod.os, "fsync", spy)
    monkeypatch.setattr(store_mod, "FSYNC_EVERY", 3)
    store = RunStore(tmp_path).open()
    for i in range(10):
        store.append({"variant": "v", "session_id": f"s{i}", "trial": 0, "status": "ok"})
    store.close()
    assert calls, "batched fsync never ran"
    background = [name for name in calls if name.startswith("convsim-fsync")]
    assert background and calls[:len(background)] == background  # the batches: never on the caller's thread
    # close syncs what no batch covered yet, on the caller's thread, once at most
    assert calls[len(background):] in ([], [threading.current_thread().name])
    assert len(RunStore(tmp_path).records()) == 10
