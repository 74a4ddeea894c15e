"""The ``convsim`` command line (typer + rich). Every command is also a Python function.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import functools
import importlib
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .config import apply_overrides, config_from_dict, load_config
from .errors import ConvsimError
from .graphfile import list_graphs, load_graph_module

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate conversations as LangGraph graphs and evaluate them.")
console = Console()
err_console = Console(stderr=True)


def cli_errors(fn):
    """Turn bad input into one line and exit code 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConvsimError as exc:
            err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
    return wrapper


def _plugin(ref: str):
    """A function of the analysis layer, found by name (convsim itself never imports it)."""
    mod_name, _, fn_name = ref.partition(":")
    try:
        return getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise ConvsimError(f"{ref} is not available: {exc}") from None


def _fmt(ci: dict) -> str:
    if ci.get("mean") is None:
        return "—"
    if ci.get("ci_low") is None:
        return f"{ci['mean']:.3f}"
    return f"{ci['mean']:.3f} [{ci['ci_low']:.3f}, {ci['ci_high']:.3f}]"


def print_summary(run_dir: Path, *, max_metrics: int = 12) -> None:
    """The summary table: a row per dialogue metric, a column per variant (mean [95% CI])."""
    summary = json.loads((run_dir / "summary.json").read_text())
    variants = summary["variants"]
    names: list[str] = []
    for v in variants.values():
        for k in v["metrics"]:
            if k not in names:
                names.append(k)
    preferred: list[str] = []
    try:  # a graph may name its headline metrics (SUMMARY_METRICS) to show first
        cfg_graph = load_config(run_dir / "config.yaml").graph
        preferred = [m for m in getattr(load_graph_module(cfg_graph), "SUMMARY_METRICS", []) if m in names]
    except ConvsimError:
        pass
    names = preferred + [n for n in names if n not in preferred]
    table = Table(title=f"{run_dir.name}: dialogue metrics, mean [95% bootstrap CI]")
    table.add_column("metric")
    for vname, v in variants.items():
        errors = f", {v['errors']} errors" if v["errors"] else ""
        table.add_column(f"{vname}\n(n={v['n']}{errors})", justify="right")
    for n in names[:max_metrics]:
        table.add_row(n, *[_fmt(v["metrics"].get(n, {})) for v in variants.values()])
    console.print(table)
    if len(names) > max_metrics:
        console.print(f"{len(names) - max_metrics} more metrics in {run_dir / 'metrics.csv'}")
    from .usage import COLUMNS, usage_rows
    rows = usage_rows(summary.get("usage") or {})
    if rows:
        usage = Table(title="model usage (every session)")
        for col in ("variant", *(title for _, title in COLUMNS)):
            usage.add_column(col, justify="left" if col == "variant" else "right")
        for row in rows:
            usage.add_row(*row)
        console.print(usage)


@app.command("list")
@cli_errors
def list_cmd() -> None:
    """List the graph files found in graphs/ and the configs in configs/."""
    table = Table(title="graphs")
    table.add_column("name")
    table.add_column("path")
    table.add_column("doc")
    for name, path in list_graphs().items():
        doc = ""
        try:
            doc = (load_graph_module(name, check=False).__doc__ or "").strip().splitlines()[0]
        except (ConvsimError, IndexError):
            pass
        table.add_row(name, str(path), doc)
    console.print(table)
    configs = sorted(Path("configs").glob("*.yaml")) if Path("configs").is_dir() else []
    if configs:
        console.print("configs: " + ", ".join(str(c) for c in configs))


