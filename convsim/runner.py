"""The local asyncio executor: sessions in flight are bounded, results land as they finish.

The unit of work is one session attempt ``(variant, session_id, trial)``. Its seed comes
from the base seed, the session id and the trial (not the variant), so variants are paired.
"""
from __future__ import annotations

import asyncio
import importlib
import time
import traceback
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .config import ExperimentConfig, apply_overrides, load_config
from .errors import ConvsimError
from .graphfile import load_graph_module
from .models import ChatModel, ModelUnavailable, parse_model_spec
from .progress import LiveProgress
from .seeding import session_seed
from .store import RunStore
from .summary import summarise_run
from .tracing import TraceRecorder


@dataclass
class VariantPlan:
    name: str
    params: Any
    models: dict[str, Any]  # role -> ModelSpec
    compiled: Any = None
    sync_nodes: bool = False  # every node has a sync implementation (see _all_sync)


@dataclass
class Unit:
    variant: str
    session_id: str
    trial: int
    seed: int
    init: dict = field(repr=False)
    # set by convsim.fork: {"checkpoint_id", "trace" (the original's trace cut at the fork), "fork"}
    resume: dict | None = field(default=None, repr=False)


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


def trace_path(run_dir: Path, variant: str, session_id: str, trial: int) -> Path:
    suffix = f"__t{trial}" if trial else ""
    return Path(run_dir) / "traces" / variant / f"{session_id}{suffix}.jsonl"


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


async def _run_unit(plan: Plan, unit: Unit, store: RunStore, progress: LiveProgress,
                    checkpointer: Any) -> None:
    cfg, vp = plan.config, plan.variants[unit.variant]
    calls: list[dict] = []
    models = {role: ChatModel(spec=spec, role=role, calls=calls, cache=plan.cache)
              for role, spec in vp.models.items()}
    ctx = plan.module.Context(params=vp.params, models=models, embedder_spec=cfg.embedder,
                              seed=unit.seed, session_id=unit.session_id, trial=unit.trial,
                              run_dir=str(plan.run_dir))
    init = {"session_id": unit.session_id, "transcript": [], "turn_metrics": [], "dialogue_metrics": {},
            **unit.init}
    resume = unit.resume
    recorder = (TraceRecorder(resume["trace"]["initial"] if resume else init, calls,
                              prefix=resume and resume["trace"], fork=resume and resume["fork"])
                if cfg.trace else None)
    thread = f"{unit.variant}/{unit.session_id}/t{unit.trial}"
    run_config = {"configurable": {"thread_id": thread}, "recursion_limit": 100_000}
    stream_input: dict | None = init
    if resume:  # time travel: continue the copied checkpoint instead of starting from init
        run_config["configurable"]["checkpoint_id"] = resume["checkpoint_id"]
        stream_input = None
    modes = ["values", "custom"] + (["updates"] if recorder else [])
    started = time.perf_counter()
    final: dict = init
    status, error = "ok", None
    def handle(mode: str, chunk: Any) -> None:
        nonlocal final
        if mode == "values":
            final = chunk
            if recorder:
                recorder.on_values(chunk)
        elif mode == "updates":
            recorder.on_updates(chunk)
        elif mode == "custom":
            if recorder:
                recorder.on_custom(chunk)
            progress.observe(chunk)

    def stream_sync() -> None:
        for mode, chunk in vp.compiled.stream(stream_input, run_config, context=ctx, stream_mode=modes):
            handle(mode, chunk)

    try:
        if vp.sync_nodes:
            # All nodes are plain functions: stream the session in one worker thread rather than
            # hopping to the executor for every node (much cheaper for rule-based sessions).
            await asyncio.to_thread(stream_sync)
        else:
            async for mode, chunk in vp.compiled.astream(stream_input, run_config, context=ctx,
                                                         stream_mode=modes):
                handle(mode, chunk)
    except ConvsimError:
        raise  # bad input (a malformed catalog, a bad model answer file...) stops the run cleanly
    except ModelUnavailable as exc:
        # infrastructure, not the agent: keep it out of the results so a restart retries it
        store.append_error({"variant": unit.variant, "session_id": unit.session_id, "trial": unit.trial,
                            "kind": "infrastructure", "error": str(exc)})
        progress.advance(failed=True)
        return
    except Exception as exc:  # noqa: BLE001 — an agent crash is a result, recorded as such
        status = "error"
        error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc(limit=6))
    record = {**final, "run_id": cfg.run_id, "variant": unit.variant, "session_id": unit.session_id,
              "trial": unit.trial, "seed": unit.seed, "status": status, "error": error,
              "models": {r: s.settings for r, s in vp.models.items()},
              "params": vp.params.model_dump(mode="json"), "llm_calls": calls,
              "elapsed_s": round(time.perf_counter() - started, 4)}
    if resume:
        record["forked_from"] = resume["fork"]
    if recorder:
        recorder.write(trace_path(plan.run_dir, unit.variant, unit.session_id, unit.trial))
    store.append(record)
    progress.advance(failed=status != "ok")


def _all_sync(compiled: Any) -> bool:
    """Whether every node of a compiled graph can run synchronously (no ``async def`` node)."""
    for spec in compiled.builder.nodes.values():
        if getattr(spec.runnable, "func", None) is None:
            return False
    return True


async def _checkpointer(stack: AsyncExitStack, run_dir: Path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    saver = await stack.enter_async_context(
        AsyncSqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")))
    # WAL and a busy timeout make the file safe to read while a run writes it
    # (busy_timeout first: switching to WAL itself waits for a lock another process may hold)
    await saver.conn.execute("PRAGMA busy_timeout=30000")
    await saver.conn.execute("PRAGMA journal_mode=WAL")
    return saver


async def execute(plan: Plan, *, show_progress: bool = True) -> Path:
    cfg = plan.config
    store = RunStore(plan.run_dir)
    done = store.done_keys()
    todo = [u for u in plan.units if (u.variant, u.session_id, u.trial) not in done]
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = plan.run_dir / "config.yaml"
    if not cfg_path.exists():
        cfg_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    store.open()
    try:
        async with AsyncExitStack() as stack:
            saver = await _checkpointer(stack, plan.run_dir) if cfg.checkpoint else None
            for vp in plan.variants.values():
                vp.compiled = plan.module.build(vp.params).compile(checkpointer=saver)
                vp.sync_nodes = _all_sync(vp.compiled)
            sem = asyncio.Semaphore(cfg.concurrency)
            with LiveProgress(total=len(plan.units), done=len(plan.units) - len(todo),
                              enabled=show_progress, label=cfg.run_id) as progress:
                async def guarded(unit: Unit) -> None:
                    async with sem:
                        await _run_unit(plan, unit, store, progress, saver)
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
