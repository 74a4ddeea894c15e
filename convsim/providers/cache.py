"""A response cache on SQLite, keyed by model settings, messages and call options.

With ``cache: <path>`` in a config, every chat call first looks here; a re-run from a
warm cache reproduces a run exactly and calls no model. Hits are marked in ``llm_calls``.

In a run, the key also holds the session (variant, session id, trial) and how often that session
sent the same request before: a session only reads what an earlier run of the same session
stored. Keyed by the request alone, two sessions sending the same prompt shared one answer, and
which of them was the "hit" (and, for a sampling model, whose sample both got) depended on which
ran first, so the executor's scheduling changed the records.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from convsim.running.sqlitewal import connect, switch_to_wal


class ResponseCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # every worker process of a run opens it: the WAL switch waits out the others
        self._conn = connect(self.path, check_same_thread=False)
        switch_to_wal(self._conn, self.path, what="response cache")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._conn.commit()

    @staticmethod
    def key(settings: dict, messages: list, kwargs: dict) -> str:
        payload = {"settings": settings, "kwargs": kwargs,
                   "messages": [(getattr(m, "type", "?"), str(getattr(m, "content", m))) for m in messages]}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    @staticmethod
    def scoped(key: str, scope: str) -> str:
        """``key`` for one session's ``scope`` (see ``ChatModel.cache_scope``)."""
        return hashlib.sha256(f"{key}|{scope}".encode()).hexdigest()

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)",
                               (key, json.dumps(value, default=str)))
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
