"""State-transition traces built from LangGraph's ``updates`` and ``values`` streams.

For every node step the trace holds the superstep, the turn, the node, each key the
node wrote with its value before and after the reducer ran, the wall time since the
previous event, and the LLM calls the node made. Long lists (the transcript, turn
metrics) are stored as a compact diff: what was appended, with the lengths.
"""
from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path
from typing import Any

from .store import dumps, json_default

LIST_DIFF_MIN = 4  # lists at least this long are diffed instead of stored whole


def compact_change(before: Any, after: Any) -> dict:
    """``{"before", "after"}``, or for a grown list ``{"appended", "before_len", "after_len"}``."""
    if (isinstance(before, list) and isinstance(after, list) and len(after) >= len(before)
            and len(after) >= LIST_DIFF_MIN and after[:len(before)] == before):
        return {"appended": after[len(before):], "before_len": len(before), "after_len": len(after)}
    return {"before": before, "after": after}


def apply_change(value: Any, change: dict) -> Any:
    """Rebuild the after-value of a key from its before-value and a trace change."""
    if "appended" in change:
        return list(value or [])[:change["before_len"]] + list(change["appended"])
    return change["after"]


def _snapshot(values: dict) -> dict:
    # JSON round trip: a cheap deep copy that also proves the state is serialisable.
    return json.loads(json.dumps(values, default=json_default))


class TraceRecorder:
    """Collects the steps of one session while the runner streams it."""

    def __init__(self, initial_state: dict, llm_calls: list[dict] | None = None) -> None:
        self.steps: list[dict] = []
        self.events: list[dict] = []
        self.initial = _snapshot(initial_state)
        self._values = self.initial
        self._pending: list[tuple[str, dict, float]] = []
        self._last = time.perf_counter()
        self._superstep = 0
        self._calls = llm_calls if llm_calls is not None else []
        self._calls_seen = 0

    def on_updates(self, chunk: dict) -> None:
        now = time.perf_counter()
        for node, update in (chunk or {}).items():
            self._pending.append((node, update if isinstance(update, dict) else {}, now - self._last))
        self._last = now

    def on_custom(self, event: Any) -> None:
        self.events.append({"step": len(self.steps), "superstep": self._superstep,
                            "event": copy.deepcopy(event)})

    def on_values(self, values: dict) -> None:
        after = _snapshot(values)
        if not self._pending:  # the input echo, or a step that wrote nothing
            self._values = after
            return
        new_calls = self._calls[self._calls_seen:]
        self._calls_seen = len(self._calls)
        for node, update, wall in self._pending:
            changed = {}
            for key in update:
                if key in after or key in self._values:
                    changed[key] = compact_change(self._values.get(key), after.get(key))
            calls = [c for c in new_calls if c.get("node") in (node, None)]
            self.steps.append({
                "step": len(self.steps), "superstep": self._superstep,
                "turn": after.get("turn", self._values.get("turn")), "node": node,
                "changed": changed, "wall_s": round(wall, 6), "llm_calls": calls,
            })
        self._pending = []
        self._superstep += 1
        self._values = after

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt", encoding="utf-8") as fh:
            fh.write(dumps({"type": "initial", "state": self.initial}) + "\n")
            for step in self.steps:
                fh.write(dumps({"type": "step", **step}) + "\n")
            for ev in self.events:
                fh.write(dumps({"type": "event", **ev}) + "\n")
        return path


def read_trace(path: Path) -> dict:
    """``{"initial": state, "steps": [...], "events": [...]}`` of a trace file."""
    opener = gzip.open if Path(path).suffix == ".gz" else open
    out: dict = {"initial": {}, "steps": [], "events": []}
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                kind = rec.pop("type", None)
                if kind == "initial":
                    out["initial"] = rec["state"]
                else:
                    out["steps" if kind == "step" else "events"].append(rec)
    return out


def state_at(initial: dict, steps: list[dict], step: int) -> dict:
    """The full state after trace step ``step`` (replaying the recorded changes)."""
    state = _snapshot(initial)
    for s in steps:
        if s["step"] > step:
            break
        for key, change in s["changed"].items():
            state[key] = apply_change(state.get(key), change)
    return state
