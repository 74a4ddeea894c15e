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

import functools
import gzip
import json
import operator
import time
from collections import Counter
from pathlib import Path
from typing import Any

from convsim.running.store import dumps, json_default
from convsim.textio import is_int


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


def superstep_calls(calls: list[dict]) -> list[dict]:
    """The calls made during one superstep of the session's graph, ordered by task (node, then send
    index), each task's own calls in the order it made them. Parallel tasks (a fan-out over group
    members) run in LangGraph's threads and record their calls as they finish: without this, the
    order in a record or a trace followed thread scheduling."""
    if len(calls) < 2:
        return list(calls)
    return sorted(calls, key=lambda c: (c.get("node") or "", -1 if c.get("task") is None else c["task"]))


def ordered_calls(calls: list[dict], marks: list[int]) -> list[dict]:
    """A session's calls, each superstep's in task order (:func:`superstep_calls`). ``marks``: how
    many calls had been made when each superstep ended (the session notes it as each ``values``
    chunk arrives). The superstep comes from the stream, not from a call's ``step``: inside a subgraph
    that is the subgraph's own step number, which can equal an earlier superstep's."""
    out: list[dict] = []
    start = 0
    for end in [*marks, len(calls)]:
        if end > start:
            out.extend(superstep_calls(calls[start:end]))
            start = end
    return out


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


def append_channels(channels: dict) -> frozenset[str]:
    """The state keys whose reducer is ``operator.add`` (a compiled graph's ``channels``): a node's
    list update to such a key is appended, so the trace can record just the new items."""
    from langgraph.channels.binop import BinaryOperatorAggregate
    return frozenset(k for k, ch in (channels or {}).items()
                     if isinstance(ch, BinaryOperatorAggregate) and ch.operator is operator.add)


def _tile(combined: list, parts: list[list]) -> list[int] | None:
    """Where each of ``parts`` sits in the tail of ``combined`` they make up together (their items
    found by identity, in any order; an empty part sits at the end), or None when they do not tile it."""
    start = len(combined) - sum(len(p) for p in parts)
    if start < 0:
        return None
    at: list[int | None] = [len(combined) if not p else None for p in parts]
    pos = start
    while pos < len(combined):
        for j, part in enumerate(parts):
            if (at[j] is None and pos + len(part) <= len(combined)
                    and all(a is b for a, b in zip(part, combined[pos:pos + len(part)]))):
                at[j] = pos
                pos += len(part)
                break
        else:
            return None
    return at if None not in at else None


def _appended_text(before_len: int, after_len: int, appended: str) -> str:
    return f'{{"appended": {appended}, "before_len": {before_len}, "after_len": {after_len}}}'


def _step_line(step: int, superstep: int, turn: Any, node: str, changed: str, wall: float, calls: str) -> str:
    # the bytes json.dumps({"type": "step", **step}) gives, with the changes already encoded once
    turn_text = str(turn) if type(turn) is int else dumps(turn)
    return (f'{{"type": "step", "step": {step}, "superstep": {superstep}, "turn": {turn_text}, '
            f'"node": {_name(node)}, "changed": {{{changed}}}, "wall_s": {float.__repr__(wall)}, '
            f'"llm_calls": {calls}}}')


@functools.lru_cache(maxsize=4096)
def _name(name: str) -> str:
    """A node or state key as JSON (a handful of names, encoded millions of times)."""
    return dumps(name)


