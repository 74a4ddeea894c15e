"""Find and check graph files: a module with State, Context, Params, build, sessions, dataset_metrics."""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from convsim.contract.context import SessionContext
from convsim.errors import ConvsimError
from convsim.results.metric_ranges import check_metric_ranges

REQUIRED = ("State", "Context", "Params", "build", "sessions", "dataset_metrics", "graph")
_CACHE: dict[Path, ModuleType] = {}


def project_root() -> Path:
    """The directory holding the shipped ``graphs/``, ``configs/`` and ``prompts/``: the installed
    ``convsim`` package (a wheel), or the root of a source checkout."""
    package = Path(__file__).resolve().parents[1]
    return package if (package / "graphs").is_dir() else package.parent


def graph_dirs() -> list[Path]:
    dirs = [Path.cwd() / "graphs", project_root() / "graphs"]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def list_graphs() -> dict[str, Path]:
    """Graph names (file stems) found in ``graphs/``."""
    found: dict[str, Path] = {}
    for d in graph_dirs():
        for f in sorted(d.glob("*.py")):
            if not f.name.startswith("_"):
                found.setdefault(f.stem, f)
    return found


def resolve_graph_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".py":
        if not p.exists():
            raise ConvsimError("graph file not found", file=p)
        return p.resolve()
    graphs = list_graphs()
    if name_or_path in graphs:
        return graphs[name_or_path].resolve()
    known = ", ".join(sorted(graphs)) or "none"
    raise ConvsimError(f"unknown graph {name_or_path!r} (known: {known})", field="graph")


def load_graph_module(name_or_path: str, *, check: bool = True) -> ModuleType:
    """Import a graph file by name (``crs_shift``) or path and check the contract."""
    path = resolve_graph_path(name_or_path)
    if path in _CACHE:
        return _CACHE[path]
    root = str(path.parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    mod_name = f"convsim_graph_{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ConvsimError("cannot import graph file", file=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except ConvsimError:
        raise
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise ConvsimError(f"graph file failed to import: {type(exc).__name__}: {exc}", file=path) from exc
    except SystemExit as exc:  # sys.exit() at import: the run would end with that code, silently
        sys.modules.pop(mod_name, None)
        raise ConvsimError(f"graph file called sys.exit({exc.code!r}) while it was imported", file=path) from None
    if check:
        check_contract(module, path)
    _CACHE[path] = module
    return module


def check_contract(module: ModuleType, path: object = None) -> None:
    """Raise ConvsimError naming what a graph file lacks."""
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise ConvsimError(f"graph file lacks {', '.join(missing)} (see docs/ENGINE_API.md)", file=path)
    ctx = module.Context
    if not (dataclasses.is_dataclass(ctx) and issubclass(ctx, SessionContext)):
        raise ConvsimError("Context must be a dataclass subclassing convsim.SessionContext", file=path)
    for name in ("build", "sessions", "dataset_metrics"):
        if not callable(getattr(module, name)):
            raise ConvsimError(f"{name} must be callable", file=path)
    annotations = getattr(module.State, "__annotations__", {})
    for key in ("session_id", "transcript", "turn_metrics", "dialogue_metrics"):
        if key not in annotations:
            raise ConvsimError(f"State lacks the required key {key!r}", file=path)
    check_metric_ranges(getattr(module, "METRIC_RANGES", None), file=path)  # optional; bad input if malformed
