"""Running an experiment: plan the session attempts, execute them, land each result as it finishes.

The asyncio executor bounds the sessions in flight (pulling them from the lazy plan, on a thread
pool sized to the concurrency); ``executor: process`` hands them to a process pool
(convsim/running/process_executor.py) and ``executor: ray`` to Ray actors (convsim/running/ray_executor.py). Either
way one writer in this process appends to ``results.jsonl``, the traces and ``errors.jsonl``.
Preflight runs before anything is written; a spent run budget (convsim/providers/limits.py) starts no new
session and ends the run with exit 3.

The unit of work is one session attempt ``(variant, session_id, trial)``. Its seed comes
from the base seed, the session id and the trial (not the variant), so variants are paired.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Callable, Iterator

import yaml

from convsim.providers import limits, stopping
from convsim.config import ExperimentConfig, apply_overrides, load_config
from convsim.errors import ConvsimError, HookError
from convsim.running.progress import LiveProgress
from convsim.running.store import RunStore
from convsim.textio import load_yaml, make_dir, write_atomic
from convsim.results.summary import hook_failure, summarise_run
from convsim.running.plan import Plan, plan_run, prepare_checkpoint_db
from convsim.running.preflight import preflight
from convsim.running.requirements import check_needs
from convsim.running.session import Outcome, Unit, all_sync, run_session_async, run_session_blocking, trace_path


def land(outcome: Outcome, plan: Plan, store: RunStore, progress: LiveProgress) -> None:
    """The single writer: a finished session's trace (unless its thread wrote it), then its record
    (and errors.jsonl if it failed)."""
    if outcome.error_entry is not None:
        store.append_error(outcome.error_entry)
    write_trace(outcome, plan.run_dir)
    store.append(outcome.record, outcome.record_line)
    progress.advance(failed=outcome.record["status"] != "ok")


def write_trace(outcome: Outcome, run_dir: Path) -> Outcome:
    """Write the outcome's trace file, once (the trace is dropped from the outcome once written)."""
    if outcome.trace is not None:
        path = outcome.trace.write(trace_path(run_dir, *outcome.unit_key))
        # an earlier attempt's trace the user compressed would hide this one (readers take both)
        path.with_name(path.name + ".gz").unlink(missing_ok=True)
        outcome.trace = None
    return outcome


def _session_in_thread(plan: Plan, unit: Unit, observe: Callable) -> Outcome:
    """A sync session and its trace file, both in the session's worker thread.

    Each trace is its own file, so threads never write the same one; creating a file costs ~0.5 ms
    of the file system, which on the event loop held up every landing and session start behind it.
    The record still lands after its trace, through the single writer.
    """
    outcome = run_session_blocking(plan, unit, observe)
    return None if outcome is None else write_trace(outcome, plan.run_dir)  # None: abandoned by a stop


async def _run_unit(plan: Plan, unit: Unit, land_one: Callable, progress: LiveProgress) -> None:
    vp = plan.variants[unit.variant]
    if vp.sync_nodes:
        # All nodes are plain functions: stream the session in one worker thread rather than
        # hopping to the executor for every node (much cheaper for rule-based sessions).
        outcome = await asyncio.to_thread(_session_in_thread, plan, unit, progress.observe)
    else:
        outcome = await run_session_async(plan, unit, progress.observe)
        if outcome is not None and outcome.trace is not None:
            outcome = await asyncio.to_thread(write_trace, outcome, plan.run_dir)
    if outcome is not None:  # None: abandoned by a stop (never written: it runs again on resume)
        land_one(outcome)


async def _checkpointer(stack: AsyncExitStack, run_dir: Path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    path = run_dir / "checkpoints.sqlite"
    await asyncio.to_thread(prepare_checkpoint_db, path)
    saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(path)))
    await saver.conn.execute("PRAGMA busy_timeout=30000")
    return saver


# What may differ when a run is started again: how it runs, not what it computes.
_RESUME_FREE = {"run_id", "out_dir", "concurrency", "executor", "workers", "sessions", "trace", "analysis",
                "baseline", "cache", "retry", "address", "limits",
                "preflight_models", "tool_server"}


def saved_config(cfg_path: Path) -> dict:
    """An existing run's config.yaml, checked: UTF-8 YAML holding a mapping."""
    saved = load_yaml(cfg_path, what="the run's config.yaml")
    if not isinstance(saved or {}, dict):
        raise ConvsimError("a run's config.yaml must be a YAML mapping", file=cfg_path)
    return saved or {}


def _check_resumable(cfg: ExperimentConfig, cfg_path: Path) -> None:
    """A restarted run must compute the same thing; mixing two configs in one results.jsonl is an error."""
    old = saved_config(cfg_path)
    new = cfg.model_dump(mode="json")
    for key in sorted(set(old) | set(new)):
        if key not in _RESUME_FREE and old.get(key) != new.get(key):
            raise ConvsimError(f"the run exists with a different {key!r}: resume it with the same config "
                               "or choose another --run-id", file=cfg_path, field=key)
    was, now = old.get("sessions"), new.get("sessions")
    if isinstance(was, int) and isinstance(now, int) and now < was:
        # its results, summary and report would keep the larger run while config.yaml said the smaller
        raise ConvsimError(f"the run has {was} sessions per variant: a resume may add sessions, not drop them "
                           f"(--sessions {now}); choose another --run-id for a smaller run",
                           file=cfg_path, field="sessions")