class TraceRecorder:
    """Collects the steps of one session while the runner streams it.

    Only the keys a superstep wrote are recorded, and each written value is JSON-encoded exactly
    once, when its step ends (the text is the copy: nodes mutating it later cannot change the
    trace). A key's ``before`` is the text recorded as its previous ``after``, never encoded again.
    For the keys in ``append_keys`` (``operator.add`` reducers, see :func:`append_channels`) a
    list update costs the encoding of the new items only, with no comparison of the old ones;
    any other key is diffed against a copy of its previous value, so a list that grew at its end
    is still recorded compactly. Recording stays linear in what the nodes wrote.

    ``prefix`` (a trace as :func:`read_trace` returns it, cut at the fork point) makes the
    recorder continue a forked session: its steps keep their numbers, new ones follow.
    :meth:`close` renders the file text and drops the working state, so an outcome crossing a
    process boundary carries one string.
    """

    def __init__(self, initial_state: dict, llm_calls: list[dict] | None = None, *,
                 prefix: dict | None = None, fork: dict | None = None,
                 append_keys: frozenset[str] | set[str] = frozenset(),
                 call_tasks: dict[int, str] | None = None) -> None:
        self.initial = _snapshot(initial_state)
        prefix_steps = list((prefix or {}).get("steps", []))
        self._lines = [dumps({"type": "step", **s}) for s in prefix_steps]
        self._events = [dumps({"type": "event", **e}) for e in (prefix or {}).get("events", [])]
        self.fork = fork
        self.append_keys = frozenset(append_keys)
        self._echo: dict = dict(self.initial)  # the state the first diffs are taken against
        self._text: dict[str, str] = {}     # key -> JSON of its current value, as last recorded
        self._copy: dict[str, Any] = {}     # other keys holding a list: a copy, for the grown-list test
        self._length: dict[str, int] = {}   # append keys: the current length ...
        self._ref: dict[str, list] = {}     # ... and the list itself (the state's own, never mutated)
        self._pending: list[list] = []  # [node, update, wall time, task id (from on_task) or None]
        self._call_tasks = call_tasks if call_tasks is not None else {}  # id(call) -> task id (ChatModel)
        self._last = time.perf_counter()
        self._inner_last = 0.0  # when the last subgraph step was recorded (on_inner_updates)
        # the superstep each subgraph run (a namespace's first part, its task id kept) is in, and
        # whether its last ``tasks`` event was a task starting (on_inner_task); both per outer superstep
        self._inner_superstep: dict[str, int] = {}
        self._inner_open: dict[str, bool] = {}
        # a fork inside a subgraph (fork["inner"]): the subgraph resumes at that inner superstep
        inner = (fork or {}).get("inner") or None
        self._inner_from = (inner["path"], inner["inner_superstep"]) if inner else None
        # a prefix ending inside a subgraph (its last step an inner one): its outer superstep runs again
        self._superstep = (prefix_steps[-1]["superstep"] + (0 if prefix_steps[-1].get("subgraph") else 1)
                           if prefix_steps else 0)
        self._turn = prefix_steps[-1].get("turn") if prefix_steps else None
        self._calls = llm_calls if llm_calls is not None else []
        self._calls_seen = len(self._calls)
        self._seen_values = False
        self._rendered: str | None = None

    def _decoded(self, kind: str) -> list[dict]:
        if self._rendered is None:
            lines = self._lines if kind == "step" else self._events
        else:  # closed: the rendered text is all that is kept
            lines = [x for x in self._rendered.split("\n") if x.startswith(f'{{"type": "{kind}"')]
        return [{k: v for k, v in json.loads(line).items() if k != "type"} for line in lines]

    @property
    def steps(self) -> list[dict]:
        """The recorded steps, decoded (for inspection; the runner only writes them)."""
        return self._decoded("step")

    @property
    def events(self) -> list[dict]:
        return self._decoded("event")

    def on_updates(self, chunk: dict) -> None:
        now = time.perf_counter()
        for node, update in (chunk or {}).items():
            self._pending.append([node, update if isinstance(update, dict) else {}, now - self._last, None])
        self._last = now

    def on_inner_task(self, namespace: tuple, event: dict) -> None:
        """A ``tasks`` event of a subgraph: counts the supersteps of each subgraph run directly inside
        a node of the session's graph (its first namespace part). LangGraph announces every task of a
        superstep before any of them finishes, so a task starting after one finished opens the next
        superstep; the count is the subgraph's checkpoint ``step`` (its checkpoint before that
        superstep), which a fork into it resumes from (convsim.traces.time_travel)."""
        if len(namespace) != 1:
            return
        top = namespace[0]
        if "result" in event:
            self._inner_open[top] = False
        elif not self._inner_open.get(top):
            k = self._inner_superstep.get(top)
            if k is not None:
                k += 1
            elif self._inner_from is not None and self._inner_from[0] == str(top).partition(":")[0]:
                k, self._inner_from = self._inner_from[1], None  # the fork's subgraph resumes there
            else:
                k = 0
            self._inner_superstep[top], self._inner_open[top] = k, True

    def on_inner_updates(self, namespace: tuple, chunk: dict) -> None:
        """An ``updates`` chunk of a subgraph (a graph run inside a node, such as an agent slot's
        graph agent, streamed with ``subgraphs=True``): one step line per inner node, named
        ``<outer node>/<inner node>``, in the outer node's superstep, its update under ``subgraph``
        and no change to the session's state (``changed`` is empty: replay skips it). ``subgraph``
        also holds ``inner_superstep``, the superstep of the subgraph run directly inside the outer
        node that the step is in (see :meth:`on_inner_task`): a fork from the step resumes that
        subgraph from its checkpoint before it."""
        now = time.perf_counter()
        path = "/".join(str(part).partition(":")[0] for part in namespace)
        last = max(self._last, self._inner_last)
        k = self._inner_superstep.get(namespace[0]) if namespace else None
        where = f', "inner_superstep": {k}' if k is not None else ""
        for node, update in (chunk or {}).items():
            line = _step_line(len(self._lines), self._superstep, self._turn, f"{path}/{node}", "",
                              round(now - last, 6), "[]")
            self._lines.append(f'{line[:-1]}, "subgraph": {{"namespace": {_name(path)}{where}, '
                               f'"update": {dumps(update if isinstance(update, dict) else {})}}}}}')
        self._inner_last = now

    def on_task(self, event: dict) -> None:
        """A ``tasks`` stream event: a finished task's id, given to the step its ``updates`` chunk made
        (the one whose written values are the result's own objects: two tasks finishing at once may
        interleave their two events), so a task of a ``Send`` fan-out lists only its own calls."""
        if "result" not in event or event.get("error") is not None:  # a task starting, or one that raised
            return
        result = event["result"] if isinstance(event["result"], dict) else {}
        mine = [p for p in self._pending if p[0] == event.get("name") and p[3] is None]
        same = [p for p in mine if p[1].keys() == result.keys() and all(result[k] is v for k, v in p[1].items())]
        if same or mine:
            (same or mine)[0][3] = event.get("id")

    def on_custom(self, event: Any) -> None:
        # encoded now: the line is the copy (a node may reuse the event's dicts)
        self._events.append(f'{{"type": "event", "step": {len(self._lines)}, '
                            f'"superstep": {self._superstep}, "event": {dumps(event)}}}')

    def _appended(self, key: str, raw: Any) -> str | None:
        """The change of an ``operator.add`` key whose every update this superstep was a list, or
        None (an ``Overwrite``, or lengths that do not add up: diffed like any other key)."""
        if key not in self.append_keys or not isinstance(raw, list):
            return None
        grew = 0
        for _, update, _, _ in self._pending:
            if key in update:
                if type(update[key]) is not list:
                    return None
                grew += len(update[key])
        n0 = self._length.get(key)
        if n0 is None:  # first append since the start (or since an Overwrite)
            prev = self._copy.get(key) if key in self._text else self._echo.get(key)
            n0 = len(prev) if isinstance(prev, list) else -1
        if n0 < 0 or len(raw) != n0 + grew:
            return None
        self._length[key], self._ref[key] = len(raw), raw
        self._text.pop(key, None)
        self._copy.pop(key, None)
        return _appended_text(n0, len(raw), dumps(raw[n0:]))

    def _change(self, key: str, raw: Any) -> str:
        appended = self._appended(key, raw)
        if appended is not None:
            return appended
        if key in self._length:  # an append key leaving the fast path: its value is the list last seen
            del self._length[key]
            before_obj = self._ref.pop(key)
            before = dumps(before_obj)
        elif key in self._text:
            before_obj, before = self._copy.get(key), self._text[key]
        else:
            before_obj = self._echo.get(key)
            before = dumps(before_obj)
        after = dumps(raw)
        self._text[key] = after
        if isinstance(raw, list):
            self._copy[key] = json.loads(after)  # a copy: the grown-list test of the next step needs it
            if (isinstance(before_obj, list) and len(raw) > len(before_obj)
                    and raw[:len(before_obj)] == before_obj):
                return _appended_text(len(before_obj), len(raw), dumps(raw[len(before_obj):]))
        else:
            self._copy.pop(key, None)
        return f'{{"before": {before}, "after": {after}}}'

    def on_values(self, values: dict) -> None:
        if not self._pending:
            # the input echo (or the checkpoint a fork resumes from): the state to diff against
            if not self._seen_values:
                self._echo = _snapshot(values)
                if not self._lines:  # the echo includes what reducer channels start with
                    self.initial = dict(self._echo)
                self._seen_values = True
            return
        self._seen_values = True
        new_calls = superstep_calls(self._calls[self._calls_seen:])
        self._calls_seen = len(self._calls)
        changes: dict[str, str] = {}
        for _, update, _, _ in self._pending:
            for key in update:
                if key not in changes and (key in values or key in self._echo or key in self._text
                                           or key in self._length):
                    changes[key] = f"{_name(key)}: {self._change(key, values.get(key))}"
        own, order = self._own_parts(values, changes) if len(self._pending) > 1 else ({}, None)
        self._turn = turn = _turn_of(values, self._turn)
        # (one task a superstep, the usual case, needs no count)
        tasks_of = Counter(p[0] for p in self._pending) if len(self._pending) > 1 else None
        for i in order or range(len(self._pending)):
            node, update, wall, task_id = self._pending[i]
            if tasks_of is not None and tasks_of[node] > 1:  # parallel tasks of one node (a Send fan-out): each its own calls
                calls = [c for c in new_calls if c.get("node") == node and self._call_tasks.get(id(c)) == task_id]
            else:
                calls = [c for c in new_calls if c.get("node") in (node, None)]
            self._lines.append(_step_line(len(self._lines), self._superstep, turn, node,
                                          ", ".join(own.get((i, k), changes[k]) for k in update if k in changes),
                                          round(wall, 6), dumps(calls) if calls else "[]"))
        self._pending = []
        self._superstep += 1
        if self._inner_superstep:  # the subgraph runs of that superstep are over
            self._inner_superstep, self._inner_open = {}, {}

    def _own_parts(self, values: dict, changes: dict) -> tuple[dict, list[int] | None]:
        """Each task's own part of the ``operator.add`` keys several tasks of this superstep appended to
        (members speaking at once, a ``Send`` fan-out), and the order of the superstep's steps.

        LangGraph appends the tasks' lists in its task order, whatever order they finished in; each
        task's items are found in the combined list by identity (the reducer copies references), so
        its step records only them, at their place (``before_len``), and the steps come in that
        order: replaying the trace step by step (:func:`state_at`) passes through each task's append.
        Returns ``({(pending index, key): change text}, step order)``; a key whose parts cannot be
        found (or disagree with the order another key gave) keeps the superstep's combined change on
        each of its steps, as before."""
        found: dict = {}  # key -> its length before this superstep's appends (whose parts were found)
        order: list[int] | None = None
        for key in changes:
            writers = [i for i, p in enumerate(self._pending) if key in p[1]]
            if len(writers) < 2 or key not in self._length:  # (in _length: recorded as an append just now)
                continue
            raw = values.get(key)
            parts = _tile(raw, [self._pending[i][1][key] for i in writers])
            if parts is None:
                continue
            # an empty part has no place of its own: it goes where the step order puts it
            by_place = [i for _, i in sorted((start, i) for start, i in zip(parts, writers)
                                              if self._pending[i][1][key])]
            if order is None:
                order = by_place + [i for i in range(len(self._pending)) if i not in by_place]
            elif [i for i in order if i in by_place] != by_place:
                continue  # the tasks' order differs from the other key's: keep the combined change
            found[key] = len(raw) - sum(len(self._pending[i][1][key]) for i in writers)
        if order is None:
            return {}, None
        own: dict = {}
        first = [i for i in range(len(self._pending)) if not any(k in self._pending[i][1] for k in found)]
        order = first + [i for i in order if i not in first]  # steps writing none of them first
        for key, length in found.items():
            for i in order:
                items = self._pending[i][1].get(key)
                if items is not None:
                    own[i, key] = f"{_name(key)}: {_appended_text(length, length + len(items), dumps(items))}"
                    length += len(items)
        return own, order

    def on_failure(self, error: str) -> None:
        """The session ended on an exception: one ``failure`` line after the last finished step,
        with the error and the model calls made since (the failed attempts of an outage included),
        named by the node that made them when they say so."""
        made = self._calls[self._calls_seen:]
        new_calls = superstep_calls(made)
        self._calls_seen = len(self._calls)
        node = next((c["node"] for c in reversed(made) if c.get("node")), None)  # the last call made
        self._lines.append(dumps({"type": "failure", "step": len(self._lines), "superstep": self._superstep,
                                  "turn": self._turn, "node": node, "error": error[:4000],
                                  "llm_calls": new_calls}))

    def render(self) -> str:
        """The trace file's text."""
        if self._rendered is not None:
            return self._rendered
        head = [dumps({"type": "initial", "state": self.initial})]
        if self.fork:
            head.append(dumps({"type": "fork", **self.fork}))
        return "\n".join(head + self._lines + self._events) + "\n"

    def close(self) -> "TraceRecorder":
        """Render the file text once and drop the working state (copies, references to the state)."""
        self._rendered = self.render()
        self._echo, self._text, self._copy, self._ref, self._calls, self._pending = {}, {}, {}, {}, [], []
        self._call_tasks = {}
        self._lines, self._events = [], []
        return self

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt", encoding="utf-8", errors="backslashreplace") as fh:  # see RunStore.append
            fh.write(self.render())
        return path


