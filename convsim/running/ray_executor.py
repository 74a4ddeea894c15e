"""The Ray executor: sessions on a pool of Ray actors, on one machine or a cluster.

Each actor plans the run once (the same deterministic session list as the driver, see
convsim/running/plan.py), compiles the graphs and loads the catalogs when it starts, then runs
``ceil(concurrency / workers)`` of the sessions it is handed at once (a threaded actor: Ray's
``max_concurrency``) and returns each one's :class:`~convsim.running.session.Outcome`.
The driver lands every outcome through the run's single writer (``runner.land``), so
``results.jsonl``, the traces and ``errors.jsonl`` live only in the driver's run directory, and
resuming, the status taxonomy and exit codes are those of the other executors. Session seeds do
not depend on where a session runs: the executor changes throughput, never results.

``address``: ``None`` starts a private local Ray instance sized to ``workers``; ``auto`` joins the
cluster this machine belongs to; ``ray://host:10001`` connects a Ray client to a remote head;
``host:port`` joins a cluster's GCS directly. When joining a cluster the project directory is
shipped to the workers as the job's ``working_dir`` (Ray honours .gitignore), so the graph files,
agents and catalogs are the driver's.

A graceful stop (the driver's first SIGTERM / SIGINT: convsim.providers.stopping) reaches the actors
through their ``stop`` method, in a concurrency group of its own so that it runs beside the sessions
(Ray's ``ray.cancel`` does not interrupt a running task of a threaded actor): each actor requests the
stop in its own process (HTTP calls in flight cancelled, no model call or session started, running
sessions abandoned at their next node boundary) and returns ``None`` for each session it abandoned,
which the driver drops (it runs again on resume). Sessions the actors have not given back within
``STOP_GRACE_S`` are dropped and the actors killed.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from convsim.providers import limits, stopping
from convsim.errors import ConvsimError
from convsim.running.process_executor import POLL_S, STOP_GRACE_S, sessions_per_worker

# Keep a private Ray instance small: sessions pass kilobytes, not tensors.
OBJECT_STORE_BYTES = 100_000_000
# Sessions queued on each actor beyond those it runs, so it never waits for the driver.
QUEUED_PER_ACTOR = 1
_SHIP_EXCLUDES = ["runs/", ".git/", "**/__pycache__/", "*.sqlite", "*.sqlite-wal", "*.sqlite-shm",
                  ".pytest_cache/", "bench/out/"]


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise ConvsimError("executor: ray needs the ray extra: pip install -e '.[ray]'",
                           field="executor") from exc
    return ray


def _project_dir() -> Path:
    from convsim.contract.graphfile import project_root
    return project_root()


CONNECT_CHECK_S = 5.0  # an address nothing answers at: Ray itself retries for minutes


def check_address(address: str | None) -> None:
    """An explicit cluster address (``host:port``, ``ray://host:port``) must accept a connection
    within seconds; else one line (Ray's own client would retry for minutes, printing C++ warnings).
    ``auto`` is resolved as Ray resolves it, then checked; ``None`` (a private instance) and ``local``
    are left to Ray."""
    if address is None or address == "local":
        return
    if address == "auto":  # the cluster Ray would pick (RAY_ADDRESS, the last `ray start` here...)
        try:
            from ray._private.services import get_ray_address_from_environment
        except ImportError:  # no ray (the executor says so later), or Ray moved it: left to ray.init
            return
        try:
            found = get_ray_address_from_environment("auto", None)
        except ConnectionError as exc:
            raise ConvsimError(f"--address auto: {exc}".splitlines()[0], field="address") from None
        if not found or found == "auto":
            return
        address = found
    import socket
    target = address.split("://", 1)[1] if "://" in address else address
    host, _, port = target.rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise ConvsimError(f"Ray address {address!r} is not host:port, ray://host:port or auto", field="address")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_CHECK_S).close()
    except OSError as exc:
        raise ConvsimError(f"cannot connect to the Ray cluster at {address!r}: nothing answers at "
                           f"{host}:{port} ({exc})", field="address") from None


def connect(address: str | None, workers: int | None) -> bool:
    """Connect to Ray (or start a private instance); True when this call started the connection."""
    ray = _import_ray()
    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "configure_logging": False}
    # ray.init puts its core worker's handler on SIGTERM (a C++ stack dump, then exit 15): the handler
    # Python had (the CLI's graceful stop, or the host application's) is put back after it
    on_sigterm = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        if address is None:
            ray.init(num_cpus=workers or os.cpu_count() or 1, object_store_memory=OBJECT_STORE_BYTES,
                     include_dashboard=False, runtime_env={"env_vars": _pythonpath()}, **quiet)
        else:
            ray.init(address=address, runtime_env={
                "working_dir": str(_project_dir()), "excludes": _SHIP_EXCLUDES}, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConvsimError(f"cannot connect to the Ray cluster at {address!r}: {exc}",
                           field="address") from None
    if callable(on_sigterm):
        signal.signal(signal.SIGTERM, on_sigterm)
    return True


def _pythonpath() -> dict:
    # a private instance's workers start from the driver's files: same import path
    root = str(_project_dir())
    current = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": root + (os.pathsep + current if current else "")}


def _worker_class():
    ray = _import_ray()

    @ray.remote(num_cpus=1, max_restarts=0, concurrency_groups={"control": 1})
    class SessionWorker:
        """Holds the planned run (compiled graphs, catalogs) for all the sessions it runs."""

        def __init__(self, config_json: str, broker=None) -> None:
            from convsim.providers import stopping
            from convsim.running.process_executor import _init_worker
            stopping.running().__enter__()  # the actor honours a stop (a retry's back-off cut short too)
            _init_worker(config_json, broker=broker)

        @ray.method(concurrency_group="control")
        def stop(self, why: str) -> None:
            """The driver's graceful stop: runs beside the sessions (its own concurrency group)."""
            from convsim.providers import stopping
            stopping.request(why)

        def run(self, unit):
            from convsim.running.process_executor import _run_in_worker
            return _run_in_worker(unit)

        def node(self) -> str:
            import ray
            return ray.get_runtime_context().get_node_id()

    return SessionWorker


def _worker_failed(exc: BaseException) -> Exception:
    """Bad input met in a worker (a malformed catalog...) stays one clear line; a lost worker too."""
    cause = getattr(exc, "cause", None) or getattr(exc, "error", None)
    for err in (cause, getattr(cause, "cause", None)):
        if isinstance(err, ConvsimError):
            return ConvsimError(err.message, file=err.file, record=err.record, field=err.field)
    if isinstance(exc, _import_ray().exceptions.RayTaskError):
        return exc
    return ConvsimError(f"a Ray worker failed: {str(exc).splitlines()[0]}; finished sessions are kept, "
                        "run again to resume", field="executor")


def cluster_cpus() -> int:
    ray = _import_ray()
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


PLACE_TIMEOUT_S = 120.0  # for the workers to start (a cluster whose CPUs other jobs hold)


def worker_count(asked: int | None, cpus: int) -> int:
    """The actors to start: ``--workers``, at most one per CPU of the cluster (each takes one, and Ray
    would wait forever for a CPU that is not there: after a node died, say); all its CPUs by default.
    Fewer workers change throughput, never results."""
    if asked is None:
        return cpus
    if asked > cpus:
        print(f"ray: --workers {asked}, but the cluster has {cpus} CPU(s) (each worker takes one): "
              f"running {cpus}", file=sys.stderr)
        return cpus
    return max(1, asked)


async def run_on_ray(plan: Any, todo: Iterator, land: Callable, observe: Callable, *,
                     workers: int | None, address: str | None, stop: Callable[[], bool] = lambda: False) -> None:
    """Run the units of ``todo`` (a lazy iterator: memory stays flat in the number of sessions) on
    ``workers`` Ray actors; ``land(outcome)`` in the driver as each one finishes."""
    ray = _import_ray()
    todo = iter(todo)
    first = next(todo, None)
    if first is None:
        return
    started = connect(address, workers)
    actors: list = []
    served: list = []  # the limits' actor
    try:
        n = worker_count(workers, cluster_cpus())
        config = plan.config
        if config.checkpoint:
            # workers open the checkpoint file themselves: an absolute path on a shared file system
            config = config.model_copy(update={"out_dir": str(Path(config.out_dir).resolve())})
        Worker = _worker_class()
        per_actor = sessions_per_worker(config.concurrency, n)
        # the sessions an actor runs at once (its default concurrency group; ``stop`` has a group of its
        # own): set even for one, as an actor with concurrency groups is a threaded actor
        Worker = Worker.options(max_concurrency=per_actor)
        # one actor holds the run's limits; every session thread's calls ask it (limits.serve_to_ray)
        broker = limits.serve_to_ray(config.limits, callers=n * per_actor)
        if broker is not None:
            served.append(broker)  # killed with the workers
        config_json = config.model_dump_json()
        actors = [Worker.remote(config_json, broker) for _ in range(n)]
        pending = [first]
        try:
            nodes = await asyncio.wait_for(asyncio.gather(*(a.node.remote() for a in actors)), PLACE_TIMEOUT_S)
        except ray.exceptions.RayActorError as exc:
            raise _worker_failed(exc) from None
        except asyncio.TimeoutError:
            raise ConvsimError(f"the Ray cluster did not start the {n} workers within {PLACE_TIMEOUT_S:.0f} s "
                               "(its CPUs busy with other jobs?); nothing was run, try again with fewer "
                               "--workers", field="workers") from None
        print(f"ray: {n} workers on {len(set(nodes))} node(s)", file=sys.stderr)

        async def feed(actor) -> None:
            while not stop():  # a spent budget starts no new session
                unit = pending.pop() if pending else next(todo, None)
                if unit is None:
                    return
                outcome = await actor.run.remote(unit)
                if outcome is None:  # abandoned by a stop: never written, it runs again on resume
                    continue
                for event in outcome.events:
                    observe(event)
                land(outcome)

        # round robin: each actor starts its share before any actor queues one more
        feeds = asyncio.gather(*(feed(a) for _ in range(per_actor + QUEUED_PER_ACTOR) for a in actors))
        gave_up: list = []

        async def relay_stop() -> None:  # the driver's graceful stop, to every actor
            while not stopping.requested():
                await asyncio.sleep(POLL_S)
            for a in actors:
                a.stop.remote(f"the driver was asked to stop ({stopping.reason()})")
            await asyncio.sleep(STOP_GRACE_S)
            gave_up.append(True)  # an actor stuck in a node nothing cancels: its sessions are dropped
            feeds.cancel()
        relay = asyncio.create_task(relay_stop())
        try:
            await feeds
        except asyncio.CancelledError:
            if not gave_up:
                raise
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            raise _worker_failed(exc) from None
        finally:
            relay.cancel()
    finally:
        for a in actors + served:
            ray.kill(a)
        if started:
            ray.shutdown()
