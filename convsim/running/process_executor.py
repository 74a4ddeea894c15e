"""The process-pool executor, for CPU-bound runs (rule-based agents, heuristic judges).

Threads cannot run Python nodes in parallel, so ``executor: process`` runs sessions in worker
processes. Each worker plans the run once (params, models, compiled graphs) and runs
``ceil(concurrency / workers)`` sessions at once in threads (for LLM-bound runs: sessions waiting
on a server leave the core to the others; one process's GIL no longer caps the sessions in
flight). The parent pulls session attempts from the lazy plan with a bounded number in flight
and lands each outcome through the run's single writer, so results, traces and resuming are
exactly as with the asyncio executor. Session seeds do not depend on where a session runs:
the executor changes throughput, never results.

Once every session has landed, a worker ends with ``os._exit(0)`` after flushing its output: the
interpreter's teardown took ~3 s per worker on a loaded machine, which the driver waited for.
Exit handlers (``atexit``) registered in a worker do not run (tests/test_process_worker_exit.py).

A graceful stop (the driver's first SIGTERM / SIGINT: convsim.providers.stopping) reaches the
workers through a shared event: each worker then requests the stop in its own process, so its HTTP
calls in flight are cancelled, no model call or session starts, and its running sessions are
abandoned at their next node boundary; a worker answers each abandoned (or still queued) session
with ``None``, which the driver drops (never written: it runs again on resume). A worker that has
not answered for every session within ``STOP_GRACE_S`` (a node stuck in code nothing can cancel)
is killed.

Workers end when the parent dies, even by ``kill -9``: on Linux they ask the kernel for SIGKILL
on the parent's death (``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread watches ``os.getppid()``.
"""
from __future__ import annotations

import asyncio
import ctypes
import math
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing import connection
from typing import Any, Iterator

from convsim.providers import limits, stopping
from convsim.config import ExperimentConfig
from convsim.errors import ConvsimError
from convsim.running.plan import plan_run
from convsim.running.progress import turn_metrics_event
from convsim.running.session import Outcome, Unit, all_sync, run_session_async, run_session_blocking
from convsim.running.sqlitewal import connect

_PLAN: Any = None
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_GRACE_S = 5.0  # after a stop, how long the driver waits for the workers to abandon their sessions
POLL_S = 0.5  # how often the driver's wait for an outcome looks at a stop request


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


