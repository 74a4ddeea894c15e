"""Draw a graph's topology offline: Mermaid text, ASCII, an SVG and a PNG.

LangGraph's ``draw_mermaid_png()`` calls the Mermaid web service by default; nothing here
touches the network. The SVG and the PNG are drawn from the ``draw_mermaid()`` text (so a
run can store the text and the report can draw it without importing the graph): the
flowchart is parsed, laid out in layers with grandalf's Sugiyama layout (a plain
longest-path layering when grandalf is absent), and drawn as SVG or with matplotlib.
Conditional edges are dashed, as in Mermaid.
"""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from .errors import ConvsimError

_NODE = re.compile(r"^\s*([\w.\-:]+)\s*(\(\[|\(|\[|\{)(.*?)(\]\)|\)|\]|\})(:::\w+)?\s*;?\s*$")
_EDGE = re.compile(r"^\s*([\w.\-:]+)\s*(-->|-\.->|-\.\s*(.*?)\s*\.->|--\s*(.*?)\s*-->)\s*([\w.\-:]+)\s*;?\s*$")
_TAG = re.compile(r"<[^>]+>")
NODE_W, NODE_H, GAP_X, GAP_Y = 150.0, 34.0, 30.0, 56.0


def mermaid_text(graph: Any) -> str:
    """Mermaid text of a compiled graph, a ``StateGraph`` or a LangChain drawable graph."""
    if hasattr(graph, "compile") and not hasattr(graph, "get_graph"):
        graph = graph.compile()
    if hasattr(graph, "get_graph"):
        graph = graph.get_graph()
    return graph.draw_mermaid()


def parse_mermaid(text: str) -> tuple[list[str], list[tuple[str, str, bool, str]]]:
    """Nodes and edges ``(source, target, conditional, label)`` of a LangGraph Mermaid flowchart."""
    nodes: list[str] = []
    edges: list[tuple[str, str, bool, str]] = []
    labels: dict[str, str] = {}
    body = text.split("---", 2)[-1] if text.lstrip().startswith("---") else text
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("graph ", "flowchart ", "classDef", "subgraph", "end", "%%", "style ")):
            continue
        m = _EDGE.match(s)
        if m:
            src, arrow, dlabel, slabel, dst = m.groups()
            label = html.unescape(dlabel or slabel or "").replace("\xa0", " ").strip()
            edges.append((src, dst, arrow.startswith("-."), label))
            for n in (src, dst):
                if n not in nodes:
                    nodes.append(n)
            continue
        m = _NODE.match(s)
        if m and m.group(1) not in nodes:
            nodes.append(m.group(1))
            labels[m.group(1)] = _TAG.sub("", m.group(3)).strip()
    if not nodes:
        raise ConvsimError("no nodes found in the Mermaid text", field="mermaid")
    return nodes, edges


def _layers_fallback(nodes, edges) -> dict[str, tuple[float, float]]:
    depth = {n: 0 for n in nodes}
    forward = [(a, b) for a, b, *_ in edges if a != b]
    for _ in range(len(nodes)):  # longest path, ignoring edges that would close a cycle
        changed = False
        for a, b in forward:
            if depth[b] < depth[a] + 1 <= len(nodes) - 1 and nodes.index(b) > nodes.index(a):
                depth[b] = depth[a] + 1
                changed = True
        if not changed:
            break
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(depth[n], []).append(n)
    return {n: ((i - (len(row) - 1) / 2) * (NODE_W + GAP_X), d * (NODE_H + GAP_Y))
            for d, row in rows.items() for i, n in enumerate(row)}


def layout(nodes: list[str], edges: list[tuple]) -> dict[str, tuple[float, float]]:
    """Centre coordinates of every node, top to bottom."""
    try:
        from grandalf.graphs import Edge, Graph, Vertex
        from grandalf.layouts import SugiyamaLayout
    except ImportError:
        return _layers_fallback(nodes, edges)

    class _View:
        w, h, xy = NODE_W, NODE_H, (0.0, 0.0)

    verts = {n: Vertex(n) for n in nodes}
    for v in verts.values():
        v.view = _View()
    g = Graph(list(verts.values()), [Edge(verts[a], verts[b]) for a, b, *_ in edges if a != b])
    pos: dict[str, tuple[float, float]] = {}
    offset = 0.0
    for comp in g.C:
        sug = SugiyamaLayout(comp)
        sug.xspace, sug.yspace = GAP_X, GAP_Y
        roots = [v for v in comp.sV if v.data == "__start__"]
        sug.init_all(roots=roots or None)
        sug.draw()
        xs = [v.view.xy[0] for v in comp.sV]
        for v in comp.sV:
            pos[v.data] = (v.view.xy[0] - min(xs) + offset, v.view.xy[1])
        offset += max(xs) - min(xs) + NODE_W + GAP_X
    return pos


