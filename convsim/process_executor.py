"""The process-pool executor, for CPU-bound runs (rule-based agents, heuristic judges).

Threads cannot run Python nodes in parallel, so ``executor: process`` runs sessions in worker
processes. Each worker plans the run once (the same deterministic session list), compiles the
graphs, and sends back each session's outcome; the parent lands it through the run's single
writer, so results, traces and resuming are exactly as with the asyncio executor. Session seeds
do not depend on where a session runs: the executor changes throughput, never results.
"""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import sqlite3
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from . import limits
from .config import ExperimentConfig
from .plan import plan_run
from .session import Outcome, all_sync, run_session_async, run_session_blocking

_PLAN: Any = None
_UNITS: dict = {}


def _init_worker(config_json: str) -> None:
    global _PLAN, _UNITS
    cfg = ExperimentConfig.model_validate_json(config_json)
    limits.activate(cfg.limits)  # this worker's share (see limits.worker_share)
    plan = plan_run(cfg)
    saver = None
    if cfg.checkpoint:
        from langgraph.checkpoint.sqlite import SqliteSaver
        # the parent made the tables and switched the file to WAL (plan.prepare_checkpoint_db)
        conn = sqlite3.connect(plan.run_dir / "checkpoints.sqlite", check_same_thread=False, timeout=30)
        conn.execute("PRAGMA busy_timeout=30000")
        saver = SqliteSaver(conn)
        saver.is_setup = True
    for vp in plan.variants.values():
        vp.compiled = plan.module.build(vp.params).compile(checkpointer=saver)
        vp.sync_nodes = all_sync(vp.compiled)
    _PLAN, _UNITS = plan, {u.key: u for u in plan.units}


def _run_in_worker(key: tuple[str, str, int]) -> Outcome:
    unit = _UNITS[key]
    events: list = []
    if _PLAN.variants[unit.variant].sync_nodes:
        outcome = run_session_blocking(_PLAN, unit, events.append)
    else:
        outcome = asyncio.run(run_session_async(_PLAN, unit, events.append))
    outcome.events = events
    return outcome


async def run_in_processes(plan: Any, todo: list, land, observe, *, workers: int | None) -> None:
    """Run ``todo`` in a pool of ``workers`` processes; ``land(outcome)`` as each one finishes."""
    n = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    loop = asyncio.get_running_loop()
    # spawn, not fork: the parent holds threads (asyncio, SQLite) that must not be forked
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker,
                             initargs=(limits.config_for_workers(plan.config, n).model_dump_json(),)) as pool:
        futures = [loop.run_in_executor(pool, _run_in_worker, u.key) for u in todo]
        for fut in asyncio.as_completed(futures):
            outcome = await fut
            for event in outcome.events:
                observe(event)
            land(outcome)