def _init_worker(config_json: str, parent_pid: int | None = None, broker: Any = None) -> None:
    """Plan the run once in this worker (``parent_pid``: end with that process; Ray manages its own;
    ``broker``: the run's limits, which the driver serves to every worker: limits.activate)."""
    global _PLAN
    if parent_pid is not None:
        die_with_parent(parent_pid)
    cfg = ExperimentConfig.model_validate_json(config_json)
    limits.activate(cfg.limits, broker)  # every call asks the run's limits (one budget, one pacer)
    plan = plan_run(cfg, source="worker")
    saver = None
    if cfg.checkpoint:
        from langgraph.checkpoint.sqlite import SqliteSaver
        # the parent made the tables and switched the file to WAL (plan.prepare_checkpoint_db)
        conn = connect(plan.run_dir / "checkpoints.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.is_setup = True
    for vp in plan.variants.values():
        vp.compiled = plan.module.build(vp.params).compile(checkpointer=saver)
        vp.sync_nodes = all_sync(vp.compiled)
    _PLAN = plan


# what the driver reads of a landed record; the rest travels as its encoded line only
_DRIVER_FIELDS = ("variant", "session_id", "trial", "status")


def _run_in_worker(unit: Unit | bytes) -> Outcome | None:
    """One session in a worker; None when a stop abandoned it (or came before it started)."""
    if stopping.requested():  # queued before the stop: never started
        return None
    if isinstance(unit, bytes):  # pickled by the driver (see portable_unit)
        unit = pickle.loads(unit)
    events: list = []

    def observe(event: object) -> None:  # only what the driver's progress bar reads: plain data
        if (plain := turn_metrics_event(event)) is not None:
            events.append(plain)
    if _PLAN.variants[unit.variant].sync_nodes:
        outcome = run_session_blocking(_PLAN, unit, observe)
    else:
        outcome = asyncio.run(run_session_async(_PLAN, unit, observe))
    if outcome is None:  # abandoned by a stop: the driver drops it
        return None
    outcome.events = events
    # the driver writes record_line and the rendered trace as they are: sending the record's
    # state (transcript, metrics...) as well would only cost pickling on both sides
    outcome.record = {k: outcome.record.get(k) for k in _DRIVER_FIELDS}
    return outcome


def portable_unit(unit: Unit, graph: Any) -> bytes:
    """``unit`` pickled for a worker process; a session whose initial state (from the graph's
    ``sessions()``) does not pickle is bad input: one line naming the graph file and the session."""
    try:
        return pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 — pickle raises several types
        raise ConvsimError(f"session {unit.session_id}: the initial state sessions() gave cannot be sent to a "
                           f"worker process ({type(exc).__name__}: {exc}); yield plain data, or run with "
                           "--executor async", file=getattr(graph, "__file__", None), record=unit.session_id,
                           field="sessions") from None


def sessions_per_worker(concurrency: int, workers: int) -> int:
    """Sessions each process or Ray worker runs at once (in threads): ``concurrency`` is the run's
    sessions in flight on every executor, spread evenly (at least one per worker)."""
    return max(1, math.ceil(concurrency / max(1, workers)))


def _portable(exc: BaseException) -> BaseException:
    """What the driver raises for an exception in a worker: bad input (a ConvsimError) as it is, for
    its one clear line; anything else (a bug) as a RuntimeError carrying the worker's traceback."""
    if isinstance(exc, ConvsimError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 — a field that does not pickle: keep the message
            return ConvsimError(str(exc))
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return RuntimeError(f"{type(exc).__name__} in a worker process: {exc}\n{trace}")


def _serve(inbox, outbox, send_lock: threading.Lock) -> None:
    """One session thread of a worker: run units from ``inbox`` until the ``None`` that ends it."""
    while True:
        unit = inbox.get()
        if unit is None:
            return
        try:
            got: Any = _run_in_worker(unit)
        except BaseException as exc:  # noqa: BLE001 — bad input or a bug: the driver stops the run
            got = _portable(exc)
        with send_lock:  # sent before the next unit starts: a worker killed later loses nothing sent
            try:
                outbox.send(got)  # pickles first: nothing is written when that fails
            except Exception as exc:  # noqa: BLE001 — a bug: the driver must hear of it, not wait forever
                try:
                    outbox.send(_portable(exc))
                except Exception:  # noqa: BLE001 — the pipe is gone: end, so the driver sees the worker end
                    os._exit(1)


def relay_stop(asked: Any, where: str) -> None:
    """Request a graceful stop in this worker process once ``asked`` (the driver's event) is set:
    a thread waits for it. The worker honours a stop from then on (stopping.running), so a retry's
    back-off is cut short too."""
    stopping.running().__enter__()  # for the worker's lifetime

    def wait() -> None:
        asked.wait()
        stopping.request(f"the driver was asked to stop ({where})")
    threading.Thread(target=wait, name="convsim-stop-relay", daemon=True).start()


def _worker_main(config_json: str, parent_pid: int, threads: int, inbox, outbox, broker: Any = None,
                 stop_asked: Any = None) -> None:
    """A worker process: plan the run once, then ``threads`` threads each run one session at a time;
    ``stop_asked``: the driver's graceful stop (relay_stop)."""
    # Ctrl-C reaches the whole process group, and so may SIGTERM (a batch scheduler ending the job): the
    # driver stops the run and ends its workers, which would otherwise each print a KeyboardInterrupt
    # traceback, or die first and make the stop look like a worker's crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if stop_asked is not None:  # the driver's stop reaches the worker this way instead
        relay_stop(stop_asked, "process worker")
    try:
        _init_worker(config_json, parent_pid, broker)
    except BaseException as exc:  # noqa: BLE001 — a malformed catalog...: one clear line in the driver
        outbox.send(_portable(exc))
        return
    send_lock = threading.Lock()
    pool = [threading.Thread(target=_serve, args=(inbox, outbox, send_lock), name=f"convsim-session-{i}",
                             daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    # every session thread ended at its None, after its last outcome was sent (and each session's
    # checkpoints were committed when its stream ended): nothing is left to do. The interpreter's
    # teardown (garbage-collecting LangGraph's, LangChain's and pydantic's module graphs) took 3 s
    # of wall time per worker on a loaded 2-core machine, and the driver waits for it (join) before
    # it can summarise the run: end without it.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 — a closed stream: nothing to flush
            pass
    os._exit(0)


_NOTHING = object()  # _next_result: nothing arrived within its timeout


def _next_result(readers: dict, procs: list, timeout: float | None = None) -> Any:
    """The next outcome (or exception; None: a session a stop abandoned) a worker sent, or
    ``_NOTHING`` after ``timeout`` seconds; a worker that ended without one is an error.
    ``readers``: each worker's end of its pipe, by process."""
    while True:
        ready = set(connection.wait([*readers.values(), *(p.sentinel for p in procs)], timeout))
        if not ready:
            return _NOTHING
        for proc, reader in readers.items():
            if reader not in ready and proc.sentinel not in ready:
                continue
            try:
                if reader in ready or reader.poll():  # what it sent before it ended is still read
                    return reader.recv()
            except EOFError:  # its pipe closed: the worker ended
                pass
            proc.join()
            from convsim.running.worker_death import death_cause
            raise ConvsimError(f"a worker process ended ({death_cause(proc.exitcode)}); finished "
                               "sessions are kept, run again to resume", field="executor")


async def run_in_processes(plan: Any, todo: Iterator[Unit], land, observe, *, workers: int | None,
                           stop=lambda: False) -> None:
    """Run the units of ``todo`` in ``workers`` processes; ``land(outcome)`` as each one finishes.

    Each process runs :func:`sessions_per_worker` sessions at once, in threads (sessions waiting
    on a model server leave the process's core to the others), and holds one more queued so it
    never waits for this driver; the plan is never materialised.
    """
    todo = iter(todo)
    first = next(todo, None)
    if first is None:
        return
    n = max(1, workers or os.cpu_count() or 1)
    per_worker = sessions_per_worker(plan.config.concurrency, n)
    # spawn, not fork: the parent holds threads (asyncio, SQLite) that must not be forked
    ctx = multiprocessing.get_context("spawn")
    # the run's limits live in one process that every worker's calls ask (limits.serve_to_processes)
    with limits.serve_to_processes(plan.config.limits, ctx) as broker:
        await _run_workers(plan, todo, first, land, observe, ctx, n, per_worker, broker, stop)


async def _run_workers(plan: Any, todo: Iterator[Unit], first: Unit, land, observe, ctx, n: int,
                       per_worker: int, broker: Any, stop) -> None:
    inbox = ctx.Queue()
    stop_asked = ctx.Event()  # the driver's graceful stop, relayed to every worker (relay_stop)

    def relay() -> None:  # runs in the driver's signal handler: only sets the event
        stop_asked.set()
    stopping.on_request(relay)
    if stopping.requested():
        relay()
    config_json = plan.config.model_dump_json()
    readers = {}
    for i in range(n):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker_main, args=(config_json, os.getpid(), per_worker, inbox, writer, broker,
                                                           stop_asked),
                           name=f"convsim-worker-{i}")  # not daemonic: a node may start processes
        proc.start()
        writer.close()  # the worker's end: a worker that dies closes its pipe
        readers[proc] = reader
    procs = list(readers)
    loop = asyncio.get_running_loop()
    queued = [first]
    in_flight = 0

    def submit_next() -> bool:
        nonlocal in_flight
        unit = None if stop() else (queued.pop() if queued else next(todo, None))  # a spent budget starts none
        if unit is None:
            return False
        inbox.put(portable_unit(unit, plan.module))
        in_flight += 1
        return True
    try:
        while in_flight < n * (per_worker + 1) and submit_next():
            pass
        give_up = None  # after a stop: when the sessions the workers have not abandoned yet are dropped
        while in_flight:
            got = await loop.run_in_executor(None, _next_result, readers, procs, POLL_S)
            if stopping.requested() and give_up is None:
                give_up = time.monotonic() + STOP_GRACE_S
            if got is _NOTHING:
                if give_up is not None and time.monotonic() > give_up:
                    break  # a worker stuck in a node nothing cancels: killed below
                continue
            if isinstance(got, BaseException):
                raise got
            in_flight -= 1
            if got is None:  # abandoned by the stop: never written, it runs again on resume
                continue
            for event in got.events:
                observe(event)
            land(got)
            submit_next()
    finally:
        stopping.forget(relay)
        if in_flight == 0:  # every session landed: each session thread ends at its None
            for _ in range(n * per_worker):
                inbox.put(None)
        for proc in procs:
            if in_flight:  # stopped by an error, Ctrl-C or SIGTERM: the sessions still running are dropped
                proc.kill()  # (workers ignore SIGTERM: see _worker_main)
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        inbox.cancel_join_thread()
        inbox.close()
        for reader in readers.values():
            reader.close()