async def _run_bounded(plan: Plan, todo: Iterator[Unit], land_one: Callable, progress: LiveProgress,
                       stopped: Callable[[], bool]) -> None:
    """``concurrency`` workers pull units from the lazy plan: memory is flat in the number of sessions.
    A spent budget (``stopped``) starts no new session."""
    async def worker() -> None:
        for unit in todo:  # a shared generator: each unit goes to exactly one worker
            if stopped():
                return
            await _run_unit(plan, unit, land_one, progress)
    workers = [asyncio.create_task(worker()) for _ in range(plan.config.concurrency)]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise


def session_pool(concurrency: int) -> ThreadPoolExecutor:
    """Threads for sync sessions and model calls: one per session in flight, plus a few for I/O.

    asyncio's default pool has min(32, cores + 4) threads (6 on 2 cores): with more sessions in
    flight than that, the extra ones queue for a thread instead of waiting on their server.
    """
    return ThreadPoolExecutor(max_workers=concurrency + 4, thread_name_prefix="convsim")


def _warm_summary_imports() -> None:
    import scipy.special  # noqa: F401  the summary's intervals need it


async def execute(plan: Plan, *, show_progress: bool = True) -> Path:
    preflight(plan)  # inputs are loaded and validated before anything is written
    # the summary every run ends with needs scipy (about a second to import): imported beside the
    # sessions, so that a stop asked for mid-run (SIGTERM) is not held up by it at the end
    threading.Thread(target=_warm_summary_imports, daemon=True, name="convsim-warm-imports").start()
    cfg = plan.config  # (preflight may cap the calls in flight to a server at what it reports)
    asyncio.get_running_loop().set_default_executor(session_pool(cfg.concurrency))
    store = RunStore(plan.run_dir)
    total = plan.expected_total()
    make_dir(plan.run_dir, what="run directory", field="out_dir")
    cfg_path = plan.run_dir / "config.yaml"
    if cfg_path.exists():
        _check_resumable(cfg, cfg_path)
    store.open()  # checks, compacts and indexes what earlier attempts wrote
    if not cfg_path.exists() or cfg.sessions != saved_config(cfg_path).get("sessions"):
        write_atomic(cfg_path, yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    done = store.done()
    todo = (u for u in plan.iter_units() if u.key not in done)
    run_limits = limits.activate(cfg.limits)
    budget_cut: list[str] = []  # why the budget stopped a session (as process and Ray workers' calls saw it)
    spent = limits.Spent()  # what this attempt's landed sessions spent, whichever process made the calls

    breaker = InfraBreaker(cfg.retry.stop_after_infra_errors)

    def land_one(outcome: Outcome, progress: LiveProgress) -> None:
        if (why := limits.budget_reason(outcome)) is not None:
            budget_cut.append(why)
        spent.add(outcome.spent)
        breaker.add(outcome)
        land(outcome, plan, store, progress)

    def stopped() -> bool:  # a spent budget, a dead server, or a stop asked for (SIGTERM/SIGINT): no new session
        return (bool(budget_cut) or (run_limits is not None and run_limits.exhausted is not None)
                or breaker.tripped is not None or stopping.requested())
    try:
        async with AsyncExitStack() as stack:
            stack.enter_context(stopping.running())  # the first SIGTERM/SIGINT asks for a graceful stop
            use_processes = cfg.executor in ("process", "ray") and plan.units is None
            saver = None
            if cfg.checkpoint and use_processes:
                prepare_checkpoint_db(plan.run_dir / "checkpoints.sqlite")  # workers open their own
            elif cfg.checkpoint:
                saver = await _checkpointer(stack, plan.run_dir)
            for vp in plan.variants.values():
                vp.compiled = plan.module.build(vp.params).compile(checkpointer=saver)
                vp.sync_nodes = all_sync(vp.compiled)
            with LiveProgress(total=total, done=len(done), enabled=show_progress,
                              label=cfg.run_id) as progress:
                if use_processes and cfg.executor == "ray":
                    from convsim.running.ray_executor import run_on_ray
                    await run_on_ray(plan, todo, lambda o: land_one(o, progress),
                                     progress.observe, workers=cfg.workers, address=cfg.address, stop=stopped)
                elif use_processes:
                    from convsim.running.process_executor import run_in_processes
                    await run_in_processes(plan, todo, lambda o: land_one(o, progress),
                                           progress.observe, workers=cfg.workers, stop=stopped)
                else:
                    await _run_bounded(plan, todo, lambda o: land_one(o, progress), progress, stopped)
    finally:
        store.close()
        limits.activate(None)
    halted = stopping.requested()  # asked to stop: the finished sessions are summarised, then RunStopped
    why = None if not (budget_cut or (run_limits and run_limits.exhausted)) else (
        run_limits.exhausted if run_limits and run_limits.exhausted else budget_cut[0])
    budget = spent.report(cfg.limits, why)  # summary.json's "budget": spent, over, why it stopped
    warnings = plan.warnings + [w for w in [limits.overshoot_warning(budget)] if w]
    try:  # a dataset_metrics that raises: the summary is written without it, then HookError
        summarise_run(plan.run_dir, plan.module, warnings=warnings, records=store.record_set(), budget=budget)
    except HookError as exc:
        if why:  # the budget stopped the run as well: say so, the same command resumes it
            exc.args = (f"{exc.args[0]} (the run budget also stopped the run: run the same command "
                        "again to resume it)",)
        raise
    if halted:
        raise stopping.RunStopped(f"{len(store.done())} sessions kept in {plan.run_dir}")
    if breaker.tripped is not None and not why:
        kept = len(store.done())
        total_planned = plan.expected_total()
        left = "" if total_planned is None else f", {max(0, total_planned - kept)} left"
        raise limits.ServersDown(f"{breaker.tripped}: no new session started; {kept} sessions kept in "
                                 f"{plan.run_dir}{left}; run the same command again once the server answers",
                                 plan.run_dir)
    if why:
        kept = len(store.done())
        total_planned = plan.expected_total()
        left = "" if total_planned is None else f", {max(0, total_planned - kept)} left"
        raise limits.BudgetReached(f"run budget reached ({why}; this attempt: {spent}): {kept} sessions kept in "
                                   f"{plan.run_dir}{left}; run the same command again to resume", plan.run_dir)
    return plan.run_dir


class InfraBreaker:
    """The circuit breaker of a dead server: after ``limit`` sessions in a row landed ``infra_error``
    (any other outcome resets the count), ``tripped`` says why and the run starts no new session."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.run, self.tripped = limit, 0, None

    def add(self, outcome: Outcome) -> None:
        if self.limit is None or outcome.record is None or limits.budget_reason(outcome) is not None:
            return  # (a session the run budget cut is no server's fault)
        if outcome.record.get("status") != "infra_error":
            self.run = 0
            return
        self.run += 1
        if self.run >= self.limit and self.tripped is None:
            last = (str(outcome.record.get("error") or "").splitlines() or [""])[0][:300]
            self.tripped = (f"{self.run} sessions in a row ended infra_error (retry.stop_after_infra_errors: "
                            f"{self.limit}; last: {last})")


def run_hooks(run_dir: Path, hooks: list[str], *, warn=print) -> None:
    """Post-run analysis hooks (``module:function``), e.g. stats, figures and the report.

    A hook that raises stops the hooks after it: ConvsimError (bad input it read) as it is,
    anything else as :class:`~convsim.errors.HookError` (a code error, one line naming the hook,
    its file and the exception); what the run and the earlier hooks wrote is kept."""
    from convsim.running.progress import analysis_step
    for hook in hooks:
        analysis_step(f"loading {hook.rpartition(':')[2] or hook}")
        mod_name, _, fn_name = hook.partition(":")
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name or "main")
        except (ImportError, AttributeError) as exc:
            warn(f"analysis hook {hook} unavailable: {exc}")
            continue
        try:
            inspect.signature(fn).bind(Path(run_dir))
        except (TypeError, ValueError):  # not a callable of one run directory: bad config, not a bug
            raise ConvsimError(f"analysis hook {hook} is not a function of a run directory",
                               field="analysis") from None
        try:
            fn(Path(run_dir))
        except ConvsimError:
            raise
        except Exception as exc:
            try:
                file = inspect.getsourcefile(inspect.unwrap(fn))
            except TypeError:  # a builtin or a callable object without a source file
                file = None
            raise hook_failure(f"analysis hook {hook}", exc, file=file, run_dir=run_dir,
                               kept="results.jsonl, summary.json and metrics.csv are") from exc


def run(config: str | Path | ExperimentConfig, *, show_progress: bool = False, analyze: bool = True,
        source: str | None = None, **overrides) -> Path:
    """Run an experiment (config path or object) and return its run directory.

    ``overrides`` are those of the command line: sessions, seed, models (``["crs=none"]``),
    set_params (``["n_turns=5"]``), run_id, out_dir, concurrency, trials, checkpoint, trace.
    ``source`` names where the config came from in input errors (default: the path, or "config").
    A run whose directory already holds results resumes: finished sessions are skipped.
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    if any(v is not None for v in overrides.values()):
        cfg = apply_overrides(cfg, **overrides)
    source = source or (str(config) if not isinstance(config, ExperimentConfig) else "config")
    check_needs(cfg, file=source)  # a missing extra or data path: one line, before anything is written
    plan = plan_run(cfg, source=source)
    run_dir = asyncio.run(execute(plan, show_progress=show_progress))
    if analyze:
        from convsim.running.progress import analysis_status
        with analysis_status(show_progress):  # a spinner naming the step: the analysis can take 10-40 s
            run_hooks(run_dir, cfg.analysis)
    return run_dir
