"""Preflight: everything a run needs is loaded and validated once, before anything is written.

A local model file (``llamacpp:<file.gguf>``) and a sentence-transformers directory
(``embedder: st:<dir>``) must exist (on the driver: a Ray cluster's workers need the same path).
For each variant the engine builds the base context (the base seed, the variant's params and model
handles) and

1. calls the graph's optional ``preflight(params, ctx)`` hook, which loads its catalogs,
   databases, test sets and dialogue files with the loaders the sessions will use (they are
   ``lru_cache``'d, so the sessions get them for free);
2. generates every initial state ``sessions()`` yields (at most ``--sessions``, and at most
   ``PREFLIGHT_SESSIONS`` = 10,000: the run checks any later one as it draws it), and checks each
   one as the run will (:func:`convsim.running.plan.check_init`: a dict with a usable, unique session id,
   only State keys, values the State's reducers take, the record's shapes; with process or Ray
   workers, one that pickles): a broken generator or a bad 3rd session fails here, naming the
   session and the key, not in the middle of the run. The sessions are generated twice (here and
   as the run goes): 1.7 ms a session for customer_service's goals, the dearest of the shipped
   graphs, i.e. 17 s before the first of 10,000 sessions, against ~450 ms to run one with model
   ``none``; nothing is kept (memory stays flat);
3. warns when the set is smaller than ``--sessions`` (a fixed test set), naming the cap.

A fork (an explicit list of session attempts) runs step 1 only: its ``--set`` may point at another
catalog, which is checked before anything is written.

Model specs, model roles, params and the ``cache:`` file were already checked when the run was
planned. A failure is one :class:`ConvsimError` line (exit 2) and the run directory is not touched.
An ``ImportError`` (a missing optional extra) keeps its message, which carries the install hint.
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
from pathlib import Path
from typing import Any

from convsim.errors import ConvsimError
from convsim.running.session import Unit, all_sync


# Sessions preflight generates and checks per variant; the run checks the rest as it draws them (the
# same check_init, one line and exit 2 on a bad one). Every session of a 10,000-session run is checked
# before it starts (customer_service, the dearest: ~17 s); a 10,000,000-session plan neither waits
# minutes for its first session nor holds a million session ids twice.
PREFLIGHT_SESSIONS = 10_000


def _as_input_error(exc: Exception, plan: Any, variant: str, step: str) -> ConvsimError:
    if isinstance(exc, ConvsimError):  # say which variant cannot run; keep file, record and field
        named = _param_naming(exc.file, plan, variant)
        if named is not None:  # a file a param names: the line names the config and the param first
            inner = ", ".join(x for x in (f"record {exc.record}" if exc.record is not None else "",
                                          f"field {exc.field}" if exc.field is not None else "") if x)
            return ConvsimError(f"variant {variant} cannot run: {exc.file}{f' ({inner})' if inner else ''}: "
                                f"{exc.message}", file=getattr(plan, "source", None), field=f"params.{named}")
        return ConvsimError(f"variant {variant} cannot run: {exc.message}", file=exc.file, record=exc.record,
                            field=exc.field)
    if isinstance(exc, ImportError):
        return ConvsimError(f"variant {variant} cannot run: {exc}", file=plan.config.graph, field=step)
    return ConvsimError(f"variant {variant}: {step} failed: {type(exc).__name__}: {exc}",
                        file=plan.config.graph, field=step)


def _param_naming(file: str | None, plan: Any, variant: str) -> str | None:
    """The param of ``variant`` whose value is ``file`` or a folder holding it (a catalog, a
    database folder, a dialogue file), else None: the error then names the config that named it."""
    if not file:
        return None
    try:
        params = plan.variants[variant].params
        values = params.model_dump() if hasattr(params, "model_dump") else dict(params)
        target = Path(file).expanduser().resolve()
    except (AttributeError, KeyError, TypeError, OSError, ValueError):
        return None
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            path = Path(value).expanduser().resolve()
        except (OSError, ValueError):
            continue
        if path == target or path in target.parents:
            return key
    return None


def defines(spec: Any, name: str) -> bool | None:
    """Whether the module of ``spec`` binds ``name`` at its top level, read from its source without
    importing it (a hook's module may need an optional extra the run itself does not): a ``def``, a
    ``class``, an assignment or an import. ``None`` when the source cannot tell (no source file, a
    syntax error, a module-level ``__getattr__`` or ``import *``)."""
    origin = getattr(spec, "origin", None)
    if not origin or not str(origin).endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    bound: set[str] = set()
    for node in ast.walk(tree):  # nested scopes too: a name bound under an `if` or `try` counts
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    if "__getattr__" in bound:
        return None
    return name in bound


def check_embedder_dir(emb: str, *, file: object = None) -> None:
    """An ``st:<dir>`` embedder whose directory does not exist is one ConvsimError (``file``: where
    the spec came from; default the directory itself)."""
    if emb.startswith("st:") and emb != "st:minilm" and not Path(emb[3:]).is_dir():
        raise ConvsimError(f"no sentence-transformers model directory at {emb[3:]}",
                           file=emb[3:] if file is None else file, field="embedder")


def model_check_on(cfg: Any) -> bool:
    """Whether preflight asks the model servers: the config's ``preflight_models`` (default true),
    unless the environment says ``CONVSIM_PREFLIGHT_MODELS=0`` (a CI job without servers)."""
    import os
    return bool(cfg.preflight_models) and os.environ.get("CONVSIM_PREFLIGHT_MODELS", "1") != "0"


def preflight(plan: Any) -> None:
    """Validate the plan's inputs; raises ConvsimError. Appends count warnings to ``plan.warnings``."""
    module, cfg = plan.module, plan.config
    hook = getattr(module, "preflight", None)
    for analysis in cfg.analysis:  # a misspelled hook failed only after the run, as a warning
        mod_name = analysis.partition(":")[0]
        try:
            found = importlib.util.find_spec(mod_name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ConvsimError(f"analysis hook {analysis!r}: no module {mod_name!r}", field="analysis")
        fn_name = analysis.partition(":")[2] or "main"
        if defines(importlib.util.find_spec(mod_name), fn_name) is False:
            raise ConvsimError(f"analysis hook {analysis!r}: module {mod_name!r} defines no {fn_name!r}",
                               field="analysis")
    if cfg.executor == "ray" and cfg.address is not None and plan.units is None:  # a fork runs here
        from convsim.running.ray_executor import check_address
        check_address(cfg.address)
    check_embedder_dir(cfg.embedder)
    if model_check_on(cfg) and plan.units is None:  # each model server asked once (convsim.running.model_check)
        from convsim.running.model_check import check_model_servers
        try:
            plan.warnings.extend(check_model_servers(plan))
        except ConvsimError as exc:  # name the config the model spec came from
            if exc.file is not None:
                raise
            raise ConvsimError(exc.message, file=getattr(plan, "source", None), record=exc.record,
                               field=exc.field) from None
    for vp in plan.variants.values():
        for role, spec in vp.models.items():  # a local model file is read where the sessions run: here
            if spec.provider == "llamacpp" and spec.model.endswith(".gguf") and not Path(spec.model).is_file():
                raise ConvsimError(f"variant {vp.name}: no GGUF model file at {spec.model}", file=spec.model,
                                   field=f"models.{role}")
        if callable(hook):  # a fork's --set catalog_path=... is loaded and checked too
            try:
                hook(vp.params, plan.base_context(vp))
            except Exception as exc:  # noqa: BLE001 — every failure becomes one input-error line
                raise _as_input_error(exc, plan, vp.name, "preflight") from None
        if plan.units is not None:  # an explicit list (a fork): its sessions were checked by its maker
            continue
        if cfg.checkpoint and cfg.executor in ("process", "ray") and not all_sync(module.build(vp.params)):
            raise ConvsimError(f"variant {vp.name}: the graph runs through LangGraph's async API (an async "
                               "node, a subgraph or a runnable node), which cannot use the sync SQLite "
                               "checkpointer of a worker process: run it with --executor async, or without "
                               "--checkpoint", file=cfg.graph, field="executor")
        to_workers = cfg.executor in ("process", "ray")
        if to_workers:
            from convsim.running.process_executor import portable_unit
        try:
            count = 0
            # each one checked (plan.check_init); a short set warns; past the cap, the run checks them
            for init in itertools.islice(plan.session_inits(vp), PREFLIGHT_SESSIONS):
                count += 1
                if to_workers:  # what a worker process gets must pickle
                    portable_unit(Unit(vp.name, str(init["session_id"]), 0, 0, init), module)
            if not count:
                raise ConvsimError(f"variant {vp.name}: sessions() yields no session", file=cfg.graph)
        except Exception as exc:  # noqa: BLE001
            raise _as_input_error(exc, plan, vp.name, "sessions") from None
