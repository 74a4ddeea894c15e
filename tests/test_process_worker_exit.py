"""Process workers end without the interpreter's teardown once every session has landed (the driver
waited ~3 s per worker for it on a loaded 2-core machine before it could summarise the run). Seen
through an exit handler the graph file registers: it runs when a process exits normally (checked
here in a plain spawned process), and it does not run in the run's workers."""
import multiprocessing
import textwrap

from cli_helpers import cli

GRAPH = textwrap.dedent('''
    """hello_chat whose module records each process that exits normally after importing it."""
    import atexit
    import os
    from pathlib import Path

    from convsim.graphs.hello_chat import *  # noqa: F401,F403
    from convsim.graphs.hello_chat import build, Params  # noqa: F401

    EXITS = Path(__file__).with_suffix(".exits")
    atexit.register(lambda: EXITS.open("a").write(f"{os.getpid()}\\n"))
    graph = build(Params()).compile()
''')


def _import_and_exit(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("exit_chat_probe", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_workers_end_without_teardown_once_their_sessions_landed(tmp_path):
    graph = tmp_path / "exit_chat.py"
    graph.write_text(GRAPH)
    exits = graph.with_suffix(".exits")
    # the probe works: a spawned process that imports the graph and exits normally runs the handler
    proc = multiprocessing.get_context("spawn").Process(target=_import_and_exit, args=(str(graph),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert exits.read_text().split() == [str(proc.pid)]
    exits.unlink()
    code, out, exc = cli("run", graph, "--sessions", 4, "--executor", "process", "--workers", 2,
                         "--out", tmp_path / "runs", "--run-id", "proc", "-q", "--no-analysis")
    assert code == 0, (out, exc)
    assert len((tmp_path / "runs" / "proc" / "results.jsonl").read_text().splitlines()) == 4
    # both workers planned the run (imported the graph) and ended: none ran its exit handlers
    # (this process, the driver, has not exited yet)
    assert not exits.exists(), exits.read_text()
