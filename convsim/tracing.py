"""State-transition traces built from LangGraph's ``updates`` and ``values`` streams.

For every node step the trace holds the superstep, the turn, the node, each key the
node wrote with its value before and after the reducer ran, the wall time since the
previous event, and the LLM calls the node made. Long lists (the transcript, turn
metrics) are stored as a compact diff: what was appended, with the lengths.

File format (JSON lines, optionally gzip when the name ends in ``.gz``)::

    {"type": "initial", "state": {...}}                      # first line
    {"type": "fork", "run_id", "variant", "session_id", "trial", "step", ...}   # forks only
    {"type": "step", "step", "superstep", "turn", "node", "changed", "wall_s", "llm_calls"}
    {"type": "event", "step", "superstep", "event": {...}}   # custom-stream metric events

``changed`` maps a key to ``{"before", "after"}`` or, for a list that grew at its end,
``{"appended", "before_len", "after_len"}``.
"""
from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path
from typing import Any

from .store import dumps, json_default


def compact_change(before: Any, after: Any) -> dict:
    """``{"before", "after"}``, or for a grown list ``{"appended", "before_len", "after_len"}``."""
    if (isinstance(before, list) and isinstance(after, list)
            and len(after) > len(before) and after[:len(before)] == before):
        return {"appended": after[len(before):], "before_len": len(before), "after_len": len(after)}
    return {"before": before, "after": after}


