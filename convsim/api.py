"""Every ``convsim`` command as a Python function that returns data and prints nothing.

The command line (convsim/cli.py) is a thin layer over these: it parses options, calls the
function and renders what it returns.

The engine never imports the layers above it (agents/, evaluation/). A command that needs
evaluation code (``compare``, ``evaluate``) finds it by a dotted name, ``"module:function"``,
imported with importlib when the command runs, the way the runner finds its analysis hooks
(``analysis:`` in a config). The names are the constants below; :func:`resolve` imports one.
"""
from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convsim.config import ExperimentConfig, apply_overrides, config_from_dict, load_config
from convsim.errors import ConvsimError
from convsim.running.requirements import config_needs
from convsim.contract.graphfile import list_graphs as graph_files, load_graph_module, project_root

# evaluation functions the commands call, by name (convsim itself never imports evaluation/)
COMPARE_RUNS = "convsim.evaluation.reporting.compare:compare_runs"
EVALUATE_TRANSCRIPTS = "convsim.evaluation.reporting.transcripts:evaluate_transcripts"
EVALUATE_GROUP_CSV = "convsim.evaluation.group.dialogue_csv:evaluate_group_csv"

Assignments = list[str] | dict[str, Any] | None


def resolve(ref: str) -> Callable:
    """The function named ``"package.module:function"``; ConvsimError when it cannot be imported."""
    mod_name, _, fn_name = ref.partition(":")
    try:
        return getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise ConvsimError(f"{ref} is not available: {exc}") from None


def _as_config(target: str | Path | dict | ExperimentConfig) -> ExperimentConfig:
    """A config object from a config path, a config dict, a graph name or a graph file."""
    if isinstance(target, ExperimentConfig):
        return target
    if isinstance(target, dict):
        return config_from_dict(target, file="config dict")
    text = str(target)
    if text.endswith((".yaml", ".yml")):
        return load_config(text)
    load_graph_module(text)
    return config_from_dict({"name": Path(text).stem, "graph": text}, file=text)


def _cli_strings(items: Assignments) -> list[str]:
    """``{"crs": "none"}`` as ``["crs=none"]``: the form a fork records (values as JSON/YAML)."""
    if not isinstance(items, dict):
        return list(items or [])
    return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in items.items()]


def run(target: str | Path | dict | ExperimentConfig, *, sessions: int | None = None,
        seed: int | None = None, models: Assignments = None, params: dict | None = None,
        set_params: list[str] | None = None, run_id: str | None = None, out: str | Path | None = None,
        concurrency: int | None = None, executor: str | None = None, workers: int | None = None,
        trials: int | None = None, checkpoint: bool | None = None, trace: bool | None = None,
        analyze: bool = True, show_progress: bool = False, **overrides: Any) -> Path:
    """Run an experiment and return its run directory (``convsim run``).

    ``target``: a config file, a config dict, an :class:`ExperimentConfig`, a graph name in
    ``graphs/`` or a graph file (run with its default params). ``models``: ``{"crs": "none"}``
    or ``["crs=none"]``; ``params``: ``{"n_turns": 5}`` (dotted keys reach nested params),
    ``set_params``: ``["n_turns=5"]``; both win over every variant. The run is written to
    ``<out>/<run_id>`` (``out`` defaults to ``runs``; ``run_id`` to ``<name>-<UTC time to the
    millisecond>``, never one that exists). An existing ``run_id`` given explicitly resumes:
    finished sessions are skipped. Any further keyword is passed to
    :func:`convsim.config.apply_overrides` with the others (a new command-line option that
    apply_overrides learns is available here without changing this signature).
    """
    from convsim.running.runner import run as run_experiment  # the runner pulls in LangGraph: only when running
    if "out_dir" in overrides:  # the config's key, accepted as another name for ``out``
        alias = overrides.pop("out_dir")
        out = alias if out is None else out
    cfg = apply_overrides(_as_config(target), sessions=sessions, seed=seed, models=models,
                          set_params=set_params, run_id=run_id,
                          out_dir=str(out) if out is not None else None,
                          concurrency=concurrency, trials=trials, checkpoint=checkpoint, trace=trace,
                          executor=executor, workers=workers, **overrides)
    if params:
        cfg = apply_overrides(cfg, set_params=params)
    from_file = isinstance(target, (str, Path)) and str(target).endswith((".yaml", ".yml"))
    # a param or model role the graph lacks is named with the config file it came from (or --set)
    source = f"{target} (or the command line)" if from_file else "command line"
    try:
        return run_experiment(cfg, show_progress=show_progress, analyze=analyze, source=source)
    except ConvsimError as exc:
        # the graph and the analysis hooks come from the config file alone: name it
        if from_file and exc.file is None and str(exc.field or "").split(".")[0].split("[")[0] in ("graph", "analysis"):
            raise ConvsimError(exc.message, file=target, record=exc.record, field=exc.field) from None
        raise


