"""Fork a session from a checkpoint (LangGraph time travel) into a new run, and compare the two.

``fork_run(run, session, step=N)`` keeps trace steps ``0 .. N-1`` of the original session
and runs the rest again, possibly with other models (``models=["crs=ollama:qwen:7b"]``)
or params (``set_params=["shift_turn=3"]``). Step ``N`` is the first step that runs again.

How: the original run's checkpointer holds one checkpoint per superstep (metadata step
``s`` is the state before trace superstep ``s``). The checkpoint before step ``N``'s
superstep is copied, without its pending writes so that every task of that superstep
runs again, into the new run's ``checkpoints.sqlite`` under the same thread id; the
runner then streams the graph from it with ``checkpoint_id`` set (time travel), with a
context built from the new models and params. The original run is never written to.

A step inside a graph agent (an inner step, ``<node>/<inner node>``, see
:meth:`convsim.traces.tracing.TraceRecorder.on_inner_updates`): the agent's graph, run inside
the node with the session's checkpointer, kept its own checkpoints under the node's task
namespace (their ``parents`` name the session's checkpoint before the node's superstep). Its
checkpoint before the step's inner superstep is copied too, without its pending writes, under
its own namespace; the node runs again from the session's checkpoint, and the adapter
(:class:`convsim.slots.adapters.GraphAgent`) invokes the agent's graph from that inner checkpoint
instead of from its start, so the agent's nodes before the step do not run again. Where that
cannot be done (no inner checkpoints: the agent was compiled with ``checkpointer=False``; the
node's superstep ran several nodes; the agent's graph ran twice in it; a trace without the inner
superstep) the fork runs the whole node again and says why (``fork.inner_fallback``).

What changes and what does not: params a node reads from ``runtime.context.params`` take
their new value; what ``sessions()`` put in the initial state (e.g. a user's goal) is
part of the checkpointed state and stays as it was at the fork point.
"""
from __future__ import annotations

import asyncio
import glob
from pathlib import Path
from typing import Any

from convsim.config import apply_overrides, config_from_dict, load_config
from convsim.errors import ConvsimError
from convsim.running.plan import usable_checkpoint_db
from convsim.results.recordset import check_record
from convsim.running.store import RunStore, iter_jsonl, read_jsonl
from convsim.running.sqlitewal import switch_to_wal
from convsim.traces.tracing import cut_trace, read_trace

COMPARISON = "fork_comparison.json"


def resolve_run_dir(run: str | Path, *, out_dir: str | Path = "runs") -> Path:
    """A run directory given as a path or as a run id under ``out_dir``."""
    for cand in (Path(run), Path(out_dir) / str(run)):
        if (cand / "config.yaml").exists():
            return cand
    raise ConvsimError("not a run directory (no config.yaml)", file=run)


def locate_trace(run_dir: Path, session_id: str, *, variant: str | None = None, trial: int = 0) -> Path:
    """The trace file of a session; with several variants, ``variant`` must say which."""
    name = f"{session_id}{f'__t{trial}' if trial else ''}"
    found: dict[str, Path] = {}
    for ext in (".jsonl", ".jsonl.gz"):
        for p in sorted((Path(run_dir) / "traces").glob(f"*/{glob.escape(name)}{ext}")):  # an id, not a pattern
            other = found.get(p.parent.name)
            # both (a trace compressed, then the session run again): the newer is the session's
            if other is None or p.stat().st_mtime > other.stat().st_mtime:
                found[p.parent.name] = p
    if variant is not None:
        found = {k: v for k, v in found.items() if k == variant}
    if not found:
        raise ConvsimError(f"no trace for session {session_id!r} (trial {trial}"
                           f"{f', variant {variant!r}' if variant else ''}); was the run traced?",
                           file=Path(run_dir) / "traces", record=session_id)
    if len(found) > 1:
        raise ConvsimError(f"session {session_id!r} ran in several variants ({', '.join(sorted(found))}): "
                           "choose one with --variant", record=session_id, field="variant")
    return next(iter(found.values()))


def _find_record(run_dir: Path, variant: str, session_id: str, trial: int) -> dict:
    path = Path(run_dir) / "results.jsonl"
    for n, rec in enumerate(iter_jsonl(path), 1):
        check_record(rec, file=path, record=n)  # as every reader of a run's records does
        if (rec.get("variant"), str(rec.get("session_id")), rec.get("trial", 0)) == (variant, session_id, trial):
            return rec
    raise ConvsimError("session not found in results", file=Path(run_dir) / "results.jsonl",
                       record=f"{variant}/{session_id}/t{trial}")


