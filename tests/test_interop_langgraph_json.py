"""langgraph.json entries are graph files; every graph file loads as `langgraph dev` loads it. Also `convsim draw`."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convsim.cli import app
from convsim.traces.drawing import parse_mermaid, write_png

ROOT = Path(__file__).resolve().parents[1]
GRAPH_FILES = sorted(p for p in (ROOT / "graphs").glob("*.py") if not p.name.startswith("_"))


def _config():
    return json.loads((ROOT / "langgraph.json").read_text())


def test_langgraph_json_entries_point_at_graph_files():
    """Every entry of langgraph.json is a graph file's ``graph``, named after the file.

    A graph file that is not registered is not an error (it runs with convsim, and is loaded
    below anyway); register it with one line to serve it with ``langgraph dev``.
    """
    cfg = _config()
    assert cfg["dependencies"] == ["."]
    for name, ref in cfg["graphs"].items():
        path, _, attr = ref.partition(":")
        # paths in langgraph.json are relative to the file, not to the directory pytest runs in
        assert path.startswith("./") and attr == "graph", ref
        assert (ROOT / path).exists(), ref
        assert name == Path(path).stem


def _graph_refs() -> dict[str, str]:
    """langgraph.json's entries plus every graph file in graphs/, as langgraph.json would name it."""
    refs = {p.stem: f"./graphs/{p.name}:graph" for p in GRAPH_FILES}
    refs.update(_config()["graphs"])
    return refs


@pytest.mark.parametrize("name", sorted(_graph_refs()))
def test_each_graph_loads_the_way_langgraph_dev_does(name):
    """Import the file by path (as langgraph-cli does, with the project on sys.path) and check `graph`."""
    from langgraph.graph.state import CompiledStateGraph
    ref = _graph_refs()[name]
    path, _, attr = ref.partition(":")
    sys.path.insert(0, str(ROOT))
    try:
        spec = importlib.util.spec_from_file_location(f"lgjson_{name}", ROOT / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as langgraph_api does, so postponed annotations resolve
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT))
    graph = getattr(module, attr)
    assert isinstance(graph, CompiledStateGraph)
    drawable = graph.get_graph()
    assert "__start__" in drawable.nodes and "__end__" in drawable.nodes
    nodes, edges = parse_mermaid(drawable.draw_mermaid())
    assert set(nodes) == set(drawable.nodes)
    assert len(edges) == len(drawable.edges)


def test_draw_command_mermaid_ascii_png(tmp_path):
    cli = CliRunner()
    res = cli.invoke(app, ["draw", "hello_chat"])
    assert res.exit_code == 0 and "evaluate_turn -.-> user" in res.stdout
    res = cli.invoke(app, ["draw", "hello_chat", "--ascii"])
    assert res.exit_code == 0 and "| evaluate_turn |" in res.stdout
    png = tmp_path / "g.png"
    res = cli.invoke(app, ["draw", "hello_chat", "--png", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_png_from_mermaid_text(tmp_path):
    out = write_png("graph TD;\n\ta(a)\n\tb(b)\n\ta --> b;\n\tb -.-> a;\n", tmp_path / "x.png")
    assert out.stat().st_size > 1000