def topology_svg(text: str, *, highlight: set[str] | None = None) -> str:
    """An inline SVG of the Mermaid flowchart (no script, no network)."""
    nodes, edges = parse_mermaid(text)
    pos = layout(nodes, edges)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    pad = NODE_W / 2 + 40
    x0, y0 = min(xs) - pad, min(ys) - NODE_H
    width, height = max(xs) - min(xs) + 2 * pad, max(ys) - min(ys) + 2 * NODE_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="cs-topology" role="img" '
           f'viewBox="{x0:.0f} {y0:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}">',
           '<defs><marker id="cs-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
           '</marker></defs>']
    for a, b, conditional, label in edges:
        (ax, ay), (bx, by) = pos[a], pos[b]
        dash = ' stroke-dasharray="5,4"' if conditional else ""
        if by > ay:  # downwards: bottom of a to top of b
            d = f"M{ax:.1f},{ay + NODE_H / 2:.1f} L{bx:.1f},{by - NODE_H / 2:.1f}"
            mx, my = (ax + bx) / 2, (ay + by) / 2
        else:  # a loop back up: around the right side
            side = max(ax, bx) + NODE_W / 2 + 30
            d = (f"M{ax + NODE_W / 2:.1f},{ay:.1f} C{side:.1f},{ay:.1f} {side:.1f},{by:.1f} "
                 f"{bx + NODE_W / 2:.1f},{by:.1f}")
            mx, my = side, (ay + by) / 2
        out.append(f'<path d="{d}" fill="none" stroke="#555" stroke-width="1.4"{dash} '
                   f'marker-end="url(#cs-arrow)"><title>{html.escape(a)} → {html.escape(b)}</title></path>')
        if label:
            out.append(f'<text x="{mx:.1f}" y="{my:.1f}" font-size="11" fill="#333" '
                       f'text-anchor="middle">{html.escape(label)}</text>')
    for n in nodes:
        x, y = pos[n]
        terminal = n in ("__start__", "__end__")
        fill = "#bfb6fc" if n == "__end__" else ("#ffffff" if terminal else "#f2f0ff")
        if highlight and n in highlight:
            fill = "#ffe08a"
        rx = NODE_H / 2 if terminal else 6
        out.append(f'<g class="cs-node" data-node="{html.escape(n)}"><rect x="{x - NODE_W / 2:.1f}" '
                   f'y="{y - NODE_H / 2:.1f}" width="{NODE_W:.0f}" height="{NODE_H:.0f}" rx="{rx:.0f}" '
                   f'fill="{fill}" stroke="#6b5fd3"/><text x="{x:.1f}" y="{y + 4:.1f}" font-size="12" '
                   f'text-anchor="middle" font-family="sans-serif">{html.escape(n)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def write_png(graph: Any, path: str | Path, *, dpi: int = 120) -> Path:
    """Draw the topology to a PNG with matplotlib (offline); ``graph`` may be Mermaid text."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    except ImportError as exc:
        raise ConvsimError(f"writing a PNG needs matplotlib (not installed: {exc}); "
                           "use the Mermaid text or --ascii instead") from None
    text = graph if isinstance(graph, str) else mermaid_text(graph)
    nodes, edges = parse_mermaid(text)
    pos = layout(nodes, edges)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    fig_w = (max(xs) - min(xs) + 2 * NODE_W) / 100
    fig_h = (max(ys) - min(ys) + 3 * NODE_H) / 100
    fig, ax = plt.subplots(figsize=(max(fig_w, 3), max(fig_h, 2)))
    ax.set_xlim(min(xs) - NODE_W, max(xs) + 2 * NODE_W)  # room for loops drawn on the right
    ax.set_ylim(max(ys) + 1.5 * NODE_H, min(ys) - 1.5 * NODE_H)  # top to bottom
    ax.axis("off")
    for a, b, conditional, label in edges:
        (ax_, ay), (bx, by) = pos[a], pos[b]
        down = by > ay
        start = (ax_, ay + NODE_H / 2) if down else (ax_ + NODE_W / 2, ay)
        end = (bx, by - NODE_H / 2) if down else (bx + NODE_W / 2, by)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#555",
                                     linestyle="--" if conditional else "-",
                                     connectionstyle="arc3" if down else "arc3,rad=0.5"))
        if label:
            ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, label, fontsize=7, ha="center")
    for n in nodes:
        x, y = pos[n]
        ax.add_patch(FancyBboxPatch((x - NODE_W / 2, y - NODE_H / 2), NODE_W, NODE_H,
                                    boxstyle="round,pad=0,rounding_size=6", fc="#f2f0ff", ec="#6b5fd3"))
        ax.text(x, y, n, ha="center", va="center", fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path