def _copy_checkpoint(src: Path, dst: Path, thread: str, superstep: int) -> str:
    """Copy the checkpoint with metadata step ``superstep`` of ``thread``; return its id."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    with usable_checkpoint_db(src), SqliteSaver.from_conn_string(str(src)) as saver:
        found = None
        for tup in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}):
            if tup.metadata.get("step") == superstep and tup.metadata.get("source") == "loop":
                found = tup
                break
        if found is None:
            raise ConvsimError(f"no checkpoint before superstep {superstep} of thread {thread!r}",
                               file=src, record=thread, field="step")
    dst.parent.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(str(dst)) as saver:
        saver.conn.execute("PRAGMA busy_timeout=30000")
        switch_to_wal(saver.conn, dst, what="checkpoint database")
        cp = found.checkpoint
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp,
                  {**found.metadata, "source": "fork"}, cp.get("channel_versions", {}))
    return cp["id"]


def _inner_checkpoint(src: Path, thread: str, steps: list[dict], step: int) -> tuple[dict | None, Any, str | None]:
    """For a fork at an inner step (a graph agent's node): ``(inner, (checkpoint tuple, its
    ancestors' rows), None)``, where ``inner`` is ``{"node", "path", "inner_superstep", "checkpoint_ns", "checkpoint_id",
    "messages_in", "first_step"}`` (``first_step``: the first trace step of that inner superstep,
    where the fork starts); or ``(None, None, why not)``: the fork then runs the whole node again."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    line = steps[step]
    sub = line.get("subgraph") or {}
    path = str(sub.get("namespace") or "").split("/")[0]
    k = sub.get("inner_superstep")
    superstep = line["superstep"]
    if k is None:
        return None, None, "the trace does not say which superstep of the agent's graph the step is in"
    if sum(1 for s in steps if s["superstep"] == superstep and not s.get("subgraph")) != 1:
        return None, None, f"superstep {superstep} ran several nodes, which all run again"
    with usable_checkpoint_db(src), SqliteSaver.from_conn_string(str(src)) as saver:
        outer = next((t for t in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
                      if t.metadata.get("step") == superstep and t.metadata.get("source") == "loop"), None)
        if outer is None:
            return None, None, f"no checkpoint before superstep {superstep}"
        mine: dict[str, list] = {}
        for t in saver.list({"configurable": {"thread_id": thread}}):  # every namespace of the thread
            ns = t.config["configurable"].get("checkpoint_ns") or ""
            if (ns and "|" not in ns and ns.partition(":")[0] == path
                    and (t.metadata.get("parents") or {}).get("") == outer.checkpoint["id"]):
                mine.setdefault(ns, []).append(t)
        if len(mine) != 1:
            return None, None, ("the agent's graph kept no checkpoints of its own (compiled with "
                                "checkpointer=False?)" if not mine else
                                f"the agent's graph ran {len(mine)} times in node {path!r} in that superstep")
        ns, tuples = next(iter(mine.items()))
        at = next((t for t in tuples if t.metadata.get("step") == k and t.metadata.get("source") == "loop"), None)
        start = next((t for t in tuples if t.metadata.get("step") == 0 and t.metadata.get("source") == "loop"), None)
        if at is None or start is None:
            return None, None, f"no checkpoint of the agent's graph before its superstep {k}"
        handed = _messages_at(saver, start)
        if not isinstance(handed, list):
            return None, None, "the agent's graph keeps no messages in its state"
        chain = _ancestor_rows(saver.conn, thread, ns, (at.parent_config or {}).get("configurable", {})
                               .get("checkpoint_id"))
    first = min(s["step"] for s in steps if s["superstep"] == superstep and s.get("subgraph")
                and str(s["subgraph"].get("namespace") or "").split("/")[0] == path
                and s["subgraph"].get("inner_superstep") == k)
    inner = {"node": line["node"], "path": path, "inner_superstep": k, "checkpoint_ns": ns,
             "checkpoint_id": at.checkpoint["id"], "messages_in": len(handed), "first_step": first}
    return inner, (at, chain), None


