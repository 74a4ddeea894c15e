"""The ``convsim`` command line (typer + rich): a thin layer over convsim/api.py.

Every command parses its options, calls the function of the same name in ``convsim.api``
(which returns data and prints nothing) and renders the result. Bad input ends with one
line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import functools
import json
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from convsim.providers import stopping
from convsim import api
from convsim.config import load_config
from convsim.errors import ConvsimError, HookError
from convsim.contract.graphfile import load_graph_module

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate conversations as LangGraph graphs and evaluate them.")
console = Console()
err_console = Console(stderr=True)


def cli_errors(fn):
    """Turn bad input into one line and exit code 2, a hook's code error into one line and exit code 3."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConvsimError as exc:
            # escaped: an install hint like pip install -e '.[embeddings]' must print literally
            err_console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(2) from None
        except HookError as exc:  # dataset_metrics or an analysis hook raised: a code error, what it wrote kept
            err_console.print(f"[bold red]code error:[/bold red] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(3) from None
    return wrapper


STATUS_ROWS = (("sessions ok", ("ok",)), ("agent failures", ("agent_failure",)),
               ("simulator failures", ("simulator_failure",)), ("errors (infra, code)", ("infra_error", "code_error")))


def run_outcome(run_dir: Path) -> int:
    """Print the run's warnings and errors; the exit code: 0 if every session ended with a final
    status (ok, agent_failure, simulator_failure), 3 if any ended in infra_error or code_error."""
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    for warning in summary.get("warnings", []):
        err_console.print(f"warning: {escape(warning)}", highlight=False, soft_wrap=True)
    counts = summary.get("status_counts") or {}
    if not counts.get("errors"):
        return 0
    first = summary.get("first_error") or {}
    err_console.print(
        f"[bold red]{counts['errors']} of {counts['sessions']} sessions did not finish[/bold red] "
        f"({counts.get('infra_error', 0)} infra errors, {counts.get('code_error', 0)} code errors; "
        f"see {escape(str(run_dir / 'errors.jsonl'))}; run again with the same --run-id to retry them). "
        f"First: {escape(str(first.get('variant')))}/{escape(str(first.get('session_id')))}: "
        f"{escape(str(first.get('error', '')))}", highlight=False, soft_wrap=True)
    return 3


def print_summary(run_dir: Path, *, max_metrics: int = 4) -> None:
    """The summary: a row per variant (its scored sessions), a column per headline metric (the
    graph's SUMMARY_METRICS, at most ``max_metrics`` and as many as fit the terminal: mean, and its
    95% CI under it); every metric is in metrics.csv."""
    from convsim.results import summary_text
    summary = json.loads((run_dir / "summary.json").read_text())
    variants = summary["variants"]
    names: list[str] = []
    for v in variants.values():
        for k in v["metrics"]:
            if k not in names:
                names.append(k)
    preferred: list[str] = []
    module = None
    try:  # a graph may name its headline metrics (SUMMARY_METRICS) to show first
        module = load_graph_module(load_config(run_dir / "config.yaml").graph)
        preferred = [m for m in getattr(module, "SUMMARY_METRICS", []) if m in names]
    except ConvsimError:
        pass
    names = preferred + [n for n in names if n not in preferred]
    width = console.width
    lines, shown = summary_text.summary_lines(summary, preferred or names, width=width, module=module,
                                              max_metrics=max_metrics,
                                              title=f"{run_dir.name}: mean [95% CI] over scored sessions")
    lines += summary_text.status_lines(summary, width=width)
    if len(names) > len(shown):
        lines.append(f"{len(names) - len(shown)} more metrics in metrics.csv (every metric; report.html)")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    from convsim.providers.usage import printed_columns, usage_rows
    columns = printed_columns(summary.get("usage") or {})
    rows = usage_rows(summary.get("usage") or {}, columns)
    if rows:
        usage = Table(title="model usage (every session)")
        for col in ("variant", *(title for _, title in columns)):
            usage.add_column(col, justify="left" if col == "variant" else "right")
        for row in rows:
            usage.add_row(*row)
        console.print(usage)



def needs_text(needs: list[dict]) -> str:
    """``convsim list``'s needs cell: "base", or what the config needs beyond the base install (an
    extra's name, "data", "server"), each marked "!" where it is not here (an extra not installed, a
    data path missing)."""
    if not needs:
        return "base"
    words = []
    for n in needs:
        word = (n["what"] if n["kind"] == "extra" else n["kind"]) + ("!" if n["met"] is False else "")
        if word not in words:
            words.append(word)
    return ",".join(words)


@app.command("list")
@cli_errors
def list_cmd() -> None:
    """List the graph files found in graphs/ and the configs in configs/, one line each."""
    from convsim.results.summary_text import one_line
    width = console.width
    graphs = api.list_graphs()
    lines = ["graphs (convsim run <name>)"]
    name_w = max([len(n) for n in graphs] + [4])
    lines += [one_line((name, info["description"]), (name_w,), width) for name, info in graphs.items()]
    configs = api.list_configs()
    if configs:
        folders = {str(Path(p).parent) for p in configs}
        folder = folders.pop() if len(folders) == 1 else None  # one folder: named once, in the heading
        shown = {(Path(p).name if folder else p): info for p, info in configs.items()}
        path_w = max(len(p) for p in shown)
        graph_w = max(len(str(i["graph"] or "")) for i in shown.values())
        needs = {p: needs_text(info.get("needs") or []) for p, info in shown.items()}
        needs_w = max(len(n) for n in needs.values())
        lines += ["", f"configs (convsim run {folder}/<file>)" if folder else "configs (convsim run <path>)"]
        lines += [one_line((path, str(info["graph"] or ""), needs[path], info["description"]),
                           (path_w, graph_w, needs_w), width)
                  for path, info in shown.items()]
        lines += ["needs: base = the base install; local, embeddings, ray, remote = that extra",
                  "(pip install -e '.[NAME]'); data = a data file; server = a model server;",
                  "! = not here"]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
@cli_errors
def run(target: str = typer.Argument(..., help="config.yaml, a graph name or a graph file"),
        sessions: Optional[int] = typer.Option(None, help="sessions per variant"),
        seed: Optional[int] = typer.Option(None, help="base seed"),
        model: list[str] = typer.Option([], "--model", help="ROLE=SPEC, e.g. crs=ollama:qwen:7b"),
        agent: list[str] = typer.Option([], "--agent", help="ROLE=SPEC: your agent in a slot, e.g. crs=my_crs.py:graph, "
                                        "agent=openai:m@http://host/v1, crs=langgraph:URL#assistant, crs=a2a:URL"),
        set_: list[str] = typer.Option([], "--set", help="param=value (YAML value)"),
        run_id: Optional[str] = typer.Option(None, help="run id: the run's directory under --out; an existing run "
                                             "resumes (default: <name>-<UTC time to the millisecond>)"),
        out: Optional[str] = typer.Option(None, help="the directory runs are written under (default runs/)"),
        concurrency: Optional[int] = typer.Option(
            None, help="sessions in flight (process and Ray workers run ceil(concurrency / workers) each)"),
        executor: Optional[str] = typer.Option(None, help="async (default), process (CPU-bound runs) or ray"),
        workers: Optional[int] = typer.Option(None, help="processes (--executor process) or Ray actors"),
        address: Optional[str] = typer.Option(None, help="Ray cluster: auto, ray://host:10001 or host:port"),
        trials: Optional[int] = typer.Option(None, help="runs of every session (pass^k, judge stability); overrides the config's trials"),
        max_in_flight: Optional[int] = typer.Option(None, help="model calls in flight per server (limits)"),
        timeout: Optional[float] = typer.Option(None, help="seconds one model request may take on the server "
                                                "(retry.timeout; a request waiting for a free slot is not timed)"),
        stream: Optional[bool] = typer.Option(None, "--stream/--no-stream", help="stream the answers of HTTP model "
                                              "servers (retry.stream), timed by the three timeouts below"),
        first_token_timeout: Optional[float] = typer.Option(
            None, help="streamed: seconds to a request's first token: the server's queue and prompt "
            "(retry.first_token_timeout, default 600)"),
        idle_timeout: Optional[float] = typer.Option(
            None, help="streamed: seconds between two tokens (retry.idle_timeout, default 30)"),
        total_timeout: Optional[float] = typer.Option(
            None, help="streamed: seconds one request may take in all (retry.total_timeout, default 1800)"),
        rpm: Optional[float] = typer.Option(None, help="model calls per minute per server (limits)"),
        max_calls: Optional[int] = typer.Option(None, help="run budget: model calls (exit 3 when spent)"),
        max_tokens: Optional[int] = typer.Option(None, help="run budget: tokens (exit 3 when spent)"),
        checkpoint: bool = typer.Option(False, "--checkpoint", help="keep a SQLite checkpointer"),
        no_trace: bool = typer.Option(False, "--no-trace", help="do not write state traces"),
        no_analysis: bool = typer.Option(False, "--no-analysis", help="skip stats, figures and report"),
        prefix: Optional[Path] = typer.Option(None, "--prefix", help="dialogues whose first turns open every session"),
        prefix_turns: int = typer.Option(1, "--prefix-turns", help="scripted user turns taken from --prefix"),
        tool_host: Optional[str] = typer.Option(
            None, help="IP address the tool server for langgraph:/a2a: agents listens on (tool_server.host, "
            "default 127.0.0.1; 0.0.0.0: every interface, needs --tool-url)"),
        tool_port: Optional[int] = typer.Option(None, help="its port (tool_server.port, default 0: a free one)"),
        tool_url: Optional[str] = typer.Option(
            None, help="the base URL the agent is told, e.g. http://10.0.0.5 (tool_server.url; "
            "without a port, the server's is added)"),
        quiet: bool = typer.Option(False, "--quiet", "-q")) -> None:
    """Run an experiment config, or a graph with its default params."""
    from convsim.providers.limits import BudgetReached
    # the whole command: a Ctrl-C while the summary prints is the same stop, never an "aborted"
    with stopped_cleanly("the sessions that finished are kept; run the same command (same --run-id) again "
                         "to resume"):
        try:
            run_dir = api.run(target, sessions=sessions, seed=seed, models=model, set_params=set_,
                              run_id=run_id, out=out, concurrency=concurrency, trials=trials,
                              checkpoint=checkpoint or None, trace=False if no_trace else None,
                              executor=executor, workers=workers, address=address, show_progress=not quiet,
                              analyze=not no_analysis,
                              prefix=None if prefix is None else {"file": str(prefix), "turns": prefix_turns},
                              timeout=timeout,
                              retry={"stream": stream, "first_token_timeout": first_token_timeout,
                                     "idle_timeout": idle_timeout, "total_timeout": total_timeout},
                              limits={"max_in_flight": max_in_flight, "rpm": rpm, "max_calls": max_calls,
                                      "max_tokens": max_tokens}, agents=agent or None,
                              tool_server={"host": tool_host, "port": tool_port, "url": tool_url})
        except BudgetReached as exc:
            if not quiet and exc.run_dir is not None:
                print_summary(exc.run_dir)  # what the finished sessions scored and spent
            err_console.print(f"[bold yellow]stopped:[/bold yellow] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(3) from None
        if not quiet:
            print_summary(run_dir)
            console.print(f"results in {run_dir}")
        code = run_outcome(run_dir)
    if code:
        raise typer.Exit(code)


class _Stop:
    """What stops a command: SIGTERM's handler (the command stops as on Ctrl-C: what SIGINT's handler
    does now, asyncio's cancelling the run's task or Python's raising KeyboardInterrupt), and a hook
    that notes a KeyboardInterrupt Python swallowed: raised in a weakref callback or a ``__del__``, it
    is only printed as "Exception ignored" and the command goes on (before, to exit 0). It still ends
    as interrupted, once what it was doing is done (a second Ctrl-C stops it sooner)."""

    def __init__(self) -> None:
        self.sigterm = self.swallowed = False
        self.previous_hook = sys.unraisablehook

    def __call__(self, signum, frame) -> None:  # on SIGTERM
        self.sigterm = True
        if graceful_stop(signum):
            return
        on_sigint = signal.getsignal(signal.SIGINT)
        if callable(on_sigint):
            on_sigint(signal.SIGINT, frame)
        else:  # SIGINT ignored (a shell's background job): stop all the same
            raise KeyboardInterrupt

    def unraisable(self, unraisable) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            self.swallowed = True  # (not raised again here: inside this hook it would be swallowed too)
        else:
            self.previous_hook(unraisable)


def graceful_stop(signum: int) -> bool:
    """The first SIGTERM/SIGINT while a run is in progress asks it to stop gracefully (no new session
    or model call, calls in flight cancelled, finished sessions written: convsim.providers.stopping);
    False when there is nothing to stop gracefully or it was asked already (then stop at once)."""
    if not stopping.active() or stopping.requested():
        return False
    stopping.request(f"{signal.Signals(signum).name} received")
    return True


def on_sigint(signum, frame) -> None:
    """SIGINT: a graceful stop of a run in progress, else (or a second time) KeyboardInterrupt."""
    if not graceful_stop(signum):
        raise KeyboardInterrupt


@contextmanager
def stopped_cleanly(kept: str):
    """Ctrl-C ends what runs inside with one line (``interrupted: <kept>``) and exit code 130; SIGTERM
    (a batch scheduler's time limit, Kubernetes stopping a pod, ``kill``) the same way with exit code
    143, instead of dying mid-write with no word (or, under Ray, a C++ stack dump from Ray's own
    handler: see ``ray_executor.connect``). Only the CLI does this: a library caller's signals are
    its own."""
    stop = _Stop()
    main = threading.current_thread() is threading.main_thread()
    stopping.reset()
    previous = signal.signal(signal.SIGTERM, stop) if main else None
    previous_int = signal.signal(signal.SIGINT, on_sigint) if main else None
    sys.unraisablehook = stop.unraisable
    try:
        yield
        if stop.swallowed:  # interrupted all the same: never reported as a finished command
            raise KeyboardInterrupt
    except (KeyboardInterrupt, stopping.RunStopped):
        how, code = ("terminated (SIGTERM)", 143) if stop.sigterm else ("interrupted", 130)
        err_console.print(f"[bold yellow]{how}:[/bold yellow] {kept}", highlight=False, soft_wrap=True)
        raise typer.Exit(code) from None
    finally:
        sys.unraisablehook = stop.previous_hook
        if main:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)


@app.command()
@cli_errors
def draw(graph: str, ascii_: bool = typer.Option(False, "--ascii", help="ASCII art instead of Mermaid"),
         png: Optional[Path] = typer.Option(None, help="also write a PNG (needs an offline renderer)")) -> None:
    """Print a graph's topology as Mermaid text (offline) or ASCII."""
    text = api.draw(graph, ascii=ascii_, png=png)
    if ascii_ and not text.startswith(api.MERMAID_FALLBACK_NOTE):
        console.print(text, highlight=False)
    else:
        typer.echo(text)


@app.command()
@cli_errors
def report(run_dir: Path) -> None:
    """Rebuild stats, figures and report.html of a run."""
    html = api.report(run_dir, warn=lambda m: err_console.print(f"warning: {m}"))
    summary_path = Path(run_dir) / "summary.json"
    for warning in (json.loads(summary_path.read_text(encoding="utf-8")).get("warnings") or []
                    if summary_path.exists() else []):  # what the rebuilt summary found (as `run` prints them)
        err_console.print(f"warning: {escape(warning)}", highlight=False, soft_wrap=True)
    if html is None:  # the run's hooks write no report: say so, never print a path that is not there
        hooks = ", ".join(api.load_config(Path(run_dir) / "config.yaml").analysis) or "none"
        console.print(f"report: none: this run's analysis hooks ({hooks}) write no report.html; summary.json and "
                      "metrics.csv were rebuilt (add convsim.evaluation.reporting.analysis:analyze_run to analysis: for a report)",
                      highlight=False)
    else:
        console.print(f"report: {html}")


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
    from convsim.traces.trace_timeline import print_trace
    found = api.trace(run, session, variant=variant, trial=trial, node=node, key=key, turn=turn, at=at)
    print_trace(found["trace"], found, as_json=as_json, console=console,
                title=f"{found['file'].parent.name}/{session} (trial {trial})")


@app.command()
@cli_errors
def fork(run: str = typer.Argument(..., help="run directory or run id under runs/ (run with --checkpoint)"),
         session: str = typer.Argument(..., help="session id"),
         step: int = typer.Option(..., "--step", help="the first trace step to run again"),
         variant: Optional[str] = typer.Option(None, help="the variant, when the session ran in several"),
         trial: int = typer.Option(0),
         model: list[str] = typer.Option([], "--model", help="ROLE=SPEC for the forked part"),
         set_: list[str] = typer.Option([], "--set", help="param=value for the forked part"),
         run_id: Optional[str] = typer.Option(None, help="id of the new run (its directory under --out)"),
         out: Optional[str] = typer.Option(None, help="the directory runs are written under (default: the "
                                           "original run's)"),
         no_analysis: bool = typer.Option(False, "--no-analysis", help="skip stats, figures and report")) -> None:
    """Run a session again from a checkpoint (time travel) and compare it with the original."""
    from convsim.traces.time_travel import COMPARISON
    with stopped_cleanly("the fork keeps its checkpoint: the same fork command with --run-id <the fork's "
                         "directory name> resumes it"):
        comp = api.fork(run, session, step=step, variant=variant, trial=trial, models=model,
                        set_params=set_, run_id=run_id, out=out, analyze=not no_analysis)
    run_dir = comp["run_dir"]
    status = comp.get("status") or {}
    forked_at = comp.get("fork") or {}
    if forked_at.get("inner"):
        inner = forked_at["inner"]
        console.print(f"the agent's graph in node {inner['path']} resumed from its checkpoint before "
                      f"{inner['node']} (its superstep {inner['inner_superstep']}): its steps before it did not "
                      "run again", markup=False, highlight=False, soft_wrap=True)
    elif forked_at.get("inner_fallback"):
        console.print(f"the whole node ran again, not from inside its agent: {forked_at['inner_fallback']}",
                      markup=False, highlight=False, soft_wrap=True)
    if status.get("forked", "ok") != "ok":
        # the forked session failed: say how, not only that its metrics became None
        err_console.print(f"the forked session ended {status['forked']} (the original: {status.get('original')}):\n"
                          + escape(str(comp.get("forked_error") or "").strip()), highlight=False, soft_wrap=True)
    if comp["identical"]:
        console.print(f"the fork reproduces the original from step {comp['fork']['step']} on")
    else:
        from convsim.results.summary_text import fork_lines
        for line in fork_lines(comp, headline=_headline_of(run_dir), width=console.width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"fork in {run_dir} (comparison: {run_dir / COMPARISON})")
    if status.get("forked") in ("infra_error", "code_error"):  # as a run with errors: not exit 0
        raise typer.Exit(3)


def _headline_of(run_dir: Path) -> list[str]:
    """The graph's SUMMARY_METRICS of a run (none when its config or graph does not load)."""
    try:
        return list(getattr(load_graph_module(load_config(Path(run_dir) / "config.yaml").graph),
                            "SUMMARY_METRICS", []) or [])
    except ConvsimError:
        return []


@app.command()
@cli_errors
def compare(run_a: Path, run_b: Path,
            alpha: float = typer.Option(0.05, help="significance level (Holm-adjusted)"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Per-metric differences B - A, with paired tests where session ids match (80 columns)."""
    result = api.compare(run_a, run_b, alpha=alpha)
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    typer.echo(api.resolve("convsim.evaluation.reporting.compare_text:format_comparison")(result))


@app.command()
@cli_errors
def fidelity(run_dirs: list[Path] = typer.Argument(..., help="run directories (their variants side by side)"),
             human: Path = typer.Option(..., "--human", help="human dialogues: ConvLab-3 unified, MultiWOZ 2.2, "
                                        "or convsim records"),
             domain: list[str] = typer.Option([], "--domain", help="task domains (default: the human corpus's)"),
             boot: int = typer.Option(200, "--boot", help="bootstrap resamples of each distance"),
             seed: int = typer.Option(0, "--seed"),
             out: Optional[Path] = typer.Option(None, "--out", help="also write <out>.json and <out>.md"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """How human is the simulated user: distances to a human corpus and a discriminator's AUC (docs/fidelity.md)."""
    report = api.resolve("convsim.evaluation.fidelity.runner:fidelity_report")(
        run_dirs, human, domains=domain or None, n_boot=boot, seed=seed)
    text = api.resolve("convsim.evaluation.fidelity.runner:markdown")(report)
    if out is not None:
        out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        out.with_suffix(".md").write_text(text, encoding="utf-8")
    typer.echo(json.dumps(report, indent=2, default=str) if as_json else text)


@app.command("eval")
@cli_errors
def eval_cmd(path: Path,
             graph: Optional[str] = typer.Option(None, help="the graph whose evaluation applies "
                                                 "(default: the source run's graph, else crs_shift)"),
             set_: list[str] = typer.Option([], "--set", help="param=value over the source run's params"),
             out: Optional[Path] = typer.Option(None, help="the directory runs are written under (default runs/)"),
             run_id: Optional[str] = typer.Option(None, help="the new run's directory under --out (default "
                                                  "eval-<source run or file>; one holding a run is refused)"),
             model: list[str] = typer.Option([], "--model", help="ROLE=SPEC, e.g. judge=ollama:llama3"),
             no_analysis: bool = typer.Option(False, "--no-analysis", help="skip stats, figures and report"),
             embedder: Optional[str] = typer.Option(None, help="tfidf, st:minilm or st:<dir> (default: the "
                                                    "source run's, else tfidf)"),
             quiet: bool = typer.Option(False, "--quiet", "-q", help="no summary table (warnings still shown)")) -> None:
    """Evaluate transcripts that already exist (results.jsonl, the JSONL import format, or a
    group-planning dialogue CSV, which takes only --embedder) without simulating."""
    from convsim.providers.models import ModelUnavailable
    try:
        result = api.evaluate(path, graph=graph, out=out, run_id=run_id, models=model, set_params=set_,
                              embedder=embedder, analyze=not no_analysis)
    except ModelUnavailable as exc:  # a model server's fault: not scored, exit 3 as a run with errors
        err_console.print(f"[bold yellow]stopped:[/bold yellow] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(3) from None
    if isinstance(result, dict):  # a group-planning dialogue CSV: its metrics
        for line in result.get("warnings") or []:
            err_console.print(f"warning: {escape(str(line))}", highlight=False, soft_wrap=True)
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    run_dir = result
    if not quiet:
        print_summary(run_dir)
        console.print(f"results in {run_dir}")
    code = run_outcome(run_dir)  # the summary's warnings (records skipped...), and exit 3 as a run with errors
    if code:
        raise typer.Exit(code)


def main() -> None:  # console-script entry point
    """The command line. A usage error (an unknown option, ``--seed abc``) is one line and exit 2,
    as any other bad input, instead of click's boxed usage message."""
    # the click typer runs on (typer vendors its own copy): its UsageError is BadParameter's base
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    no_args = getattr(sys.modules[usage_error.__module__], "NoArgsIsHelpError", ())
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(n) comes back as n
    except no_args as exc:  # bare ``convsim`` or ``convsim run``: the help, as before
        print(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except usage_error as exc:
        where = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
        err_console.print(f"[bold red]error:[/bold red] {escape(exc.format_message())}{escape(where)}",
                          highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted", highlight=False)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    sys.exit(main())
