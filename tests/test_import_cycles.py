"""No import cycles between the project's modules, dependencies that point one way, one import name.

Every module installs under ``convsim``: the engine (``convsim/``) and the systems, whose folders
(``agents/``, ``catalog/``, ``evaluation/``, ``graphs/``) map to ``convsim.agents`` and so on.

An AST scan: every ``import`` and ``from ... import`` anywhere in a module (top level or inside a
function: a deferred import hides a cycle, it does not break it) is an edge to the project module
it names. Imports under ``if TYPE_CHECKING:`` are skipped (they never run). A package's lazy export
table (``_EXPORTS`` in ``__init__.py``) counts as edges from the package to the modules it names,
since ``from convsim import run`` does import ``convsim.running.runner``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("convsim", "catalog", "agents", "evaluation", "graphs")
SYSTEMS = PACKAGES[1:]  # the repository's folders that install as convsim.<folder>
ENGINE_ROOMS = ("running", "providers", "traces", "results", "contract")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts[0] in SYSTEMS:
        parts = ["convsim", *parts]
    return ".".join(parts)


def layer(module: str) -> str:
    """``engine`` for convsim's own modules, else the system folder (``agents``, ``evaluation`` ...)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SYSTEMS else "engine"


def project_modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if "data" in path.relative_to(ROOT / pkg).parts:
                continue  # shipped data generators are scripts, not modules of the package
            out[_module_name(path)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                targets.add(f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in modules else mod)
        elif isinstance(node, ast.Assign) and is_pkg and any(
                isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            exports = ast.literal_eval(node.value)
            targets.update(f"{name}.{m}" for m in exports.values())
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    edges = {_resolve(t, modules) for t in targets}
    return {e for e in edges if e and e != name}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    # depth <= the number of modules (~150): far below the recursion limit, which is left alone (raised
    # here, it leaked into every later test of the process)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def project_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph = {name: import_edges(name, path, modules) for name, path in modules.items()}
    # a module imports its parent packages first; that is not an edge a cycle can go through
    # unless the parent's __init__ imports it back, which the export table captures
    return graph


def test_no_import_cycles():
    cycles = find_cycles(project_graph())
    assert not cycles, "import cycles between project modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_scan_finds_a_cycle():
    """The scan itself can fail: a two-module cycle (deferred import included) is reported."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert find_cycles(graph) == [["a", "b"]]


def test_scan_sees_deferred_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from convsim.running.runner import run\n", encoding="utf-8")
    modules = {"convsim.running.runner": ROOT / "convsim" / "running" / "runner.py", "m": src}
    assert import_edges("m", src, modules) == {"convsim.running.runner"}


def test_layering_points_one_way():
    """graphs -> agents, evaluation -> catalog -> the engine: nothing imports a layer above it, and
    evaluation never imports agents (what a metric needs from an agent is passed in or lives lower)."""
    graph = project_graph()
    rank = {"engine": 0, "catalog": 1, "agents": 2, "evaluation": 2, "graphs": 3}
    bad = [(a, b) for a, targets in graph.items() for b in targets
           if rank[layer(b)] > rank[layer(a)] or (layer(a) == "evaluation" and layer(b) == "agents")]
    assert not bad, bad


def test_the_engine_imports_no_system():
    graph = project_graph()
    bad = [(a, b) for a, targets in graph.items() if layer(a) == "engine" for b in targets if layer(b) != "engine"]
    assert not bad, bad


def test_the_layer_check_can_fail():
    assert layer("convsim.evaluation.crs.nodes") == "evaluation" and layer("convsim.running.runner") == "engine"
    graph = {"convsim.evaluation.crs.nodes": {"convsim.agents.crs.references"}}
    assert [(a, b) for a, ts in graph.items() for b in ts if layer(a) == "evaluation" and layer(b) == "agents"]


OLD_TOP_LEVEL = {"agents", "evaluation", "catalog", "graphs"}


def old_top_level_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Imports of the names the project no longer installs (``import agents``, ``from catalog.x import``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        out += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in OLD_TOP_LEVEL]
    return out


def test_no_import_of_the_old_top_level_names():
    """One import name: ``agents`` is the OpenAI Agents SDK's; nothing of ours imports it, or
    ``evaluation``, ``catalog``, ``graphs``, as a top-level package (tests and benches included)."""
    files = [p for d in (*PACKAGES, "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    bad = [hit for p in files for hit in old_top_level_imports(p)]
    assert not bad, bad


def test_the_old_name_scan_can_fail(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("import agents.crs\nfrom convsim.agents import judge\nfrom catalog import travel\n",
                   encoding="utf-8")
    assert [h.split(": ")[1] for h in old_top_level_imports(src, root=tmp_path)] == ["agents.crs", "catalog"]
