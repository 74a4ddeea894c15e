"""``convsim trace``: a session's node steps and state diffs as a terminal timeline.

Filters select steps by node, by turn and by a dotted key path (``belief.hotel.area``):
a step matches a key when the value at that path differs before and after it. The
filtered view is also available as plain data (:func:`select_steps`) for ``--json``.
"""
from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from convsim.errors import ConvsimError
from convsim.traces.tracing import apply_change, dict_diff, state_at

_MISSING = object()


def get_path(value: Any, dotted: str) -> Any:
    """The value at a dotted path (``belief.hotel.area``, ``transcript.-1.text``); a sentinel if absent."""
    for part in dotted.split("."):
        if isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, list):
            try:
                value = value[int(part)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _visible(value: Any) -> Any:
    return None if value is _MISSING else value


def key_change(step: dict, state_before: dict, dotted: str) -> dict | None:
    """``{"before", "after"}`` of the dotted path across ``step``, or None when it did not change."""
    top, _, rest = dotted.partition(".")
    change = step["changed"].get(top)
    if change is None:
        return None
    if not rest and "appended" in change:
        return change
    before_top = state_before.get(top)
    after_top = apply_change(before_top, change)
    before = get_path(before_top, rest) if rest else before_top
    after = get_path(after_top, rest) if rest else after_top
    if before == after:
        return None
    return {"before": _visible(before), "after": _visible(after)}


def select_steps(trace: dict, *, node: str | None = None, key: str | None = None,
                 turn: int | None = None) -> list[dict]:
    """The steps that match every filter given; with ``key``, each step's ``changed`` holds just that path."""
    out = []
    state = {k: json.loads(json.dumps(v)) for k, v in trace["initial"].items()
             if k == (key or "").partition(".")[0]}
    top = (key or "").partition(".")[0]
    for step in trace["steps"]:
        keep = (node is None or step["node"] == node) and (turn is None or step.get("turn") == turn)
        shown = step
        if keep and key is not None:
            ch = key_change(step, state, key)
            keep = ch is not None
            shown = {**step, "changed": {key: ch}}
        if keep:
            out.append(shown)
        if key is not None and top in step["changed"]:
            # only the key's top-level value is needed to diff the later steps
            state[top] = apply_change(state.get(top), step["changed"][top])
    return out


def _short(value: Any, width: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[:width - 1] + "…"


def format_change(change: dict, width: int = 100) -> str:
    if "appended" in change:
        items = change["appended"]
        shown = [_short(x, width) for x in items[:3]]
        more = f" (+{len(items) - 3} more)" if len(items) > 3 else ""
        return f"+{len(items)} item(s) [{change['before_len']}→{change['after_len']}]: " + "; ".join(shown) + more
    before, after = change.get("before"), change.get("after")
    if before == after:
        return "(written, unchanged)"
    if isinstance(before, dict) and isinstance(after, dict):
        # a node that rewrites a whole dict: show only the leaves that moved
        diffs = dict_diff(before, after)
        shown = [f"{path}: {_short(b, width // 2)} → {_short(a, width // 2)}" for path, b, a in diffs[:6]]
        return "\n".join(shown) + (f"\n(+{len(diffs) - 6} more)" if len(diffs) > 6 else "")
    return f"{_short(before, width // 2)} → {_short(after, width // 2)}"


def render_timeline(trace: dict, steps: list[dict], *, console: Console, title: str = "",
                    width: int = 100) -> None:
    """One row per step: step, superstep, turn, node, wall time, LLM calls, the changed keys."""
    table = Table(title=title or None, show_lines=False, expand=False)
    for col, just in (("step", "right"), ("turn", "right"), ("node", "left"), ("ms", "right"),
                      ("llm", "right"), ("changes", "left")):
        table.add_column(col, justify=just, overflow="fold")
    events_by_step: dict[int, list[dict]] = {}
    for ev in trace.get("events", []):
        events_by_step.setdefault(ev.get("step", 0), []).append(ev)
    for s in steps:
        changes = Text()
        for i, (k, ch) in enumerate(s["changed"].items()):
            if i:
                changes.append("\n")
            changes.append(f"{k}: ", style="bold cyan")
            changes.append(format_change(ch, width))
        for k, v in ((s.get("subgraph") or {}).get("update") or {}).items():  # a subgraph's own step
            if len(changes):
                changes.append("\n")
            changes.append(f"({s['subgraph'].get('namespace')}) {k}: ", style="bold green")
            changes.append(_short(v, width))
        for ev in events_by_step.get(s["step"], []):
            changes.append("\n")
            changes.append("event: ", style="bold magenta")
            changes.append(_short(ev.get("event"), width))
        calls = s.get("llm_calls") or []
        llm = f"{len(calls)}" + (f" ({sum(c.get('completion_tokens') or 0 for c in calls)} tok)" if calls else "")
        table.add_row(str(s["step"]), str(s.get("turn", "")), s["node"],
                      f"{1000 * (s.get('wall_s') or 0):.1f}", llm if calls else "", changes)
    console.print(table)


def state_at_step(trace: dict, step: int) -> dict:
    if not trace["steps"]:
        raise ConvsimError("the trace has no steps", field="at")
    last = trace["steps"][-1]["step"]
    if not -1 <= step <= last:
        raise ConvsimError(f"--at must be in -1..{last} (-1 is the initial state)", field="at")
    return state_at(trace["initial"], trace["steps"], step)


def _path_ever_present(trace: dict, key: str) -> bool:
    """Whether a dotted path exists in the initial state or the state after some step (one replay
    of the trace, stopping at the first state that has it)."""
    top = key.partition(".")[0]
    value = json.loads(json.dumps(trace["initial"].get(top)))
    if get_path({top: value}, key) is not _MISSING:
        return True
    for s in trace["steps"]:
        if top in s["changed"]:
            value = apply_change(value, s["changed"][top])
            if get_path({top: value}, key) is not _MISSING:
                return True
    return False


def select_trace(trace: dict, *, node: str | None = None, key: str | None = None, turn: int | None = None,
                 at: int | None = None) -> dict:
    """What ``convsim trace`` shows, as data: ``{"fork", "steps", "n_steps"}`` (the steps that pass
    the filters), or with ``at`` ``{"fork", "state"}`` (the state after step ``at``; only the
    dotted ``key`` of it when given)."""
    if node is not None and node not in {s["node"] for s in trace["steps"]}:
        known = ", ".join(sorted({s["node"] for s in trace["steps"]}))
        raise ConvsimError(f"no step of node {node!r} (nodes: {known})", field="node")
    if at is not None:
        state = state_at_step(trace, at)
        if key is not None:
            value = get_path(state, key)
            if value is _MISSING:
                raise ConvsimError(f"no key {key!r} in the state at step {at}", field="key")
            state = {key: value}
        return {"fork": trace.get("fork"), "state": state}
    if key is not None:
        top = key.partition(".")[0]
        if top not in trace["initial"] and not any(top in s["changed"] for s in trace["steps"]):
            known = ", ".join(sorted(set(trace["initial"]) | {k for s in trace["steps"] for k in s["changed"]}))
            raise ConvsimError(f"no state key {top!r} in this trace (keys: {known})", field="key")
        if "." in key and not _path_ever_present(trace, key):
            raise ConvsimError(f"no path {key!r} in any state of this trace (state key {top!r} exists; "
                               f"see its values with --at STEP --key {top})", field="key")
    return {"fork": trace.get("fork"), "steps": select_steps(trace, node=node, key=key, turn=turn),
            "n_steps": len(trace["steps"]), "failure": trace.get("failure")}


def print_trace(trace: dict, selection: dict, *, as_json: bool = False, console: Console | None = None,
                title: str = "") -> None:
    """Print a :func:`select_trace` result: JSON, or a timeline table."""
    console = console or Console()
    if "state" in selection:
        if as_json:
            print(json.dumps(selection["state"], ensure_ascii=False, indent=2, default=str))
        else:
            console.print_json(json.dumps(selection["state"], ensure_ascii=False, default=str))
        return
    steps = selection["steps"]
    if as_json:
        print(json.dumps({"fork": selection["fork"], "steps": steps, "failure": selection.get("failure")},
                         ensure_ascii=False, default=str))
        return
    if selection["fork"]:
        f = selection["fork"]
        console.print(f"forked from {f['run_id']} at step {f['step']} "
                      f"(models {f.get('models') or 'same'}, set {f.get('set') or 'nothing'})")
    render_timeline(trace, steps, console=console, title=title)
    console.print(f"{len(steps)} of {selection['n_steps']} steps")
    if selection.get("failure"):
        f = selection["failure"]
        calls = f.get("llm_calls") or []
        failed = sum(1 for c in calls if not c.get("ok"))
        where = f" after step {f['step'] - 1}" if f.get("step") else " before the first step"
        console.print(Text.assemble(("failed", "bold red"), where
                                    + (f" in node {f['node']}" if f.get("node") else "")
                                    + (f" ({failed} of {len(calls)} model calls failed)" if calls else "")
                                    + f": {str(f.get('error'))[:300]}"))