@app.command()
@cli_errors
def run(target: str = typer.Argument(..., help="config.yaml, a graph name or a graph file"),
        sessions: Optional[int] = typer.Option(None, help="sessions per variant"),
        seed: Optional[int] = typer.Option(None, help="base seed"),
        model: list[str] = typer.Option([], "--model", help="ROLE=SPEC, e.g. crs=ollama:qwen:7b"),
        set_: list[str] = typer.Option([], "--set", help="param=value (YAML value)"),
        run_id: Optional[str] = typer.Option(None, help="run id; an existing run resumes"),
        out: Optional[str] = typer.Option(None, help="runs directory (default runs/)"),
        concurrency: Optional[int] = typer.Option(None, help="sessions in flight (async executor)"),
        executor: Optional[str] = typer.Option(None, help="async (default), process (CPU-bound runs) or ray"),
        workers: Optional[int] = typer.Option(None, help="processes (--executor process) or Ray actors"),
        address: Optional[str] = typer.Option(None, help="Ray cluster: auto, ray://host:10001 or host:port"),
        trials: Optional[int] = typer.Option(None),
        max_in_flight: Optional[int] = typer.Option(None, help="model calls in flight per server (limits)"),
        rpm: Optional[float] = typer.Option(None, help="model calls per minute per server (limits)"),
        max_calls: Optional[int] = typer.Option(None, help="run budget: model calls (exit 3 when spent)"),
        max_tokens: Optional[int] = typer.Option(None, help="run budget: tokens (exit 3 when spent)"),
        checkpoint: bool = typer.Option(False, "--checkpoint", help="keep a SQLite checkpointer"),
        no_trace: bool = typer.Option(False, "--no-trace", help="do not write state traces"),
        no_analysis: bool = typer.Option(False, "--no-analysis", help="skip stats, figures and report"),
        quiet: bool = typer.Option(False, "--quiet", "-q")) -> None:
    """Run an experiment config, or a graph with its default params."""
    from .runner import run as run_experiment
    if target.endswith((".yaml", ".yml")):
        cfg = load_config(target)
    else:
        load_graph_module(target)
        cfg = config_from_dict({"name": Path(target).stem, "graph": target}, file=target)
    cfg = apply_overrides(cfg, sessions=sessions, seed=seed, models=model, set_params=set_,
                          run_id=run_id, out_dir=out, concurrency=concurrency, trials=trials,
                          checkpoint=checkpoint or None, trace=False if no_trace else None,
                          executor=executor, workers=workers, address=address)
    from .limits import BudgetReached, with_limits
    cfg = with_limits(cfg, max_in_flight=max_in_flight, rpm=rpm, max_calls=max_calls, max_tokens=max_tokens)
    try:
        run_dir = run_experiment(cfg, show_progress=not quiet, analyze=not no_analysis)
    except BudgetReached as exc:
        err_console.print(f"[bold yellow]stopped:[/bold yellow] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(3) from None
    if not quiet:
        print_summary(run_dir)
        console.print(f"results in {run_dir}")


@app.command()
@cli_errors
def draw(graph: str, ascii_: bool = typer.Option(False, "--ascii", help="ASCII art instead of Mermaid"),
         png: Optional[Path] = typer.Option(None, help="also write a PNG (needs an offline renderer)")) -> None:
    """Print a graph's topology as Mermaid text (offline) or ASCII."""
    module = load_graph_module(graph)
    g = module.build(module.Params()).compile().get_graph()
    if ascii_:
        try:
            console.print(g.draw_ascii(), highlight=False)
        except ImportError as exc:
            raise ConvsimError(f"ASCII drawing needs grandalf: {exc}") from None
    else:
        typer.echo(g.draw_mermaid())
    if png is not None:
        _plugin("convsim.drawing:write_png")(g, png)


@app.command()
@cli_errors
def report(run_dir: Path) -> None:
    """Rebuild stats, figures and report.html of a run."""
    if not (run_dir / "results.jsonl").exists():
        raise ConvsimError("not a run directory (no results.jsonl)", file=run_dir)
    cfg = load_config(run_dir / "config.yaml")
    from .runner import run_hooks
    from .summary import summarise_run
    summarise_run(run_dir, load_graph_module(cfg.graph), seed=cfg.seed)
    run_hooks(run_dir, cfg.analysis, warn=lambda m: err_console.print(f"warning: {m}"))
    console.print(f"report: {run_dir / 'report.html'}")


@app.command()
@cli_errors
def trace(run: str = typer.Argument(..., help="run directory or run id under runs/"),
          session: str = typer.Argument(..., help="session id"),
          variant: Optional[str] = typer.Option(None, help="the variant, when the session ran in several"),
          trial: int = typer.Option(0, help="the trial"),
          node: Optional[str] = typer.Option(None, help="only the steps of this node"),
          key: Optional[str] = typer.Option(None, help="only steps that changed this dotted path, e.g. belief.hotel.area"),
          turn: Optional[int] = typer.Option(None, help="only the steps of this turn"),
          at: Optional[int] = typer.Option(None, "--at", help="print the full state after step AT (-1: initial)"),
          as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Show a session's node steps and state diffs as a timeline."""
    from .fork import locate_trace, resolve_run_dir
    from .trace_timeline import show_trace
    from .tracing import read_trace
    path = locate_trace(resolve_run_dir(run), session, variant=variant, trial=trial)
    show_trace(read_trace(path), node=node, key=key, turn=turn, at=at, as_json=as_json, console=console,
               title=f"{path.parent.name}/{session} (trial {trial})")


@app.command()
@cli_errors
def fork(run: str = typer.Argument(..., help="run directory or run id under runs/ (run with --checkpoint)"),
         session: str = typer.Argument(..., help="session id"),
         step: int = typer.Option(..., "--step", help="the first trace step to run again"),
         variant: Optional[str] = typer.Option(None, help="the variant, when the session ran in several"),
         trial: int = typer.Option(0),
         model: list[str] = typer.Option([], "--model", help="ROLE=SPEC for the forked part"),
         set_: list[str] = typer.Option([], "--set", help="param=value for the forked part"),
         run_id: Optional[str] = typer.Option(None, help="id of the new run"),
         no_analysis: bool = typer.Option(False, "--no-analysis", help="skip stats, figures and report")) -> None:
    """Run a session again from a checkpoint (time travel) and compare it with the original."""
    from .fork import COMPARISON, fork_run
    run_dir = fork_run(run, session, step=step, variant=variant, trial=trial, models=model,
                       set_params=set_, run_id=run_id, analyze=not no_analysis)
    comp = json.loads((run_dir / COMPARISON).read_text())
    if comp["identical"]:
        console.print(f"the fork reproduces the original from step {comp['fork']['step']} on")
    else:
        fd = comp["first_divergent_step"] or {}
        console.print(f"diverges at turn {comp['first_divergent_turn']}"
                      + (f", step {fd['step']} (differing keys: {', '.join(fd['differing_keys'])})" if fd else ""))
        for name, v in sorted(comp["dialogue_metrics"].items()):
            if v["original"] != v["forked"]:
                console.print(f"  {name}: {v['original']} -> {v['forked']}")
    console.print(f"fork in {run_dir} (comparison: {run_dir / COMPARISON})")


@app.command()
@cli_errors
def compare(run_a: Path, run_b: Path,
            alpha: float = typer.Option(0.05, help="significance level (Holm-adjusted)"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Per-metric differences B - A, with paired tests where session ids match."""
    for r in (run_a, run_b):
        if not (r / "results.jsonl").exists():
            raise ConvsimError("not a run directory (no results.jsonl)", file=r)
    result = _plugin("evaluation.compare:compare_runs")(run_a, run_b, alpha=alpha)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    table = Table(title=f"{run_b.name} - {run_a.name}")
    for col in ("variant", "metric", "n", "test", "mean A", "mean B", "diff [95% CI]", "p (Holm)"):
        table.add_column(col)

    def num(x, fmt=".3f"):
        return "—" if x is None else format(x, fmt)
    for row in result["rows"]:
        variant = row["variant_a"] if row["variant_a"] == row["variant_b"] else \
            f"{row['variant_a']} / {row['variant_b']}"
        ci = f"{num(row.get('diff'))} [{num(row.get('ci_low'))}, {num(row.get('ci_high'))}]"
        sig = "*" if row.get("significant") else ""
        table.add_row(variant, row["metric"], str(row.get("n_paired") or f"{row.get('n_a')}/{row.get('n_b')}"), str(row.get("test", "")),
                      num(row.get("mean_a")), num(row.get("mean_b")), ci, num(row.get("p_holm"), ".4f") + sig)
    console.print(table)


@app.command("eval")
@cli_errors
def eval_cmd(path: Path,
             graph: str = typer.Option("crs_shift", help="the graph whose evaluation applies"),
             out: Optional[Path] = typer.Option(None, help="run directory to write"),
             model: list[str] = typer.Option([], "--model", help="ROLE=SPEC, e.g. judge=ollama:llama3"),
             no_analysis: bool = typer.Option(False, "--no-analysis")) -> None:
    """Evaluate transcripts that already exist (results.jsonl, the JSONL import format, or a
    group-planning dialogue CSV) without simulating."""
    from .config import parse_assignment
    if not path.exists():
        raise ConvsimError("file not found", file=path)
    if path.suffix.lower() == ".csv":
        result = _plugin("evaluation.group.dialogue_csv:evaluate_group_csv")(path)
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    models = dict(parse_assignment(m, what="--model") for m in model)
    run_dir = _plugin("evaluation.transcripts:evaluate_transcripts")(
        path, graph=graph, out=out, models={k: str(v) for k, v in models.items()}, analyze=not no_analysis)
    print_summary(run_dir)
    console.print(f"results in {run_dir}")


def main() -> None:  # console-script entry point
    app()


if __name__ == "__main__":
    sys.exit(main())
