"""The run store ``runs/<run_id>/``: one writer appends and flushes ``results.jsonl``.

A run that is stopped and started again skips the sessions whose record has a final status
(ok, agent_failure, simulator_failure). Sessions that ended in ``infra_error`` or ``code_error``
run again: when the run reopens, ``results.jsonl`` is compacted (rewritten atomically) to the last
final record of each session, so after the run every session is in it exactly once. Readers also
take the last record per session (:meth:`RunStore.records`), so a file written by an older
version or cut by a crash mid-resume still reads right. A line cut short by a crash is dropped on
reopening (that session is simply run again). ``errors.jsonl`` keeps every failed attempt.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from . import textio
from .status import FINAL

FINAL_STATUSES = frozenset(s.value for s in FINAL)

RESULTS = "results.jsonl"
FSYNC_EVERY = 64  # records between two fsyncs of results.jsonl ...
FSYNC_SECONDS = 0.5  # ... or seconds, whichever comes first


def unit_key(record: dict) -> tuple[str, str, int]:
    return (str(record["variant"]), str(record["session_id"]), int(record.get("trial", 0)))


def json_default(obj: Any):
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


# one encoder for every line: json.dumps with keyword arguments builds a new one per call
_ENCODER = json.JSONEncoder(default=json_default, ensure_ascii=False)


def dumps(obj: Any) -> str:
    """``json.dumps(obj, default=json_default, ensure_ascii=False)``, the run files' one encoding."""
    return _ENCODER.encode(obj)


def iter_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSONL file, one at a time (streamed; UTF-8 and nesting checked by convsim.textio);
    a bad line is an error naming the file and the line."""
    return textio.iter_jsonl(path)


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSONL file; a bad line is an error naming the file and the line."""
    return textio.read_jsonl(path)


def is_final(record: dict) -> bool:
    return record.get("status", "ok") in FINAL_STATUSES


class RunStore:
    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.results_path = self.dir / RESULTS
        self._fh = None
        self._unsynced, self._synced_at = 0, time.monotonic()
        self._syncer: ThreadPoolExecutor | None = None
        self._syncing: Future | None = None

    def _repair_tail(self) -> None:
        if not self.results_path.exists():
            return
        # read backwards from the end only: the file may hold millions of sessions
        with open(self.results_path, "r+b") as fh:
            end = fh.seek(0, os.SEEK_END)
            if end == 0:
                return
            fh.seek(end - 1)
            if fh.read(1) == b"\n":
                return
            pos = end
            while pos > 0:
                start = max(0, pos - 65536)
                fh.seek(start)
                chunk = fh.read(pos - start)
                nl = chunk.rfind(b"\n")
                if nl != -1:
                    fh.truncate(start + nl + 1)
                    return
                pos = start
            fh.truncate(0)

    def iter_records(self) -> Iterator[dict]:
        """Every line of results.jsonl in file order (a session may appear more than once)."""
        self._repair_tail()
        if self.results_path.exists():
            yield from iter_jsonl(self.results_path)

    def records(self) -> list[dict]:
        """One record per session: the last one written (a re-run replaces the failed attempt)."""
        last: dict[tuple[str, str, int], dict] = {}
        for r in self.iter_records():
            key = unit_key(r)
            last.pop(key, None)  # re-insert so the order is that of the last writes
            last[key] = r
        return list(last.values())

    def done_keys(self) -> set[tuple[str, str, int]]:
        """Sessions not to run again: those whose last record has a final status."""
        last: dict[tuple[str, str, int], bool] = {}
        for r in self.iter_records():
            last[unit_key(r)] = is_final(r)
        return {k for k, final in last.items() if final}

    def compact(self) -> int:
        """Rewrite results.jsonl with the last final record of each session; returns lines dropped.

        Streams twice (no record is held in memory) and replaces the file atomically.
        """
        if not self.results_path.exists():
            return 0
        keep_line: dict[tuple[str, str, int], int] = {}
        total = 0
        for i, r in enumerate(self.iter_records()):
            total += 1
            key = unit_key(r)
            if is_final(r):
                keep_line[key] = i
            else:
                keep_line.pop(key, None)
        keep = set(keep_line.values())
        if len(keep) == total:
            return 0
        tmp = self.results_path.with_suffix(".jsonl.tmp")
        with open(self.results_path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
            i = 0
            for line in src:
                if not line.strip():
                    continue
                if i in keep:
                    dst.write(line)
                i += 1
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.results_path)
        return total - len(keep)

    def open(self) -> "RunStore":
        self.dir.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self.compact()
        self._fh = open(self.results_path, "a", encoding="utf-8")
        return self

    def append(self, record: dict, line: str | None = None) -> None:
        """Write one finished session, flushed to the OS at once (a killed run loses nothing written).
        ``line``: the record already encoded (by the session's worker: the writer only writes it).

        fsync (surviving a power cut too) is batched: every FSYNC_EVERY records or FSYNC_SECONDS,
        and at close; one fsync per record cost ~1.6 ms per session on the event-loop thread, so
        it runs in a background thread (one at a time).
        """
        assert self._fh is not None, "RunStore.open() first"
        self._fh.write((dumps(record) if line is None else line) + "\n")
        self._fh.flush()
        self._unsynced += 1
        if self._unsynced >= FSYNC_EVERY or time.monotonic() - self._synced_at >= FSYNC_SECONDS:
            self._sync()

    def _sync(self) -> None:
        # in a background thread: an fsync waits for the disk (milliseconds), and the writer runs
        # on the event loop that every session in flight needs; the lines are already flushed to
        # the OS, so a killed run loses nothing either way
        if self._syncing is not None and not self._syncing.done():
            return  # one fsync at a time; the next append (or close) syncs these lines
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="convsim-fsync")
        self._unsynced, self._synced_at = 0, time.monotonic()
        self._syncing = self._syncer.submit(os.fsync, self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            if self._syncer is not None:
                self._syncer.shutdown(wait=True)
                self._syncer = self._syncing = None
            if self._unsynced:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.dir / name
        path.write_text(json.dumps(obj, indent=2, default=json_default, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        return path

    def append_error(self, record: dict) -> None:
        with open(self.dir / "errors.jsonl", "a", encoding="utf-8") as fh:
            fh.write(dumps(record) + "\n")

    def repair(self) -> None:
        """Drop a last line cut short by a crash (readers that index the file call this first)."""
        self._repair_tail()
