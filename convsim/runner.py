"""Running an experiment: plan the session attempts, execute them, land each result as it finishes.

The asyncio executor bounds the sessions in flight; ``executor: process`` hands them to a process
pool (convsim/process_executor.py). Either way one writer appends to ``results.jsonl``.

The unit of work is one session attempt ``(variant, session_id, trial)``. Its seed comes
from the base seed, the session id and the trial (not the variant), so variants are paired.
"""
from __future__ import annotations

import asyncio
import importlib
import sqlite3
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .config import ExperimentConfig, apply_overrides, load_config
from .errors import ConvsimError
from .graphfile import load_graph_module
from .models import parse_model_spec
from .progress import LiveProgress
from .seeding import session_seed
from .store import RunStore
from .summary import summarise_run
from .session import Outcome, Unit, all_sync, run_session_async, run_session_blocking, trace_path


@dataclass
class VariantPlan:
    name: str
    params: Any
    models: dict[str, Any]  # role -> ModelSpec
    compiled: Any = None
    sync_nodes: bool = False  # every node has a sync implementation (see session.all_sync)


@dataclass
class Plan:
    config: ExperimentConfig
    module: Any
    variants: dict[str, VariantPlan]
    units: list[Unit]
    run_dir: Path
    cache: Any = None


def _params(module, overrides: dict, where: str):
    try:
        return module.Params(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        raise ConvsimError(err.get("msg", "invalid value"), file=where, field=f"params.{loc}") from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def plan_run(cfg: ExperimentConfig, *, source: str = "config") -> Plan:
    """Resolve the graph, the params of every variant and the list of session attempts."""
    module = load_graph_module(cfg.graph)
    run_id = cfg.run_id or f"{cfg.name}-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}"
    cfg = cfg.model_copy(update={"run_id": run_id})
    run_dir = Path(cfg.out_dir) / run_id
    variants: dict[str, VariantPlan] = {}
    units: list[Unit] = []
    for var in cfg.resolved_variants():
        params = _params(module, _merge(cfg.params, var.params), f"{source} (variant {var.name})")
        models = {role: parse_model_spec(spec, where=f"models.{role}")
                  for role, spec in {**cfg.models, **var.models}.items()}
        variants[var.name] = VariantPlan(var.name, params, models)
        base_ctx = module.Context(params=params, seed=cfg.seed, embedder_spec=cfg.embedder,
                                  run_dir=str(run_dir))
        inits = []
        for i, init in enumerate(module.sessions(params, base_ctx)):
            if cfg.sessions is not None and i >= cfg.sessions:
                break
            if not isinstance(init, dict) or not init.get("session_id"):
                raise ConvsimError("sessions() must yield dicts with a session_id", file=cfg.graph,
                                   record=i)
            inits.append(init)
        ids = [str(x["session_id"]) for x in inits]
        if len(set(ids)) != len(ids):
            raise ConvsimError("sessions() yielded duplicate session_ids", file=cfg.graph)
        for trial in range(cfg.trials):
            for init in inits:
                sid = str(init["session_id"])
                units.append(Unit(var.name, sid, trial, session_seed(cfg.seed, sid, trial), init))
    cache = None
    if cfg.cache:
        from .cache import ResponseCache
        cache = ResponseCache(cfg.cache)
    return Plan(cfg, module, variants, units, run_dir, cache)


def land(outcome: Outcome, plan: Plan, store: RunStore, progress: LiveProgress) -> None:
    """The single writer: a finished session's trace, then its record (or its infra error)."""
    if outcome.infra_error is not None:
        store.append_error(outcome.infra_error)
        progress.advance(failed=True)
        return
    if outcome.trace is not None:
        outcome.trace.write(trace_path(plan.run_dir, *outcome.unit_key))
    store.append(outcome.record)
    progress.advance(failed=outcome.record["status"] != "ok")


async def _run_unit(plan: Plan, unit: Unit, store: RunStore, progress: LiveProgress) -> None:
    vp = plan.variants[unit.variant]
    if vp.sync_nodes:
        # All nodes are plain functions: stream the session in one worker thread rather than
        # hopping to the executor for every node (much cheaper for rule-based sessions).
        outcome = await asyncio.to_thread(run_session_blocking, plan, unit, progress.observe)
    else:
        outcome = await run_session_async(plan, unit, progress.observe)
    land(outcome, plan, store, progress)


def prepare_checkpoint_db(path: Path) -> None:
    """Create the checkpoint tables and switch the file to WAL, once, before any saver opens it.

    WAL with a busy timeout lets several processes write one file. Switching to WAL needs a moment
    with no other writer, and SQLite may answer "locked" at once instead of waiting (or leave the
    mode unchanged inside a transaction), so it is done here on a fresh connection and retried; the
    mode is stored in the file, so later connections only set their busy timeout.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        for attempt in range(200):
            try:
                if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() == "wal":
                    break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
            time.sleep(0.05)
        else:
            raise ConvsimError("cannot switch the checkpoint database to WAL (locked)", file=path)
        SqliteSaver(conn).setup()
    finally:
        conn.close()


async def _checkpointer(stack: AsyncExitStack, run_dir: Path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    path = run_dir / "checkpoints.sqlite"
    await asyncio.to_thread(prepare_checkpoint_db, path)
    saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(path)))
    await saver.conn.execute("PRAGMA busy_timeout=30000")
    return saver


# What may differ when a run is started again: how it runs, not what it computes.
_RESUME_FREE = {"run_id", "out_dir", "concurrency", "executor", "workers", "sessions", "trace", "analysis",
                "cache"}


def _check_resumable(cfg: ExperimentConfig, cfg_path: Path) -> None:
    """A restarted run must compute the same thing; mixing two configs in one results.jsonl is an error."""
    old = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
    new = cfg.model_dump(mode="json")
    for key in sorted(set(old) | set(new)):
        if key not in _RESUME_FREE and old.get(key) != new.get(key):
            raise ConvsimError(f"the run exists with a different {key!r}: resume it with the same config "
                               "or choose another --run-id", file=cfg_path, field=key)


async def execute(plan: Plan, *, show_progress: bool = True) -> Path:
    cfg = plan.config
    store = RunStore(plan.run_dir)
    done = store.done_keys()
    todo = [u for u in plan.units if (u.variant, u.session_id, u.trial) not in done]
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = plan.run_dir / "config.yaml"
    if cfg_path.exists():
        _check_resumable(cfg, cfg_path)
    if not cfg_path.exists() or cfg.sessions != yaml.safe_load(cfg_path.read_text()).get("sessions"):
        cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    store.open()
    try:
        async with AsyncExitStack() as stack:
            use_processes = cfg.executor == "process" and todo and not any(u.resume for u in todo)
            saver = None
            if cfg.checkpoint and use_processes:
                prepare_checkpoint_db(plan.run_dir / "checkpoints.sqlite")  # workers open their own
            elif cfg.checkpoint:
                saver = await _checkpointer(stack, plan.run_dir)
            for vp in plan.variants.values():
                vp.compiled = plan.module.build(vp.params).compile(checkpointer=saver)
                vp.sync_nodes = all_sync(vp.compiled)
            sem = asyncio.Semaphore(cfg.concurrency)
            with LiveProgress(total=len(plan.units), done=len(plan.units) - len(todo),
                              enabled=show_progress, label=cfg.run_id) as progress:
                if use_processes:
                    from .process_executor import run_in_processes
                    await run_in_processes(plan, todo, lambda o: land(o, plan, store, progress),
                                           progress.observe, workers=cfg.workers)
                else:
                    async def guarded(unit: Unit) -> None:
                        async with sem:
                            await _run_unit(plan, unit, store, progress)
                    await asyncio.gather(*(guarded(u) for u in todo))
    finally:
        store.close()
    summarise_run(plan.run_dir, plan.module, seed=cfg.seed)
    return plan.run_dir


def run_hooks(run_dir: Path, hooks: list[str], *, warn=print) -> None:
    """Post-run analysis hooks (``module:function``), e.g. stats, figures and the report."""
    for hook in hooks:
        mod_name, _, fn_name = hook.partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name or "main")
        except (ImportError, AttributeError) as exc:
            warn(f"analysis hook {hook} unavailable: {exc}")
            continue
        fn(Path(run_dir))


def run(config: str | Path | ExperimentConfig, *, show_progress: bool = False, analyze: bool = True,
        **overrides) -> Path:
    """Run an experiment (config path or object) and return its run directory.

    ``overrides`` are those of the command line: sessions, seed, models (``["crs=none"]``),
    set_params (``["n_turns=5"]``), run_id, out_dir, concurrency, trials, checkpoint, trace.
    A run whose directory already holds results resumes: finished sessions are skipped.
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    if any(v is not None for v in overrides.values()):
        cfg = apply_overrides(cfg, **overrides)
    plan = plan_run(cfg, source=str(config) if not isinstance(config, ExperimentConfig) else "config")
    run_dir = asyncio.run(execute(plan, show_progress=show_progress))
    if analyze:
        run_hooks(run_dir, cfg.analysis)
    return run_dir
