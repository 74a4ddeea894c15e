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

Workers start from a fork server where the platform has one (Linux, macOS): one process per driver,
started at the first process run, imports LangGraph, LangChain and convsim once
(:mod:`convsim.running.forkserver_preload`), and forks every worker from that state, so a worker
starts in well under a second instead of importing them again (several seconds each on a loaded
2-core machine, during which the run had one worker or none). A forked worker takes the driver's
environment, working directory and ``sys.path`` of the moment it starts (not the fork server's),
so a worker sees what a spawned one would. Elsewhere workers are spawned.

Each worker has its own inbox: the driver keeps ``sessions_per_worker + 1`` sessions at each worker
(one queued, so a worker never waits for the driver) and refills the least-held worker. With one
queue shared by all workers, the first worker to start took the queue's lock from its session
threads over and over, and the second one waited seconds for work.

Workers end when the driver dies, even by ``kill -9``: each watches the driver's sentinel (a pipe
that closes when the driver dies); on Linux they also ask the kernel for SIGKILL on their parent's
death (``prctl(PR_SET_PDEATHSIG)``; the parent is the fork server, or the driver for a spawned
worker), elsewhere a thread watches ``os.getppid()``.
"""
from __future__ import annotations

import asyncio
import ctypes
import math
import multiprocessing
import os
import pickle
import queue
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
    """End this process when ``parent_pid`` (its parent when this is called) ends, and when the
    process that started it (multiprocessing's parent: the driver) ends.

    A spawned worker's parent is the driver; a forked worker's is the fork server, and each worker
    holds the fork server's "alive" pipe open, so the fork server outlives a killed driver as long
    as its workers live: the driver's own end is watched as well (its sentinel, a pipe that closes
    when it dies, even by ``kill -9``).
    """
    watched = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before the request took effect
                    os._exit(1)
                watched = True
        except (OSError, AttributeError):
            pass
    starter = multiprocessing.parent_process()
    if starter is not None and starter.sentinel is not None:
        def watch_starter() -> None:
            connection.wait([starter.sentinel])  # ready once the driver is gone
            os._exit(1)
        threading.Thread(target=watch_starter, name="convsim-driver-watch", daemon=True).start()
    if watched:
        return

    def watch() -> None:  # portable fallback: poll for being re-parented
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, name="convsim-parent-watch", daemon=True).start()


def adopt_driver_environment(where: dict) -> None:
    """Take the driver's environment variables, working directory and import path, as
    :func:`driver_environment` read them: a worker forked from the fork server starts with the fork
    server's, which are the driver's of the moment the server started."""
    os.environ.clear()
    os.environ.update(where["environ"])
    os.chdir(where["cwd"])
    sys.path[:] = where["sys_path"]


def driver_environment() -> dict:
    """What :func:`adopt_driver_environment` gives a worker."""
    return {"environ": dict(os.environ), "cwd": os.getcwd(), "sys_path": list(sys.path)}


def _init_worker(config_json: str, parent_pid: int | None = None, broker: Any = None) -> None:
    """Plan the run once in this worker (``parent_pid``: end with that process, the worker's parent;
    Ray manages its own; ``broker``: the run's limits, which the driver serves to every worker:
    limits.activate)."""
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


THREADS_PER_WORKER = 32  # session threads a worker runs at most when ``workers`` is not given


def default_workers(concurrency: int) -> int:
    """Worker processes when the run does not say: one per core, and more when the sessions in
    flight would give a worker over :data:`THREADS_PER_WORKER` threads. Sessions waiting on a server
    cost a worker no core, but each answer waits for the worker's GIL behind its other threads:
    at 128 sessions in flight against a 0.5 s endpoint on 2 cores, 2 workers of 64 threads kept
    89-90 % of the ideal rate in steady state, 4 of 32 kept 94-96 % (bench/agents.py)."""
    return max(os.cpu_count() or 1, math.ceil(concurrency / THREADS_PER_WORKER))


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


def _serve(inbox: queue.SimpleQueue, outbox, send_lock: threading.Lock) -> None:
    """One session thread of a worker: run units from ``inbox`` (the worker's own, fed by
    :func:`_receive`) until the ``None`` that ends it."""
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


def _receive(inbox, local: queue.SimpleQueue, threads: int) -> None:
    """The worker's receiving thread: the driver's units from ``inbox`` (this worker's own queue) to
    the session threads' ``local`` queue; the driver's ``None`` ends every session thread."""
    while True:
        try:
            unit = inbox.get()
        except (EOFError, OSError):  # the driver is gone: end the session threads
            unit = None
        if unit is None:
            for _ in range(threads):
                local.put(None)
            return
        local.put(unit)


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
                 stop_asked: Any = None, where: dict | None = None) -> None:
    """A worker process: plan the run once, then ``threads`` threads each run one session at a time
    from this worker's ``inbox``; ``stop_asked``: the driver's graceful stop (relay_stop);
    ``where``: the driver's environment (adopt_driver_environment); ``parent_pid``: the process
    whose end ends this one (the fork server, or the driver for a spawned worker)."""
    if where is not None:
        adopt_driver_environment(where)
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
    local: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_receive, args=(inbox, local, threads), name="convsim-inbox", daemon=True).start()
    pool = [threading.Thread(target=_serve, args=(local, outbox, send_lock), name=f"convsim-session-{i}",
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


def _next_result(readers: dict, procs: list, timeout: float | None = None) -> tuple[Any, Any]:
    """The worker that sent and the next outcome (or exception; None: a session a stop abandoned) it
    sent, or ``(None, _NOTHING)`` after ``timeout`` seconds; a worker that ended without one is an
    error. ``readers``: each worker's end of its pipe, by process."""
    while True:
        ready = set(connection.wait([*readers.values(), *(p.sentinel for p in procs)], timeout))
        if not ready:
            return None, _NOTHING
        for proc, reader in readers.items():
            if reader not in ready and proc.sentinel not in ready:
                continue
            try:
                if reader in ready or reader.poll():  # what it sent before it ended is still read
                    return proc, reader.recv()
            except EOFError:  # its pipe closed: the worker ended
                pass
            proc.join()
            from convsim.running.worker_death import death_cause
            raise ConvsimError(f"a worker process ended ({death_cause(proc.exitcode)}); finished "
                               "sessions are kept, run again to resume", field="executor")


PRELOAD = "convsim.running.forkserver_preload"  # what the fork server imports once


def worker_context() -> tuple[Any, int | None]:
    """The multiprocessing context the workers start from, and the pid of the process they will
    be children of (the fork server; None: this process, for spawned workers).

    The fork server is started here (once per driver process; later runs reuse it), importing
    :data:`PRELOAD`; not fork from this process: the driver holds threads (asyncio, SQLite) that
    must not be forked.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn"), None
    from multiprocessing import forkserver
    ctx = multiprocessing.get_context("forkserver")
    server = forkserver._forkserver
    preload = [m for m in getattr(server, "_preload_modules", []) if m != "__main__"]
    if PRELOAD not in preload:  # kept: what a program set for its own fork server
        ctx.set_forkserver_preload([*preload, PRELOAD])
    forkserver.ensure_running()
    return ctx, getattr(server, "_forkserver_pid", None)


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
    n = workers or default_workers(plan.config.concurrency)
    per_worker = sessions_per_worker(plan.config.concurrency, n)
    ctx, parent_pid = await asyncio.to_thread(worker_context)  # the first start imports for a few seconds
    # the run's limits live in one process that every worker's calls ask (limits.serve_to_processes)
    with limits.serve_to_processes(plan.config.limits, ctx) as broker:
        await _run_workers(plan, todo, first, land, observe, ctx, parent_pid, n, per_worker, broker, stop)


async def _run_workers(plan: Any, todo: Iterator[Unit], first: Unit, land, observe, ctx, parent_pid: int | None,
                       n: int, per_worker: int, broker: Any, stop) -> None:
    stop_asked = ctx.Event()  # the driver's graceful stop, relayed to every worker (relay_stop)

    def relay() -> None:  # runs in the driver's signal handler: only sets the event
        stop_asked.set()
    stopping.on_request(relay)
    if stopping.requested():
        relay()
    config_json = plan.config.model_dump_json()
    where = driver_environment()
    readers, inboxes = {}, {}
    for i in range(n):
        reader, writer = ctx.Pipe(duplex=False)
        inbox = ctx.Queue()  # this worker's own: no lock shared with the other workers
        proc = ctx.Process(target=_worker_main, args=(config_json, parent_pid or os.getpid(), per_worker, inbox,
                                                           writer, broker, stop_asked, where),
                           name=f"convsim-worker-{i}")  # not daemonic: a node may start processes
        proc.start()
        writer.close()  # the worker's end: a worker that dies closes its pipe
        readers[proc], inboxes[proc] = reader, inbox
    procs = list(readers)
    loop = asyncio.get_running_loop()
    queued = [first]
    held = dict.fromkeys(procs, 0)  # sessions sent to each worker and not answered yet

    def fill() -> None:
        """Sessions to the least-held workers, up to ``per_worker + 1`` each (the run's concurrency
        spread evenly, one queued so that a worker never waits for this driver)."""
        while True:
            proc = min(procs, key=held.__getitem__)
            if held[proc] > per_worker:
                return
            unit = None if stop() else (queued.pop() if queued else next(todo, None))  # a spent budget starts none
            if unit is None:
                return
            inboxes[proc].put(portable_unit(unit, plan.module))
            held[proc] += 1
    try:
        fill()
        give_up = None  # after a stop: when the sessions the workers have not abandoned yet are dropped
        while any(held.values()):
            proc, got = await loop.run_in_executor(None, _next_result, readers, procs, POLL_S)
            if stopping.requested() and give_up is None:
                give_up = time.monotonic() + STOP_GRACE_S
            if got is _NOTHING:
                if give_up is not None and time.monotonic() > give_up:
                    break  # a worker stuck in a node nothing cancels: killed below
                continue
            if isinstance(got, BaseException):
                raise got
            held[proc] -= 1
            if got is None:  # abandoned by the stop: never written, it runs again on resume
                continue
            for event in got.events:
                observe(event)
            land(got)
            fill()
    finally:
        stopping.forget(relay)
        in_flight = sum(held.values())
        if in_flight == 0:  # every session landed: each worker's session threads end at its None
            for inbox in inboxes.values():
                inbox.put(None)
        for proc in procs:
            if in_flight:  # stopped by an error, Ctrl-C or SIGTERM: the sessions still running are dropped
                proc.kill()  # (workers ignore SIGTERM: see _worker_main)
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for inbox in inboxes.values():
            inbox.cancel_join_thread()
            inbox.close()
        for reader in readers.values():
            reader.close()