def read_trace(path: Path) -> dict:
    """``{"initial": state, "steps": [...], "events": [...], "fork": dict|None, "failure": dict|None}``
    of a trace file (``failure``: the exception that ended the session, if one did). A damaged
    file (not UTF-8, not gzip, a line that is not a JSON object, a state that is not one, no initial
    state or two of them, an empty file) is one ConvsimError naming the file and the line."""
    from convsim import textio
    from convsim.errors import ConvsimError
    path = Path(path)
    if not path.exists():
        raise ConvsimError("trace file not found", file=path)
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as fh:
                text = textio.decode_utf8(fh.read(), file=path)
        except (OSError, EOFError) as exc:  # BadGzipFile, a truncated stream, a directory
            raise ConvsimError(f"not a readable gzip trace ({exc})", file=path) from None
    else:
        text = textio.read_text(path, what="trace file")
    out: dict = {"initial": {}, "steps": [], "events": [], "fork": None, "failure": None}
    initial_line = None  # every trace starts with one: replay (state_at), --at and forks start from it
    # lines end at "\n" only: str.splitlines() would also cut at U+2028, U+0085... inside a text
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            rec = None
        if not isinstance(rec, dict):
            raise ConvsimError("trace line is not a JSON object", file=path, record=f"line {lineno}") from None
        kind = rec.pop("type", None)
        if kind == "initial":
            if initial_line is not None:
                raise ConvsimError(f"trace has a second initial state (the first on line {initial_line})",
                                   file=path, record=f"line {lineno}")
            initial_line = lineno
            out["initial"] = rec.get("state")
            if not isinstance(out["initial"], dict):
                raise ConvsimError("the initial state is not a JSON object", file=path, record=f"line {lineno}",
                                   field="state")
        elif kind == "fork":
            out["fork"] = rec
        elif kind == "failure":  # the exception that ended the session (TraceRecorder.on_failure)
            out["failure"] = rec
        elif kind == "step":
            bad = _bad_step(rec)
            if bad is not None:
                raise ConvsimError(f"trace step is damaged: {bad[1]}", file=path, record=f"line {lineno}",
                                   field=bad[0])
            out["steps"].append(rec)
        else:
            if "step" in rec and not is_int(rec["step"]):
                raise ConvsimError("trace event's step is not an integer", file=path, record=f"line {lineno}",
                                   field="step")
            out["events"].append(rec)
    if initial_line is None:  # an empty file, or its first line lost: every state replayed would miss keys
        raise ConvsimError("trace has no initial state (no line with \"type\": \"initial\")", file=path)
    return out


def _bad_step(rec: dict) -> tuple[str, str] | None:
    """What is wrong with a step line read back, as (field, why), or None: what the trace viewer,
    replay (:func:`state_at`) and forks rely on."""
    for key in ("step", "superstep"):
        if not is_int(rec.get(key)):
            return key, f"{key} is not an integer"
    if not isinstance(rec.get("node"), str):
        return "node", "node is not a string"
    if not isinstance(rec.get("changed"), dict):
        return "changed", "changed is not an object"
    if not isinstance(rec.get("llm_calls", []), list):
        return "llm_calls", "llm_calls is not a list"
    for key, change in rec["changed"].items():
        where = f"changed.{key}"
        if not isinstance(change, dict):
            return where, f"{where} is not an object"
        if "appended" in change:
            if not (isinstance(change["appended"], list) and is_int(change.get("before_len"))
                    and is_int(change.get("after_len"))):
                return where, f"{where} needs a list 'appended' and integer 'before_len', 'after_len'"
        elif "after" not in change:
            return where, f"{where} has neither 'after' nor 'appended'"
    return None


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
