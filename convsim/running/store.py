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
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from convsim import textio
from convsim.results.aggregate import record_sort_key
from convsim.errors import ConvsimError
from convsim.results.recordset import RecordSet, check_record
from convsim.running.status import FINAL

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


def _index_key(record: dict) -> tuple[str, str, int]:
    """A record's key as a RecordSet orders it (the variant name interned: few, repeated often)."""
    variant, session, trial = record_sort_key(record)
    return sys.intern(variant), session, trial


def is_final(record: dict) -> bool:
    return record.get("status", "ok") in FINAL_STATUSES


class RunStore:
    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.results_path = self.dir / RESULTS
        self._fh = None
        self._index: dict[tuple[str, str, int], tuple[int, str]] = {}  # key -> (line offset, status)
        self._offset = 0
        self._unsynced, self._synced_at = 0, time.monotonic()
        self._syncer: ThreadPoolExecutor | None = None
        self._syncing: Future | None = None

    def _repair_tail(self) -> None:
        if not self.results_path.exists():
            return
        if not self.results_path.is_file():
            raise ConvsimError("results.jsonl is not a file", file=self.results_path)
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
        """Sessions not to run again: those whose last record has a final status (read from the file;
        an open store answers from its index, :meth:`done`)."""
        self._repair_tail()
        return set(self._final_lines()[0])

    def compact(self) -> int:
        """Rewrite results.jsonl with the last final record of each session; returns lines dropped.

        Streams twice (no record is held in memory) and replaces the file atomically.
        """
        return self._compact_and_index()[1]

    def open(self) -> "RunStore":
        """Repair, compact and index results.jsonl (one checked pass, one rewrite if anything is
        dropped), then append to it. The index (:meth:`record_set`, :meth:`done`) follows every
        line appended, so the end of the run reads no line back to know what it wrote."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._index = self._compact_and_index()[0]
        self._fh = open(self.results_path, "ab")
        self._offset = self.results_path.stat().st_size
        return self

    def _compact_and_index(self) -> tuple[dict[tuple[str, str, int], tuple[int, str]], int]:
        """:meth:`compact`, and the byte offset and status of each kept session's line, in one checked
        pass (plus the rewrite when lines are dropped); returns the index and the lines dropped."""
        keep, total = self._final_lines()
        if len(keep) == total:
            return keep, 0
        kept_at = {offset: key for key, (offset, _) in keep.items()}
        index: dict[tuple[str, str, int], tuple[int, str]] = {}
        tmp = self.results_path.with_suffix(".jsonl.tmp")
        with open(self.results_path, "rb") as src, open(tmp, "wb") as dst:
            offset = written = 0
            for raw in src:
                start, offset = offset, offset + len(raw)
                if start in kept_at:
                    key = kept_at[start]
                    index[key] = (written, keep[key][1])
                    dst.write(raw)
                    written += len(raw)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.results_path)
        return index, total - len(keep)

    def _final_lines(self) -> tuple[dict[tuple[str, str, int], tuple[int, str]], int]:
        """One checked pass: each session whose last record is final, with that line's byte offset and
        status (in the order of the last writes), and the number of lines."""
        keep: dict[tuple[str, str, int], tuple[int, str]] = {}
        total = 0
        if not self.results_path.exists():
            return keep, total
        for offset, lineno, rec in textio.iter_jsonl_at(self.results_path, what="results"):
            check_record(rec, file=self.results_path, record=f"line {lineno}")  # what resuming and the summary read
            key = _index_key(rec)
            keep.pop(key, None)  # a final record is re-inserted: the order is that of the last writes
            if is_final(rec):
                keep[key] = (offset, sys.intern(str(rec.get("status", "ok"))))
            total += 1
        return keep, total

    def done(self) -> set[tuple[str, str, int]]:
        """The sessions of the open store not to run again (its index: final statuses only)."""
        return {key for key, (_, status) in self._index.items() if status in FINAL_STATUSES}

    def record_set(self) -> RecordSet:
        """The open (or just closed) store's records as a RecordSet, from its index: no line read."""
        return RecordSet(self.results_path, sorted((k, off, st) for k, (off, st) in self._index.items()))

    def append(self, record: dict, line: str | None = None) -> None:
        """Write one finished session, flushed to the OS at once (a killed run loses nothing written).
        ``line``: the record already encoded (by the session's worker: the writer only writes it).

        fsync (surviving a power cut too) is batched: every FSYNC_EVERY records or FSYNC_SECONDS,
        and at close; one fsync per record cost ~1.6 ms per session on the event-loop thread, so
        it runs in a background thread (one at a time).
        """
        assert self._fh is not None, "RunStore.open() first"
        # a lone surrogate (a model's "\\ud800" parsed into the state) can only sit inside a JSON
        # string: written as its escape, the line stays valid JSON and reads back the same
        data = ((dumps(record) if line is None else line) + "\n").encode("utf-8", "backslashreplace")
        self._fh.write(data)
        self._fh.flush()
        self._index.pop(key := _index_key(record), None)
        self._index[key] = (self._offset, sys.intern(str(record.get("status", "ok"))))
        self._offset += len(data)
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
        text = json.dumps(obj, indent=2, default=json_default, ensure_ascii=False) + "\n"
        return textio.write_atomic(self.dir / name, text)  # a killed run never leaves a cut summary

    def append_error(self, record: dict) -> None:
        with open(self.dir / "errors.jsonl", "a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(dumps(record) + "\n")

    def repair(self) -> None:
        """Drop a last line cut short by a crash (readers that index the file call this first)."""
        self._repair_tail()
