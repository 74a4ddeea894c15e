"""The run store ``runs/<run_id>/``: one writer appends and flushes ``results.jsonl``.

A run that is stopped and started again reads the records it already has and skips
those sessions. A line cut short by a crash is dropped on reopening (that session is
simply run again), so a restarted run holds each session exactly once.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .errors import ConvsimError

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


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=json_default, ensure_ascii=False)


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSONL file; a bad line is an error naming the file and the line."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                raise ConvsimError("line is not valid JSON", file=path, record=f"line {lineno}") from None
            if not isinstance(rec, dict):
                raise ConvsimError("line is not a JSON object", file=path, record=f"line {lineno}")
            out.append(rec)
    return out


class RunStore:
    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        self.results_path = self.dir / RESULTS
        self._fh = None
        self._unsynced, self._synced_at = 0, time.monotonic()

    def _repair_tail(self) -> None:
        if not self.results_path.exists():
            return
        data = self.results_path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.results_path, "r+b") as fh:
                fh.truncate(cut)

    def records(self) -> list[dict]:
        self._repair_tail()
        if not self.results_path.exists():
            return []
        return read_jsonl(self.results_path)

    def done_keys(self) -> set[tuple[str, str, int]]:
        return {unit_key(r) for r in self.records()}

    def open(self) -> "RunStore":
        self.dir.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._fh = open(self.results_path, "a", encoding="utf-8")
        return self

    def append(self, record: dict) -> None:
        """Write one finished session, flushed to the OS at once (a killed run loses nothing written).

        fsync (surviving a power cut too) is batched: every FSYNC_EVERY records or FSYNC_SECONDS,
        and at close; one fsync per record cost ~1.6 ms per session on the event-loop thread.
        """
        assert self._fh is not None, "RunStore.open() first"
        self._fh.write(dumps(record) + "\n")
        self._fh.flush()
        self._unsynced += 1
        if self._unsynced >= FSYNC_EVERY or time.monotonic() - self._synced_at >= FSYNC_SECONDS:
            self._sync()

    def _sync(self) -> None:
        os.fsync(self._fh.fileno())
        self._unsynced, self._synced_at = 0, time.monotonic()

    def close(self) -> None:
        if self._fh is not None:
            if self._unsynced:
                self._sync()
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
