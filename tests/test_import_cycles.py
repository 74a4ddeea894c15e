"""No import cycles between the project's modules (convsim, catalog, agents, evaluation, graphs).

An AST scan: every ``import`` and ``from ... import`` anywhere in a module (top level or inside a
function: a deferred import hides a cycle, it does not break it) is an edge to the project module
it names. Imports under ``if TYPE_CHECKING:`` are skipped (they never run). A package's lazy export
table (``_EXPORTS`` in ``__init__.py``) counts as edges from the package to the modules it names,
since ``from convsim import run`` does import ``convsim.runner``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("convsim", "catalog", "agents", "evaluation", "graphs")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


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
    src.write_text("def f():\n    from convsim.runner import run\n", encoding="utf-8")
    modules = {"convsim.runner": ROOT / "convsim" / "runner.py", "m": src}
    assert import_edges("m", src, modules) == {"convsim.runner"}


def test_layering_points_one_way():
    """graphs -> agents, evaluation -> catalog -> convsim: nothing in convsim imports a layer above it."""
    graph = project_graph()
    rank = {"convsim": 0, "catalog": 1, "agents": 2, "evaluation": 2, "graphs": 3}
    bad = [(a, b) for a, targets in graph.items() for b in targets
           if rank[b.split(".")[0]] > rank[a.split(".")[0]]]
    assert not bad, bad