def _messages_at(saver: Any, tup: Any) -> list | None:
    """The ``messages`` of a graph agent's state at checkpoint ``tup``: the stored value, or, for a
    LangGraph ``DeltaChannel`` (which stores a value only at its snapshots), the nearest snapshot
    (``seed``) followed by the writes since, as LangGraph's ancestor walk
    (``get_delta_channel_history``) gives them. Read at the agent's first checkpoint of a turn,
    where the only write is the message list the adapter handed it. None when there is no
    ``messages`` channel, or a write that is not a message list (a reducer this cannot fold)."""
    try:  # a private type of LangGraph's DeltaChannel (1.2): without it, no snapshot is read as one
        from langgraph.checkpoint.serde.types import _DeltaSnapshot
    except ImportError:
        _DeltaSnapshot = ()
    values = tup.checkpoint.get("channel_values") or {}
    if "messages" in values:
        v = values["messages"]
        return list(v.value) if isinstance(v, _DeltaSnapshot) else v
    if "messages" not in (tup.checkpoint.get("channel_versions") or {}):
        return None
    history = saver.get_delta_channel_history(config=tup.config, channels=["messages"]).get("messages") or {}
    seed = history.get("seed")
    out = list((seed.value if isinstance(seed, _DeltaSnapshot) else seed) or [])
    for _, _, v in history.get("writes") or ():
        if not isinstance(v, list):
            return None
        out.extend(v)
    return out


