"""The process-pool executor, for CPU-bound runs (rule-based agents, heuristic judges).

Threads cannot run Python nodes in parallel, so ``executor: process`` runs sessions in worker
processes. Each worker plans the run once (params, models, compiled graphs) and receives the
session attempts one by one; the parent pulls them from the lazy plan with a bounded number in
flight and lands each outcome through the run's single writer, so results, traces and resuming
are exactly as with the asyncio executor. Session seeds do not depend on where a session runs:
the executor changes throughput, never results.

Workers end when the parent dies, even by ``kill -9``: on Linux they ask the kernel for SIGKILL
on the parent's death (``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread watches ``os.getppid()``.
"""
from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
import sqlite3
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Iterator

from . import limits
from .config import ExperimentConfig
from .plan import plan_run
from .session import Outcome, Unit, all_sync, run_session_async, run_session_blocking

_PLAN: Any = None
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` ends (it is the parent when this is called)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before the request took effect
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:  # portable fallback: poll for being re-parented
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, name="convsim-parent-watch", daemon=True).start()


def _init_worker(config_json: str, parent_pid: int | None = None) -> None:
    """Plan the run once in this worker (``parent_pid``: end with that process; Ray manages its own)."""
    global _PLAN
    if parent_pid is not None:
        die_with_parent(parent_pid)
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
    _PLAN = plan


# what the driver reads of a landed record; the rest travels as its encoded line only
_DRIVER_FIELDS = ("variant", "session_id", "trial", "status")


def _run_in_worker(unit: Unit) -> Outcome:
    events: list = []
    if _PLAN.variants[unit.variant].sync_nodes:
        outcome = run_session_blocking(_PLAN, unit, events.append)
    else:
        outcome = asyncio.run(run_session_async(_PLAN, unit, events.append))
    outcome.events = events
    # the driver writes record_line and the rendered trace as they are: sending the record's
    # state (transcript, metrics...) as well would only cost pickling on both sides
    outcome.record = {k: outcome.record.get(k) for k in _DRIVER_FIELDS}
    return outcome


async def run_in_processes(plan: Any, todo: Iterator[Unit], land, observe, *, workers: int | None,
                           stop=lambda: False) -> None:
    """Run the units of ``todo`` in ``workers`` processes; ``land(outcome)`` as each one finishes.

    At most two units per worker are in flight, so the plan is never materialised.
    """
    todo = iter(todo)
    first = next(todo, None)
    if first is None:
        return
    n = max(1, workers or os.cpu_count() or 1)
    loop = asyncio.get_running_loop()
    # spawn, not fork: the parent holds threads (asyncio, SQLite) that must not be forked
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker,
                             initargs=(limits.config_for_workers(plan.config, n).model_dump_json(), os.getpid())) as pool:
        pending: set = {loop.run_in_executor(pool, _run_in_worker, first)}

        def submit_next() -> bool:
            unit = None if stop() else next(todo, None)  # a spent budget starts no new session
            if unit is not None:
                pending.add(loop.run_in_executor(pool, _run_in_worker, unit))
            return unit is not None
        while len(pending) < 2 * n and submit_next():
            pass
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                pending.discard(fut)
                outcome = fut.result()
                for event in outcome.events:
                    observe(event)
                land(outcome)
                submit_next()
