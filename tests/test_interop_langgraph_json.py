"""langgraph.json registers every graph file; each entry loads and is a compiled graph. Also `convsim draw`."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convsim.cli import app
from convsim.drawing import parse_mermaid, write_png

ROOT = Path(__file__).resolve().parents[1]
GRAPH_FILES = sorted(p for p in (ROOT / "graphs").glob("*.py") if not p.name.startswith("_"))


def _config():
    return json.loads((ROOT / "langgraph.json").read_text())


def test_langgraph_json_registers_every_graph_file():
    cfg = _config()
    assert cfg["dependencies"] == ["."]
    # paths in langgraph.json are relative to the file, not to the directory pytest runs in
    registered = {(ROOT / ref.split(":")[0]).resolve() for ref in cfg["graphs"].values()}
    missing = [p.name for p in GRAPH_FILES if p.resolve() not in registered]
    assert not missing, f"graphs not in langgraph.json: {missing}"
    for name, ref in cfg["graphs"].items():
        path, _, attr = ref.partition(":")
        assert path.startswith("./") and attr == "graph", ref
        assert (ROOT / path).exists(), ref
        assert name == Path(path).stem


@pytest.mark.parametrize("name", sorted(_config()["graphs"]))
def test_each_registered_graph_loads_the_way_langgraph_dev_does(name):
    """Import the file by path (as langgraph-cli does, with the project on sys.path) and check `graph`."""
    from langgraph.graph.state import CompiledStateGraph
    ref = _config()["graphs"][name]
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
