"""Draw a graph's topology offline: Mermaid text, ASCII, an SVG and a PNG.

LangGraph's ``draw_mermaid_png()`` calls the Mermaid web service by default; nothing here
touches the network. The SVG and the PNG are drawn from the ``draw_mermaid()`` text (so a
run can store the text and the report can draw it without importing the graph): the
flowchart is parsed, laid out top-down in longest-path layers from START (END alone at the bottom; edges that close a
cycle are drawn as loops in lanes beside the boxes, so no edge runs behind a node), and drawn as
SVG or with matplotlib. Conditional edges are dashed, as in Mermaid.
"""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from convsim.errors import ConvsimError

# a node id: LangGraph keeps [A-Za-z0-9_-] and writes every other character as a backslash and its
# lowercase hex code point ("check answer" -> check\20answer, "a<b" -> a\3cb)
_ID = r"(?:[\w.\-:]|\\[0-9a-fA-F]+)+"
_NODE = re.compile(rf"^\s*({_ID})\s*(\(\[|\(|\[|\{{)(.*?)(\]\)|\)|\]|\}})(:::\w+)?\s*;?\s*$")
_EDGE = re.compile(rf"^\s*({_ID})\s*(-->|-\.->|-\.\s*(.*?)\s*\.->|--\s*(.*?)\s*-->)\s*({_ID})\s*;?\s*$")
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{2})")
_TAG = re.compile(r"<[^>]+>")
NODE_W, NODE_H, GAP_X, GAP_Y = 150.0, 34.0, 30.0, 56.0


def mermaid_text(graph: Any) -> str:
    """Mermaid text of a compiled graph, a ``StateGraph`` or a LangChain drawable graph."""
    if hasattr(graph, "compile") and not hasattr(graph, "get_graph"):
        graph = graph.compile()
    if hasattr(graph, "get_graph"):
        graph = graph.get_graph()
    return graph.draw_mermaid()


def _safe_id(name: str) -> str:
    """LangGraph's Mermaid id of a node name (langchain_core's ``_to_safe_id``)."""
    return "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "_-" else "\\" + format(ord(ch), "x")
                   for ch in name)


def _node_name(node_id: str, label: str | None) -> str:
    """The node's name: its label when the label is what the id escapes (the escapes have no fixed
    width, so only the label says whether ``a\3cb`` is "a<b" or "aϋ"), else the id with each
    backslash and two hex digits decoded."""
    if "\\" not in node_id:
        return node_id
    if label is not None:
        for candidate in (label, html.unescape(label), _TAG.sub("", label.split("<hr")[0]).strip()):
            if _safe_id(candidate) == node_id:
                return candidate
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), node_id)


def parse_mermaid(text: str) -> tuple[list[str], list[tuple[str, str, bool, str]]]:
    """Nodes and edges ``(source, target, conditional, label)`` of a LangGraph Mermaid flowchart,
    by node name (an escaped id such as ``check\20answer`` read back as "check answer")."""
    ids: list[str] = []
    raw_edges: list[tuple[str, str, bool, str]] = []
    labels: dict[str, str] = {}
    body = text.split("---", 2)[-1] if text.lstrip().startswith("---") else text
    for line in body.splitlines():
        s = line.strip()
        if not s or s == "end" or s.startswith(("graph ", "flowchart ", "classDef", "subgraph ", "%%", "style ")):
            continue
        m = _EDGE.match(s)
        if m:
            src, arrow, dlabel, slabel, dst = m.groups()
            label = html.unescape(dlabel or slabel or "").replace("\xa0", " ").strip()
            raw_edges.append((src, dst, arrow.startswith("-."), label))
            for n in (src, dst):
                if n not in ids:
                    ids.append(n)
            continue
        m = _NODE.match(s)
        if m:
            if m.group(1) not in ids:
                ids.append(m.group(1))
            labels.setdefault(m.group(1), m.group(3).strip())
    if not ids:
        raise ConvsimError("no nodes found in the Mermaid text", field="mermaid")
    name = {i: _node_name(i, labels.get(i)) for i in ids}
    return [name[i] for i in ids], [(name[a], name[b], c, lab) for a, b, c, lab in raw_edges]