def _ancestor_rows(conn: Any, thread: str, ns: str, parent: str | None) -> dict[str, list[dict]]:
    """The rows (``checkpoints`` and ``writes``) of a checkpoint's ancestors in namespace ``ns``,
    from its parent ``parent`` up to the root of its chain. A LangGraph ``DeltaChannel`` stores
    its value only at snapshots: the value at a checkpoint is rebuilt from the ancestors' writes
    (``get_delta_channel_history`` walks ``parent_checkpoint_id``), so a copied checkpoint needs
    its ancestors and their writes with it (LangGraph's ``copy_thread`` contract). Rows as stored,
    ``task_path`` included: the walk orders a superstep's writes by it."""
    rows: dict[str, list[dict]] = {"checkpoints": [], "writes": []}
    while parent:
        cur = conn.execute("SELECT * FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                           (thread, ns, parent))
        names = [d[0] for d in cur.description]
        row = cur.fetchone()
        if row is None:
            break
        rows["checkpoints"].append(dict(zip(names, row)))
        cur = conn.execute("SELECT * FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                           (thread, ns, parent))
        names = [d[0] for d in cur.description]
        rows["writes"] += [dict(zip(names, r)) for r in cur.fetchall()]
        parent = rows["checkpoints"][-1]["parent_checkpoint_id"]
    return rows


def _copy_inner_checkpoint(dst: Path, thread: str, found: Any) -> None:
    """Put a graph agent's inner checkpoint into the fork's checkpoints, under its own namespace,
    without its pending writes (every task of its superstep runs again), with its parent chain
    (the ancestors and their writes, :func:`_ancestor_rows`) so that a ``DeltaChannel`` in the
    agent's state is rebuilt as it was."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    at, chain = found
    ns = at.config["configurable"]["checkpoint_ns"]
    parent = (at.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    with SqliteSaver.from_conn_string(str(dst)) as saver:
        saver.conn.execute("PRAGMA busy_timeout=30000")
        switch_to_wal(saver.conn, dst, what="checkpoint database")
        saver.setup()
        for table, rows in chain.items():
            have = {r[1] for r in saver.conn.execute(f"PRAGMA table_info({table})")}
            for row in rows:
                cols = [c for c in row if c in have]
                saver.conn.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) "
                                   f"VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
        saver.conn.commit()
        cp = at.checkpoint
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ns,
                                    **({"checkpoint_id": parent} if parent else {})}},
                  cp, {**at.metadata, "source": "fork"}, cp.get("channel_versions", {}))


def _earlier_fork(run_dir: Path) -> dict | None:
    """The ``fork`` entry of the config an earlier attempt of a fork wrote in ``run_dir``, or None."""
    from convsim.running.runner import saved_config
    path = run_dir / "config.yaml"
    if not path.exists():
        return None
    fork = saved_config(path).get("fork")
    return fork if isinstance(fork, dict) and fork.get("checkpoint_id") else None


def _fork_key(fork: dict) -> tuple:
    """What makes two forks the same (the source run's path may be spelled differently)."""
    return tuple(fork.get(k) for k in ("run_id", "variant", "session_id", "trial", "step", "superstep",
                                       "models", "set"))


def fork_run(run: str | Path, session_id: str, *, step: int, variant: str | None = None,
             trial: int = 0, models: list[str] | None = None, set_params: list[str] | None = None,
             run_id: str | None = None, out_dir: str | Path | None = None, analyze: bool = True,
             show_progress: bool = False) -> Path:
    """Run session ``session_id`` of ``run`` again from trace step ``step``; return the new run dir.

    The new run's ``config.yaml`` has ``fork: {run_id, variant, session_id, trial, step,
    superstep, checkpoint_id, models, set}`` and its ``fork_comparison.json`` compares the
    forked session with the original turn by turn (:func:`compare_sessions`).
    """
    from convsim.running.runner import Unit, execute, plan_run, run_hooks
    src = resolve_run_dir(run)
    cfg = load_config(src / "config.yaml")
    if not (src / "checkpoints.sqlite").exists():
        raise ConvsimError("the run kept no checkpoints: run it with --checkpoint to fork it",
                           file=src / "checkpoints.sqlite")
    trace_file = locate_trace(src, session_id, variant=variant, trial=trial)
    variant = trace_file.parent.name
    trace = read_trace(trace_file)
    if trace.get("fork"):
        raise ConvsimError("forking a fork is not supported: fork the original run", file=trace_file)
    steps = trace["steps"]
    if not 0 <= step < len(steps):
        raise ConvsimError(f"step must be in 0..{len(steps) - 1}", record=session_id, field="step")
    superstep = steps[step]["superstep"]
    # a superstep's parallel steps run again together: fork from the first of them
    first = min(s["step"] for s in steps if s["superstep"] == superstep)
    thread = f"{variant}/{session_id}/t{trial}"
    inner, inner_found, inner_fallback = (_inner_checkpoint(src / "checkpoints.sqlite", thread, steps, step)
                                          if steps[step].get("subgraph") else (None, None, None))
    if inner is not None:  # the node runs again, its agent's graph from its inner checkpoint
        first = inner["first_step"]
    original = _find_record(src, variant, session_id, trial)
    from convsim.running.plan import new_run_id
    new_id = run_id or new_run_id(f"{cfg.run_id}-fork-{session_id}-s{first}", out_dir or src.parent)
    fork_info: dict[str, Any] = {"run_id": cfg.run_id, "run_dir": str(src), "variant": variant,
                                 "session_id": session_id, "trial": trial, "step": first,
                                 "superstep": superstep, "models": list(models or []),
                                 "set": list(set_params or [])}
    if inner is not None:
        fork_info["inner"] = inner
    elif inner_fallback:
        fork_info["inner_fallback"] = inner_fallback
    data = cfg.model_dump()
    data["variants"] = [v for v in data["variants"] if v["name"] == variant]
    new_cfg = config_from_dict({**data, "run_id": new_id, "checkpoint": True, "trace": True,
                                "out_dir": str(out_dir) if out_dir else str(src.parent)})
    new_cfg = apply_overrides(new_cfg, models=models, set_params=set_params)
    plan = plan_run(new_cfg, source="fork")
    earlier = _earlier_fork(plan.run_dir)
    if earlier is not None or any((plan.run_dir / f).exists() for f in ("config.yaml", "results.jsonl")):
        # the same fork again (it failed, or was stopped): resume it from the checkpoint it copied
        if earlier is None or _fork_key(earlier) != _fork_key(fork_info):
            raise ConvsimError("the fork's run directory holds another run or fork: choose another --run-id",
                               file=plan.run_dir)
        fork_info = dict(earlier)  # as saved (the source run's path may be spelled otherwise this time)
    else:
        fork_info["checkpoint_id"] = _copy_checkpoint(src / "checkpoints.sqlite",
                                                      plan.run_dir / "checkpoints.sqlite", thread, superstep)
        if inner_found is not None:
            _copy_inner_checkpoint(plan.run_dir / "checkpoints.sqlite", thread, inner_found)
    plan.config = plan.config.model_copy(update={"fork": fork_info})
    plan.units = [Unit(variant, session_id, trial, int(original["seed"]), {}, resume={
        "checkpoint_id": fork_info["checkpoint_id"], "trace": cut_trace(trace, first), "fork": fork_info})]
    asyncio.run(execute(plan, show_progress=show_progress))
    errors = plan.run_dir / "errors.jsonl"
    if not (plan.run_dir / "results.jsonl").exists() or (errors.exists() and not any(
            str(r.get("session_id")) == session_id for r in iter_jsonl(plan.run_dir / "results.jsonl"))):
        last = read_jsonl(errors)[-1] if errors.exists() else {}
        raise ConvsimError(f"the forked session did not finish: {last.get('error', 'unknown error')}",
                           file=errors, record=session_id)
    forked = _find_record(plan.run_dir, variant, session_id, trial)
    forked_trace = read_trace(locate_trace(plan.run_dir, session_id, variant=variant, trial=trial))
    RunStore(plan.run_dir).write_json(COMPARISON, compare_sessions(original, forked, trace, forked_trace,
                                                                   fork=fork_info))
    if analyze:
        run_hooks(plan.run_dir, plan.config.analysis)
    return plan.run_dir


def _by_turn(rows: list[dict]) -> dict[Any, list[dict]]:
    out: dict[Any, list[dict]] = {}
    for r in rows or []:
        out.setdefault(r.get("turn"), []).append(r)
    return out


def _step_signature(step: dict) -> tuple:
    return step["node"], step["turn"], step["changed"]


def compare_sessions(original: dict, forked: dict, original_trace: dict | None = None,
                     forked_trace: dict | None = None, *, fork: dict | None = None) -> dict:
    """Turn-by-turn comparison of a forked session with its original.

    Per turn: both sides' utterances ``[speaker, text]`` and turn metrics, and whether they
    are equal. With the traces, also the first node step (from the fork point on) whose
    node, turn or state changes differ. ``identical`` is true when transcripts, turn and
    dialogue metrics and (if given) the steps from the fork point on are all equal.
    """
    o_tx, f_tx = _by_turn(original.get("transcript")), _by_turn(forked.get("transcript"))
    o_tm, f_tm = _by_turn(original.get("turn_metrics")), _by_turn(forked.get("turn_metrics"))
    turns = sorted({*o_tx, *f_tx, *o_tm, *f_tm}, key=lambda t: (t is None, t if t is not None else 0))
    rows = []
    for t in turns:
        o_utt = [[u.get("speaker"), u.get("text")] for u in o_tx.get(t, [])]
        f_utt = [[u.get("speaker"), u.get("text")] for u in f_tx.get(t, [])]
        o_met = {k: v for m in o_tm.get(t, []) for k, v in m.items() if k != "turn"}
        f_met = {k: v for m in f_tm.get(t, []) for k, v in m.items() if k != "turn"}
        metrics = {k: {"original": o_met.get(k), "forked": f_met.get(k)} for k in {**o_met, **f_met}}
        rows.append({"turn": t, "original": o_utt, "forked": f_utt,
                     "same_text": o_utt == f_utt, "same_metrics": o_met == f_met, "metrics": metrics})
    first_turn = next((r["turn"] for r in rows if not (r["same_text"] and r["same_metrics"])), None)
    o_dm, f_dm = original.get("dialogue_metrics") or {}, forked.get("dialogue_metrics") or {}
    out = {"fork": fork, "turns": rows, "first_divergent_turn": first_turn,
           "status": {"original": original.get("status", "ok"), "forked": forked.get("status", "ok")},
           "forked_error": forked.get("error"),
           "dialogue_metrics": {k: {"original": o_dm.get(k), "forked": f_dm.get(k)} for k in {**o_dm, **f_dm}},
           "first_divergent_step": None, "steps_compared": 0}
    same_steps = True
    if original_trace is not None and forked_trace is not None:
        start = (fork or {}).get("step", 0)
        o_steps = [s for s in original_trace["steps"] if s["step"] >= start]
        f_steps = [s for s in forked_trace["steps"] if s["step"] >= start]
        out["steps_compared"] = max(len(o_steps), len(f_steps))
        for i in range(out["steps_compared"]):
            o = o_steps[i] if i < len(o_steps) else None
            f = f_steps[i] if i < len(f_steps) else None
            if o is None or f is None or _step_signature(o) != _step_signature(f):
                keys = sorted({*((o or {}).get("changed") or {}), *((f or {}).get("changed") or {})})
                out["first_divergent_step"] = {
                    "step": start + i,
                    "original": o and {"node": o["node"], "turn": o["turn"], "keys": sorted(o["changed"])},
                    "forked": f and {"node": f["node"], "turn": f["turn"], "keys": sorted(f["changed"])},
                    "differing_keys": [k for k in keys if (o or {}).get("changed", {}).get(k)
                                       != (f or {}).get("changed", {}).get(k)]}
                same_steps = False
                break
    out["identical"] = (first_turn is None and o_dm == f_dm and same_steps
                        and out["status"]["original"] == out["status"]["forked"])
    return out