def dict_diff(before: Any, after: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted path, before, after)`` of every leaf that differs between two nested dicts.

    Lists and scalars are compared whole; a key present on one side only is ``None`` on the other.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for k in list(before) + [k for k in after if k not in before]:
            out += dict_diff(before.get(k), after.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if before == after else [(prefix, before, after)]


def apply_change(value: Any, change: dict) -> Any:
    """Rebuild the after-value of a key from its before-value and a trace change."""
    if "appended" in change:
        return list(value or [])[:change["before_len"]] + list(change["appended"])
    return change["after"]


def _snapshot(value: Any) -> Any:
    # JSON round trip: a cheap deep copy that also proves the value is serialisable.
    return json.loads(json.dumps(value, default=json_default))


def _turn_of(values: dict, fallback: Any) -> Any:
    """The session's turn: the ``turn`` key when the state has one, else the last utterance's."""
    if isinstance(values.get("turn"), int):
        return values["turn"]
    transcript = values.get("transcript")
    if isinstance(transcript, list) and transcript and isinstance(transcript[-1], dict):
        return transcript[-1].get("turn", fallback)
    return fallback


class TraceRecorder:
    """Collects the steps of one session while the runner streams it.

    Only the keys a superstep wrote are copied, and a list that grew at its end costs a
    copy of the new items only, so recording stays linear in what the nodes wrote rather
    than in the size of the state times the number of steps.

    ``prefix`` (a trace as :func:`read_trace` returns it, cut at the fork point) makes the
    recorder continue a forked session: its steps keep their numbers, new ones follow.
    """

    def __init__(self, initial_state: dict, llm_calls: list[dict] | None = None, *,
                 prefix: dict | None = None, fork: dict | None = None) -> None:
        self.initial = _snapshot(initial_state)
        self.steps: list[dict] = list((prefix or {}).get("steps", []))
        self.events: list[dict] = list((prefix or {}).get("events", []))
        self.fork = fork
        self._values: dict = dict(self.initial)
        self._pending: list[tuple[str, dict, float]] = []
        self._last = time.perf_counter()
        self._superstep = self.steps[-1]["superstep"] + 1 if self.steps else 0
        self._calls = llm_calls if llm_calls is not None else []
        self._calls_seen = len(self._calls)
        self._seen_values = False

    def on_updates(self, chunk: dict) -> None:
        now = time.perf_counter()
        for node, update in (chunk or {}).items():
            self._pending.append((node, update if isinstance(update, dict) else {}, now - self._last))
        self._last = now

    def on_custom(self, event: Any) -> None:
        self.events.append({"step": len(self.steps), "superstep": self._superstep,
                            "event": copy.deepcopy(event)})

    def _change(self, key: str, values: dict) -> dict:
        before = self._values.get(key)
        raw = values.get(key)
        if (isinstance(before, list) and isinstance(raw, list) and len(raw) > len(before)
                and raw[:len(before)] == before):
            appended = _snapshot(raw[len(before):])
            self._values[key] = before + appended
            return {"appended": appended, "before_len": len(before), "after_len": len(raw)}
        after = _snapshot(raw)
        self._values[key] = after
        return {"before": before, "after": after}

    def on_values(self, values: dict) -> None:
        if not self._pending:
            # the input echo (or the checkpoint a fork resumes from): the state to diff against
            if not self._seen_values:
                self._values = _snapshot(values)
                if not self.steps:  # the echo includes what reducer channels start with
                    self.initial = dict(self._values)
                self._seen_values = True
            return
        self._seen_values = True
        turn_before = _turn_of(self._values, None)
        new_calls = self._calls[self._calls_seen:]
        self._calls_seen = len(self._calls)
        changes: dict[str, dict] = {}
        for _, update, _ in self._pending:
            for key in update:
                if key not in changes and (key in values or key in self._values):
                    changes[key] = self._change(key, values)
        turn = _turn_of(self._values, turn_before)
        for node, update, wall in self._pending:
            self.steps.append({
                "step": len(self.steps), "superstep": self._superstep, "turn": turn, "node": node,
                "changed": {k: changes[k] for k in update if k in changes},
                "wall_s": round(wall, 6),
                "llm_calls": [c for c in new_calls if c.get("node") in (node, None)],
            })
        self._pending = []
        self._superstep += 1

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt", encoding="utf-8") as fh:
            fh.write(dumps({"type": "initial", "state": self.initial}) + "\n")
            if self.fork:
                fh.write(dumps({"type": "fork", **self.fork}) + "\n")
            for step in self.steps:
                fh.write(dumps({"type": "step", **step}) + "\n")
            for ev in self.events:
                fh.write(dumps({"type": "event", **ev}) + "\n")
        return path


def read_trace(path: Path) -> dict:
    """``{"initial": state, "steps": [...], "events": [...], "fork": dict|None}`` of a trace file."""
    from .errors import ConvsimError
    path = Path(path)
    if not path.exists():
        raise ConvsimError("trace file not found", file=path)
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict = {"initial": {}, "steps": [], "events": [], "fork": None}
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                kind = rec.pop("type", None)
            except (ValueError, AttributeError):
                raise ConvsimError("trace line is not a JSON object", file=path,
                                   record=f"line {lineno}") from None
            if kind == "initial":
                out["initial"] = rec.get("state", {})
            elif kind == "fork":
                out["fork"] = rec
            elif kind == "step":
                if not isinstance(rec.get("changed"), dict) or "step" not in rec:
                    raise ConvsimError("trace step lacks step/changed", file=path,
                                       record=f"line {lineno}", field="changed")
                out["steps"].append(rec)
            else:
                out["events"].append(rec)
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


def cut_trace(trace: dict, step: int) -> dict:
    """The part of a trace before step ``step``: what a fork from ``step`` keeps."""
    return {"initial": trace["initial"],
            "steps": [s for s in trace["steps"] if s["step"] < step],
            "events": [e for e in trace["events"] if e.get("step", 0) < step]}


def explain_turn_metrics(trace: dict, turn_metrics: list[dict], thresholds: dict,
                         *, metric_inputs: dict[str, list[str]] | None = None) -> list[dict]:
    """Link every turn metric below its threshold to the node steps of that turn.

    ``thresholds`` maps a metric name to a number (low means ``value < number``) or to
    ``{"below": x}`` / ``{"above": x}``. ``metric_inputs`` (a graph's ``METRIC_INPUTS``)
    maps a metric to the state keys it is computed from; the link then keeps the steps
    of the turn that changed those keys, and for an input key no step of the turn
    changed, the last earlier step that did (``carried``). Without it every step of the
    turn is listed. Returns one dict per low metric, in turn order.
    """
    metric_inputs = metric_inputs or {}
    out = []
    for row in turn_metrics:
        turn = row.get("turn")
        for name, rule in thresholds.items():
            value = row.get(name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            below, limit = (("above" not in rule), rule.get("below", rule.get("above"))) \
                if isinstance(rule, dict) else (True, rule)
            if not ((value < limit) if below else (value > limit)):
                continue
            inputs = metric_inputs.get(name)
            turn_steps = [s for s in trace["steps"] if s.get("turn") == turn]
            linked, carried = [], []
            for s in turn_steps:
                keys = [k for k in s["changed"] if inputs is None or k in inputs]
                if keys or inputs is None:
                    linked.append({"step": s["step"], "node": s["node"], "keys": keys,
                                   "changes": {k: s["changed"][k] for k in keys}})
            for key in inputs or []:
                if any(key in s["changed"] for s in turn_steps):
                    continue
                first = turn_steps[0]["step"] if turn_steps else len(trace["steps"])
                earlier = [s for s in trace["steps"] if s["step"] < first and key in s["changed"]]
                if earlier:
                    s = earlier[-1]
                    carried.append({"step": s["step"], "node": s["node"], "turn": s.get("turn"),
                                    "key": key, "change": s["changed"][key]})
            out.append({"turn": turn, "metric": name, "value": value, "threshold": limit,
                        "direction": "below" if below else "above", "inputs": inputs,
                        "steps": linked, "carried": carried})
    return out