def _run_dir(path: str | Path) -> Path:
    run_dir = Path(path)
    if not (run_dir / "results.jsonl").exists():
        raise ConvsimError("not a run directory (no results.jsonl)", file=run_dir)
    return run_dir


def report(run_dir: str | Path, *, warn: Callable[[str], Any] | None = None) -> Path | None:
    """Rebuild a run's summary, stats, figures and report (``convsim report``); returns report.html's
    path, or None when the run has none (its ``analysis:`` hooks do not include
    ``convsim.evaluation.reporting.analysis:analyze_run``, which writes it).

    The run's own ``analysis:`` hooks do the work; an unavailable hook is passed to ``warn``
    (default: :func:`warnings.warn`).
    """
    from convsim.running.runner import run_hooks
    from convsim.results.summary import summarise_run
    run_dir = _run_dir(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    summarise_run(run_dir, load_graph_module(cfg.graph))
    run_hooks(run_dir, cfg.analysis, warn=warn or (lambda m: warnings.warn(m, stacklevel=2)))
    html = run_dir / "report.html"
    return html if html.exists() else None


def compare(run_a: str | Path, run_b: str | Path, *, alpha: float = 0.05) -> dict:
    """Per-metric differences B - A of two runs (``convsim compare``), with paired tests where
    session ids match; ``{"rows": [...], ...}`` as computed by ``convsim.evaluation.reporting.compare``."""
    if not 0 < alpha < 1:  # also NaN
        raise ConvsimError(f"alpha must be in (0, 1), got {alpha}", field="alpha")
    a, b = _run_dir(run_a), _run_dir(run_b)
    return resolve(COMPARE_RUNS)(a, b, alpha=alpha)


def evaluate(path: str | Path, *, graph: str | None = None, out: str | Path | None = None,
             run_id: str | None = None, models: Assignments = None, params: dict | None = None,
             set_params: list[str] | None = None, embedder: str | None = None, analyze: bool = True) -> Path | dict:
    """Evaluate transcripts that already exist, without simulating (``convsim eval``).

    A results.jsonl or JSONL transcript file is scored by ``graph``'s evaluation into a new run
    directory ``<out>/<run_id>`` (as :func:`run` writes one; ``out`` defaults to ``runs``, ``run_id``
    to ``eval-<source run or file>``), which is returned (one that holds a run already is refused). When the file
    lies in a run directory, that run's graph, params and embedder are used (``graph``, ``params``
    / ``set_params`` and ``embedder`` override them; without a run, the graph defaults to crs_shift
    and the embedder to tfidf). A group-planning dialogue CSV returns its metrics as a dict
    (``embedder``: ``tfidf`` or ``st:minilm`` for its semantic metrics); ``graph``, ``out``,
    ``models``, ``params`` and ``set_params`` do not apply to it and are refused.
    """
    from convsim.config import parse_assignment
    path = Path(path)
    if not path.exists():
        raise ConvsimError("file not found", file=path)
    if path.suffix.lower() == ".csv":
        given = [opt for opt, value in (("--graph", graph), ("--out", out), ("--run-id", run_id), ("--model", models),
                                        ("--set", params or set_params)) if value]
        if given:
            tail = ": they are printed as JSON, redirect them to a file" if given[0] == "--out" else ""
            raise ConvsimError(f"{given[0]} does not apply to a group-planning dialogue CSV (only --embedder "
                               f"does; its metrics are the group-planning ones{tail})",
                               file=path, field=given[0].lstrip("-"))
        return resolve(EVALUATE_GROUP_CSV)(path, embedder_spec=embedder or "tfidf")
    pairs = models.items() if isinstance(models, dict) else \
        (parse_assignment(m, what="--model") for m in models or [])
    specs = {k: v if isinstance(v, dict) else str(v) for k, v in pairs}
    overrides = dict(params or {})
    overrides.update(parse_assignment(s, what="--set") for s in set_params or [])
    return resolve(EVALUATE_TRANSCRIPTS)(path, graph=graph, out=out, run_id=run_id, models=specs,
                                         params=overrides or None, embedder=embedder, analyze=analyze)


def trace(run: str | Path, session: str, *, variant: str | None = None, trial: int = 0,
          node: str | None = None, key: str | None = None, turn: int | None = None,
          at: int | None = None) -> dict:
    """A session's node steps and state diffs (``convsim trace``).

    Returns ``{"file", "trace", "fork", "steps", "n_steps"}``: ``steps`` are those that pass the
    filters (``node``, ``turn``, ``key``: a dotted path whose value the step changed). With
    ``at``: ``{"file", "trace", "fork", "state"}``, the state after step ``at`` (-1: initial).
    """
    from convsim.traces.time_travel import locate_trace, resolve_run_dir
    from convsim.traces.trace_timeline import select_trace
    from convsim.traces.tracing import read_trace
    path = locate_trace(resolve_run_dir(run), session, variant=variant, trial=trial)
    full = read_trace(path)
    return {"file": path, "trace": full, **select_trace(full, node=node, key=key, turn=turn, at=at)}


def fork(run: str | Path, session: str, *, step: int, variant: str | None = None, trial: int = 0,
         models: Assignments = None, params: dict | None = None, set_params: list[str] | None = None,
         run_id: str | None = None, out: str | Path | None = None, analyze: bool = True) -> dict:
    """Run a session again from trace step ``step`` (``convsim fork``; the run needs --checkpoint).

    Returns the comparison of the forked session with the original (``identical``,
    ``first_divergent_turn``, ``first_divergent_step``, ``dialogue_metrics``: ``{name:
    {original, forked}}``, ...) with ``run_dir``, the new run's directory.
    """
    from convsim.traces.time_travel import COMPARISON, fork_run
    run_dir = fork_run(run, session, step=step, variant=variant, trial=trial, models=_cli_strings(models),
                       set_params=_cli_strings(set_params) + _cli_strings(params or {}),
                       run_id=run_id, out_dir=out, analyze=analyze)
    return {**json.loads((run_dir / COMPARISON).read_text(encoding="utf-8")), "run_dir": run_dir}


MERMAID_FALLBACK_NOTE = "%% ASCII drawing needs grandalf (pip install grandalf); Mermaid text instead"


def draw(graph: str, *, ascii: bool = False, png: str | Path | None = None) -> str:  # noqa: A002
    """A graph's topology as Mermaid text, or as ASCII art with ``ascii=True`` (``convsim draw``).

    Without grandalf, ``ascii=True`` returns the Mermaid text under a ``%%`` comment saying so.
    ``png`` also writes a PNG, rendered offline.
    """
    module = load_graph_module(graph)
    drawable = module.build(module.Params()).compile().get_graph()
    text = drawable.draw_mermaid()
    if ascii:
        try:
            text = drawable.draw_ascii()
        except ImportError:
            text = f"{MERMAID_FALLBACK_NOTE}\n{text}"
        except ValueError as exc:  # langchain's ASCII layout gives up on some topologies (fan-outs)
            text = f"%% the ASCII layout cannot draw this graph ({type(exc).__name__} in langchain's drawer); Mermaid text instead\n{text}"
    if png is not None:
        from convsim.traces.drawing import write_png
        write_png(drawable, Path(png))
    return text


def _first_sentence(text: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def list_graphs() -> dict[str, dict]:
    """The graph files in ``graphs/`` (``convsim list``): ``{name: {"path", "description"}}``.

    The description is the file's ``DESCRIPTION`` constant, else its docstring's first line;
    a file that fails to import says so instead.
    """
    out: dict[str, dict] = {}
    for name, path in graph_files().items():
        try:
            module = load_graph_module(name, check=False)
            description = getattr(module, "DESCRIPTION", None) or _first_sentence(module.__doc__)
        except ConvsimError as exc:
            description = f"(cannot be imported: {exc})"
        out[name] = {"path": path, "description": description}
    return out


def list_configs(directory: str | Path | None = None) -> dict[str, dict]:
    """The experiment configs (``convsim list``): ``{path: {"name", "graph", "description", "needs"}}``;
    ``needs`` lists what a config needs beyond the base install (:mod:`convsim.running.requirements`:
    an extra, a data path, a model server), each with ``met`` (True, False, or None: not checked).

    ``directory`` defaults to ``configs/`` in the current directory, else beside ``graphs/``.
    A config that does not validate says so in its description.
    """
    if directory is None:
        candidates = [Path("configs"), project_root() / "configs"]
        directory = next((d for d in candidates if d.is_dir()), candidates[0])
    out: dict[str, dict] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        try:
            cfg = load_config(path)
            out[str(path)] = {"name": cfg.name, "graph": cfg.graph, "description": cfg.description or "",
                              "needs": [{"kind": n.kind, "what": n.what, "field": n.where, "met": n.met}
                                        for n in config_needs(cfg)]}
        except ConvsimError as exc:
            out[str(path)] = {"name": path.stem, "graph": None, "description": f"(invalid: {exc})", "needs": []}
    return out


__all__ = ["compare", "draw", "evaluate", "fork", "list_configs", "list_graphs", "report", "resolve",
           "run", "trace"]