def _back_edges(nodes: list[str], edges: list[tuple]) -> set[tuple[str, str]]:
    """Edges that close a cycle, found by a depth-first search from ``__start__`` (then from any
    node not reached): those are drawn as loops, so the layering follows the forward flow."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b, *_ in edges:
        succ[a].append(b)
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    back: set[tuple[str, str]] = set()
    roots = (["__start__"] if "__start__" in succ else []) + nodes
    for root in roots:
        if root in state:
            continue
        stack = [(root, iter(succ[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    return back


def layers(nodes: list[str], edges: list[tuple]) -> dict[str, int]:
    """Longest-path layer of every node over the forward edges; ``__end__`` alone at the bottom."""
    back = _back_edges(nodes, edges)
    forward = [(a, b) for a, b, *_ in edges if a != b and (a, b) not in back]
    depth = {n: 0 for n in nodes}
    for _ in range(len(nodes)):
        changed = False
        for a, b in forward:
            if depth[b] < depth[a] + 1:
                depth[b], changed = depth[a] + 1, True
        if not changed:
            break
    if "__end__" in depth:
        others = [d for n, d in depth.items() if n != "__end__"]
        depth["__end__"] = max(others, default=-1) + 1
    return depth


def layout(nodes: list[str], edges: list[tuple]) -> dict[str, tuple[float, float]]:
    """Centre coordinates of every node: top-down layers from START to END, each layer ordered by
    the mean position of its predecessors (barycentre) so that edges cross little."""
    depth = layers(nodes, edges)
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(depth[n], []).append(n)
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b, *_ in edges:
        if depth[a] < depth[b]:
            preds[b].append(a)
    index: dict[str, float] = {}
    for d in sorted(rows):
        row = rows[d]
        if d:
            row.sort(key=lambda n: (sum(index[p] for p in preds[n]) / len(preds[n]) if preds[n]
                                    else float(len(row)), nodes.index(n)))
        for i, n in enumerate(row):
            index[n] = i - (len(row) - 1) / 2
    return {n: (index[n] * (NODE_W + GAP_X), depth[n] * (NODE_H + GAP_Y)) for n in nodes}


def edge_routes(nodes: list[str], edges: list[tuple], pos: dict[str, tuple[float, float]]
                ) -> list[list[tuple[float, float]]]:
    """A polyline per edge that never crosses a node box other than its two endpoints.

    An edge to the next layer is a straight line through the gap between the two layers (no box
    lies there). Any other edge (a loop back up, or a forward edge skipping layers) runs in its own
    vertical lane outside every box (loops on the left, skips on the right), reached from its
    endpoints through the gaps between layers, or straight from the side when the endpoint is the
    outermost node of its layer.
    """
    xs = [p[0] for p in pos.values()]
    left_edge, right_edge = min(xs) - NODE_W / 2, max(xs) + NODE_W / 2
    row_x: dict[float, list[float]] = {}
    for x, y in pos.values():
        row_x.setdefault(y, []).append(x)
    lane_l = lane_r = 0
    routes = []
    for i, (a, b, *_) in enumerate(edges):
        (ax, ay), (bx, by) = pos[a], pos[b]
        if a != b and abs((by - ay) - (NODE_H + GAP_Y)) < 1e-6:
            routes.append([(ax, ay + NODE_H / 2), (bx, by - NODE_H / 2)])
            continue
        loop = by <= ay
        if loop:
            lane_l += 1
            lane, side = left_edge - 16 * lane_l, -1
        else:
            lane_r += 1
            lane, side = right_edge + 16 * lane_r, 1
        # a small offset per edge keeps parallel lanes' horizontal runs apart
        off = 6 + (i % 4) * 5
        outermost = (min if side < 0 else max)
        # side ports are staggered a little so that edges meeting at one box stay apart
        stagger = ((lane_l if loop else lane_r) % 5 - 2) * 4.0
        pts: list[tuple[float, float]] = []
        if a == b and outermost(row_x[ay]) == ax:  # a self-loop on the outer side of its box
            routes.append([(ax + side * NODE_W / 2, ay - 8), (lane, ay - 8), (lane, ay + 8),
                           (ax + side * NODE_W / 2, ay + 8)])
            continue
        if outermost(row_x[ay]) == ax:
            pts += [(ax + side * NODE_W / 2, ay + stagger), (lane, ay + stagger)]
        else:
            pts += [(ax, ay + NODE_H / 2), (ax, ay + NODE_H / 2 + off), (lane, ay + NODE_H / 2 + off)]
        if outermost(row_x[by]) == bx:
            pts += [(lane, by + stagger), (bx + side * NODE_W / 2, by + stagger)]
        else:
            gy = by - NODE_H / 2 - off
            pts += [(lane, gy), (bx, gy), (bx, by - NODE_H / 2)]
        routes.append(pts)
    return routes


def _bounds(pos, routes) -> tuple[float, float, float, float]:
    xs = [p[0] for p in pos.values()] + [x for r in routes for x, _ in r]
    ys = [p[1] for p in pos.values()] + [y for r in routes for _, y in r]
    return (min(xs) - NODE_W / 2 - 12, min(ys) - NODE_H, max(xs) + NODE_W / 2 + 12, max(ys) + NODE_H)


def topology_svg(text: str, *, highlight: set[str] | None = None) -> str:
    """An inline SVG of the Mermaid flowchart (no script, no network), START at the top."""
    nodes, edges = parse_mermaid(text)
    pos = layout(nodes, edges)
    routes = edge_routes(nodes, edges, pos)
    x0, y0, x1, y1 = _bounds(pos, routes)
    width, height = x1 - x0, y1 - y0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="cs-topology" role="img" '
           f'viewBox="{x0:.0f} {y0:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}">',
           '<defs><marker id="cs-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
           '</marker></defs>']
    for (a, b, conditional, label), pts in zip(edges, routes):
        dash = ' stroke-dasharray="5,4"' if conditional else ""
        d = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<path class="cs-edge" data-from="{html.escape(a)}" data-to="{html.escape(b)}" d="{d}" '
                   f'fill="none" stroke="#555" stroke-width="1.4"{dash} marker-end="url(#cs-arrow)">'
                   f'<title>{html.escape(a)} → {html.escape(b)}</title></path>')
        if label:
            (mx, my) = pts[len(pts) // 2]
            out.append(f'<text x="{mx + 3:.1f}" y="{my - 3:.1f}" font-size="11" fill="#333">{html.escape(label)}</text>')
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
    x0, y0, x1, y1 = _bounds(pos, edge_routes(nodes, edges, pos))
    fig, ax = plt.subplots(figsize=(max((x1 - x0) / 100, 3), max((y1 - y0) / 100, 2)))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)  # top to bottom
    ax.axis("off")
    for (a, b, conditional, label), pts in zip(edges, edge_routes(nodes, edges, pos)):
        px, py = [p[0] for p in pts], [p[1] for p in pts]
        ax.plot(px[:-1], py[:-1], color="#555", linestyle="--" if conditional else "-", linewidth=1)
        ax.add_patch(FancyArrowPatch(pts[-2], pts[-1], arrowstyle="-|>", mutation_scale=12, color="#555",
                                     linestyle="--" if conditional else "-"))
        if label:
            mx, my = pts[len(pts) // 2]
            ax.text(mx, my, label, fontsize=7, ha="center", parse_math=False)
    for n in nodes:
        x, y = pos[n]
        ax.add_patch(FancyBboxPatch((x - NODE_W / 2, y - NODE_H / 2), NODE_W, NODE_H,
                                    boxstyle="round,pad=0,rounding_size=6", fc="#f2f0ff", ec="#6b5fd3"))
        ax.text(x, y, n, ha="center", va="center", fontsize=8, parse_math=False)  # "$" is a name
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    except OSError as exc:
        raise ConvsimError(f"cannot write the PNG: {exc.strerror or exc}", file=path, field="png") from None
    finally:
        plt.close(fig)
    return path
