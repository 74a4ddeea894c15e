"""The topology SVG read back by its coordinates: START on top, END at the bottom, and no edge's
path crossing a node box other than its own two endpoints."""
import re

import pytest

from convsim import load_graph_module
from convsim.traces.drawing import mermaid_text, topology_svg

NODE = re.compile(r'data-node="([^"]+)"><rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)"')
EDGE = re.compile(r'data-from="([^"]+)" data-to="([^"]+)" d="M([^"]+)"')


def read_svg(svg: str):
    boxes = {n: (float(x), float(y), float(x) + float(w), float(y) + float(h)) for n, x, y, w, h in NODE.findall(svg)}
    edges = [(a, b, [tuple(map(float, p.split(","))) for p in d.split(" L")]) for a, b, d in EDGE.findall(svg)]
    return boxes, edges


def segment_hits_box(p, q, box, eps=0.5) -> bool:
    """Whether segment pq (axis-parallel or not) enters the box's interior (Liang-Barsky clip)."""
    x0, y0, x1, y1 = box[0] + eps, box[1] + eps, box[2] - eps, box[3] - eps
    t0, t1 = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for pk, qk in ((-dx, p[0] - x0), (dx, x1 - p[0]), (-dy, p[1] - y0), (dy, y1 - p[1])):
        if pk == 0:
            if qk < 0:
                return False
        else:
            t = qk / pk
            if pk < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
    return t0 < t1


def test_segment_check_detects_a_crossing():  # the checker itself must be able to fail
    box = (0, 0, 10, 10)
    assert segment_hits_box((-5, 5), (15, 5), box) and not segment_hits_box((-5, 12), (15, 12), box)


@pytest.mark.parametrize("graph", ["crs_shift", "customer_service", "hello_chat", "group_planning", "course_retrieval"])
def test_top_down_and_no_edge_behind_a_node(graph):
    module = load_graph_module(graph)
    svg = topology_svg(mermaid_text(module.build(module.Params())))
    boxes, edges = read_svg(svg)
    assert edges and len(boxes) >= 3
    top = min(b[1] for b in boxes.values())
    bottom = max(b[3] for b in boxes.values())
    assert boxes["__start__"][1] == top and boxes["__end__"][3] == bottom
    assert sum(1 for b in boxes.values() if b[1] == top) == 1 and sum(1 for b in boxes.values() if b[3] == bottom) == 1
    for a, b, pts in edges:
        for n, box in boxes.items():
            if n in (a, b):
                continue
            for p, q in zip(pts, pts[1:]):
                assert not segment_hits_box(p, q, box), f"{graph}: edge {a} -> {b} crosses {n}"


def test_a_loop_enters_its_target_not_the_end():
    module = load_graph_module("crs_shift")
    boxes, edges = read_svg(topology_svg(mermaid_text(module.build(module.Params()))))
    (pts,) = [p for a, b, p in edges if (a, b) == ("evaluate_turn", "user")]
    ux0, uy0, ux1, uy1 = boxes["user"]
    end = pts[-1]
    assert ux0 - 1 <= end[0] <= ux1 + 1 and uy0 - 1 <= end[1] <= uy1 + 1
    assert boxes["evaluate_dialogue"][1] > boxes["evaluate_turn"][1]  # the dialogue stage is below the turn loop


def test_nodes_whose_names_mermaid_escapes_keep_every_node_and_edge():
    """LangGraph writes "check answer" as check\\20answer; the id pattern dropped such nodes and
    every edge touching them (and a line starting with "end", as a node "endpoint" does)."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from convsim.traces.drawing import parse_mermaid

    class S(TypedDict, total=False):
        x: int

    names = ["plain", "check answer", "rank+filter", "a<b", "endpoint", "é☕"]
    g = StateGraph(S)
    for n in names:
        g.add_node(n, lambda s: {})
    g.add_edge(START, "plain")
    g.add_edge("plain", "check answer")
    g.add_conditional_edges("check answer", lambda s: "x", {"x": "rank+filter", "y": "a<b"})
    g.add_edge("a<b", "plain")
    g.add_edge("rank+filter", "endpoint")
    g.add_edge("endpoint", "é☕")
    g.add_edge("é☕", END)
    text = mermaid_text(g)
    assert "check\\20answer" in text and "a\\3cb" in text  # what LangGraph writes
    nodes, edges = parse_mermaid(text)
    assert sorted(nodes) == sorted(names + ["__start__", "__end__"])
    assert {(a, b, c, lab) for a, b, c, lab in edges} == {
        ("__start__", "plain", False, ""), ("plain", "check answer", False, ""),
        ("check answer", "rank+filter", True, "x"), ("check answer", "a<b", True, "y"),
        ("a<b", "plain", False, ""), ("rank+filter", "endpoint", False, ""), ("endpoint", "é☕", False, ""),
        ("é☕", "__end__", False, "")}
    svg = topology_svg(text)
    boxes = re.findall(r'<g class="cs-node" data-node="([^"]*)"', svg)
    assert sorted(boxes) == sorted(["plain", "check answer", "rank+filter", "a&lt;b", "endpoint", "é☕",
                                    "__start__", "__end__"])
    assert svg.count('class="cs-edge"') == 8 and "a<b" not in svg


def test_png_of_a_node_named_like_mathtext(tmp_path):
    """matplotlib read "$\\frac{a$" as a formula and raised."""
    from convsim.traces.drawing import write_png
    text = "graph TD;\n\t__start__([<p>__start__</p>]):::first\n\tn(n)\n\t__end__([<p>__end__</p>]):::last\n" \
           "\t__start__ -. &nbsp;$\\frac{a$&nbsp; .-> n;\n\tn --> __end__;\n"
    text = text.replace("\tn(n)", "\tn($\\frac{a$ b_c^d)")
    assert write_png(text, tmp_path / "t.png").stat().st_size > 0
