"""Planning a run: the graph module, every variant's params and models, and the session attempts.

Shared by every executor (the runner in the parent, the process-pool and Ray workers), so that
each one plans the same deterministic list of session attempts from the same config.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config import ExperimentConfig
from .errors import ConvsimError
from .graphfile import load_graph_module
from .models import parse_model_spec
from .prefix import attach_prefixes
from .seeding import session_seed
from .session import Unit


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
        inits = attach_prefixes(inits, cfg.prefix)
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


