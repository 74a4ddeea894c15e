"""The trace viewer of report.html: a session's node steps with their state diffs, the links from
low turn metrics to the steps that produced their inputs, the topology, and fork comparisons.

Every function returns an HTML fragment (a string, all content escaped). ``VIEWER_HEAD`` holds
the CSS and the one small script (a node/turn filter) and goes once into the page's ``<head>``;
nothing is fetched from the network. The topology is an inline SVG drawn from the graph's
``draw_mermaid()`` text by :mod:`convsim.traces.drawing` (no Mermaid JS, no Mermaid web service).

Wiring into a report: ``report_fragments(run_dir)`` returns ``{"head", "topology", "fork",
"sessions": {(variant, session_id, trial): html}}``.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from convsim import ConvsimError, load_config, load_graph_module, read_trace
from convsim.textio import iter_jsonl
from convsim.traces.drawing import mermaid_text, topology_svg
from convsim.traces.tracing import dict_diff, explain_turn_metrics

VIEWER_HEAD = """<style>
.cs-trace{font:13px/1.35 system-ui,sans-serif;margin:.4em 0}
.cs-trace .cs-bar{margin:.3em 0}
.cs-step{border-left:3px solid #c9c3f5;margin:2px 0;padding:1px 6px}
.cs-step.cs-linked{border-left-color:#e0a100;background:#fff8e1}
.cs-step>summary{cursor:pointer}
.cs-step .cs-node{font-weight:600}
.cs-failure{color:#a00020;border-left:3px solid #a00020;padding-left:.5em}
.cs-step .cs-keys{color:#555}
.cs-diff{border-collapse:collapse;margin:3px 0 6px 0;font:12px monospace}
.cs-diff td,.cs-diff th{border:1px solid #ddd;padding:2px 5px;vertical-align:top;max-width:42em;
 white-space:pre-wrap;word-break:break-word}
.cs-before{background:#fdecec}.cs-after{background:#e9f7ec}
.cs-low{color:#9a4b00}
.cs-topology{max-width:100%;height:auto}
.cs-fork td.cs-differs{background:#fff3cd}
</style>
<script>
document.addEventListener("change", function (ev) {
  var el = ev.target;
  if (!el.classList || !el.classList.contains("cs-filter")) { return; }
  var root = el.closest(".cs-trace");
  var node = root.querySelector("select.cs-filter[data-by=node]").value;
  var turn = root.querySelector("select.cs-filter[data-by=turn]").value;
  root.querySelectorAll(".cs-step").forEach(function (s) {
    var ok = (!node || s.dataset.node === node) && (!turn || s.dataset.turn === turn);
    s.style.display = ok ? "" : "none";
  });
});
</script>"""

_MAX_CHARS = 600


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _listed(values: Any, none: str) -> str:
    """A fork's ``--model``/``--set`` list as text ("n_turns=2, seed=3"), ``none`` when empty."""
    if not values:
        return none
    return ", ".join(map(str, values)) if isinstance(values, (list, tuple)) else str(values)


def _value(value: Any, limit: int = _MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str, indent=1)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(text) - limit} more characters)"
    return _esc(text)


def _change_cells(change: Mapping) -> str:
    if "appended" in change:
        items = "\n".join(_value(x, _MAX_CHARS // 2) for x in change["appended"])
        return (f'<td class="cs-before">{change["before_len"]} item(s)</td>'
                f'<td class="cs-after">+ {len(change["appended"])} → {change["after_len"]}\n{items}</td>')
    before, after = change.get("before"), change.get("after")
    if before == after:
        return f'<td colspan="2">(written, unchanged) {_value(after, 200)}</td>'
    if isinstance(before, dict) and isinstance(after, dict):  # only the leaves that moved
        diffs = dict_diff(before, after)
        return (f'<td class="cs-before">{"<br>".join(f"{_esc(p)}: {_value(b, 200)}" for p, b, _ in diffs)}</td>'
                f'<td class="cs-after">{"<br>".join(f"{_esc(p)}: {_value(a, 200)}" for p, _, a in diffs)}</td>')
    return (f'<td class="cs-before">{_value(before)}</td>'
            f'<td class="cs-after">{_value(after)}</td>')


def _uid(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", "-".join(str(p) for p in parts))


def _sig3(x: Any) -> str:
    """A metric value to 3 significant digits (0.4852415358549975 -> 0.485); other values as they are."""
    if isinstance(x, float) and x == x and abs(x) not in (float("inf"),):
        return f"{float(f'{x:.3g}'):g}" if x else "0"
    return str(x)


def explanations_html(explanations: list[dict], uid: str, *, shown: int = 5) -> str:
    """The low turn metrics, each linked to the steps of its turn that wrote its inputs: a one-line
    count per metric, then the first ``shown`` flags (the rest behind a disclosure), so a metric
    that is low on most turns does not bury the timeline."""
    if not explanations:
        return ""
    counts: dict[str, int] = {}
    for ex in explanations:
        counts[ex["metric"]] = counts.get(ex["metric"], 0) + 1
    head = "; ".join(f"{_esc(m)} on {n} turn(s)" for m, n in counts.items())
    items = []
    for ex in explanations:
        links = ", ".join(f'<a href="#{uid}-step-{s["step"]}">step {s["step"]} {_esc(s["node"])}'
                          f'{(" (" + _esc(", ".join(s["keys"])) + ")") if s["keys"] else ""}</a>'
                          for s in ex["steps"]) or "no step of this turn wrote its inputs"
        carried = "".join(f'; {_esc(c["key"])} last written at <a href="#{uid}-step-{c["step"]}">step '
                          f'{c["step"]} {_esc(c["node"])}</a> (turn {_esc(c["turn"])})' for c in ex["carried"])
        inputs = f' from {_esc(", ".join(ex["inputs"]))}' if ex["inputs"] else ""
        items.append(f'<li class="cs-low">turn {_esc(ex["turn"])}: {_esc(ex["metric"])} = {_esc(_sig3(ex["value"]))} '
                     f'{"&lt;" if ex["direction"] == "below" else "&gt;"} {_esc(_sig3(ex["threshold"]))}{inputs}: '
                     f'{links}{carried}</li>')
    more = (f'<details><summary>{len(items) - shown} more</summary><ul>{"".join(items[shown:])}</ul></details>'
            if len(items) > shown else "")
    return (f'<div class="cs-explain"><b>Low turn metrics</b>: {head}<ul>{"".join(items[:shown])}</ul>'
            f'{more}</div>')


def trace_timeline_html(trace: Mapping, *, uid: str = "cs", explanations: list[dict] | None = None,
                        max_steps: int = 400) -> str:
    """A session's node steps (a ``<details>`` each, with a before/after table per changed key)."""
    steps = trace["steps"]
    linked = {s["step"] for ex in explanations or [] for s in ex["steps"]}
    linked |= {c["step"] for ex in explanations or [] for c in ex["carried"]}
    events: dict[int, list] = {}
    for ev in trace.get("events", []):
        events.setdefault(ev.get("step", 0), []).append(ev.get("event"))
    nodes = sorted({s["node"] for s in steps})
    turns = sorted({s.get("turn") for s in steps if s.get("turn") is not None})
    out = [f'<div class="cs-trace" id="{uid}">']
    fork = trace.get("fork")
    if fork:
        out.append(f'<p>forked from run {_esc(fork.get("run_id"))} at step {_esc(fork.get("step"))}; '
                   f'models {_esc(_listed(fork.get("models"), "same"))}, set {_esc(_listed(fork.get("set"), "nothing"))}</p>')
    out.append(explanations_html(explanations or [], uid))
    out.append('<div class="cs-bar">node <select class="cs-filter" data-by="node"><option value="">all</option>'
               + "".join(f'<option value="{_esc(n)}">{_esc(n)}</option>' for n in nodes)
               + '</select> turn <select class="cs-filter" data-by="turn"><option value="">all</option>'
               + "".join(f'<option value="{_esc(t)}">{_esc(t)}</option>' for t in turns)
               + f"</select> {len(steps)} steps</div>")
    for s in steps[:max_steps]:
        keys = ", ".join(s["changed"]) or "no change"
        calls = s.get("llm_calls") or []
        call_txt = f" · {len(calls)} LLM call(s)" if calls else ""
        rows = "".join(f"<tr><th>{_esc(k)}</th>{_change_cells(ch)}</tr>" for k, ch in s["changed"].items())
        evs = "".join(f'<tr><th>event</th><td colspan="2">{_value(e)}</td></tr>' for e in events.get(s["step"], []))
        cls = "cs-step cs-linked" if s["step"] in linked else "cs-step"
        out.append(f'<details class="{cls}" id="{uid}-step-{s["step"]}" data-node="{_esc(s["node"])}" '
                   f'data-turn="{_esc(s.get("turn"))}"><summary>step {s["step"]} · turn {_esc(s.get("turn"))} · '
                   f'<span class="cs-node">{_esc(s["node"])}</span> · <span class="cs-keys">{_esc(keys)}</span>'
                   f' · {1000 * (s.get("wall_s") or 0):.1f} ms{call_txt}</summary>'
                   + (f'<table class="cs-diff"><tr><th>key</th><th>before</th><th>after</th></tr>{rows}{evs}</table>'
                      if rows or evs else "") + "</details>")
    if len(steps) > max_steps:
        out.append(f"<p>{len(steps) - max_steps} more steps: <code>convsim trace</code> shows them all.</p>")
    failure = trace.get("failure")
    if failure:  # the exception that ended the session, after its last finished step
        calls = failure.get("llm_calls") or []
        failed = sum(1 for c in calls if not c.get("ok"))
        where = f"after step {_esc(failure['step'] - 1)}" if failure.get("step") else "before the first step"
        out.append(f'<p class="cs-failure"><strong>failed</strong> {where}'
                   + (f' in node <span class="cs-node">{_esc(failure["node"])}</span>' if failure.get("node") else "")
                   + (f" ({failed} of {len(calls)} model calls failed)" if calls else "")
                   + f": <code>{_esc(str(failure.get('error'))[:500])}</code></p>")
    out.append("</div>")
    return "".join(out)


def topology_html(mermaid: str) -> str:
    """The topology as an inline SVG, with the Mermaid text to copy."""
    return (f'<div class="cs-topology-box">{topology_svg(mermaid)}<details><summary>Mermaid</summary>'
            f"<pre>{_esc(mermaid)}</pre></details></div>")


def fork_comparison_html(comparison: Mapping) -> str:
    """The turn-by-turn comparison of a forked session with its original (``fork_comparison.json``)."""
    fork = comparison.get("fork") or {}
    head = (f'<p>Fork of {_esc(fork.get("run_id"))} · {_esc(fork.get("variant"))}/{_esc(fork.get("session_id"))} '
            f'from step {_esc(fork.get("step"))}; models {_esc(_listed(fork.get("models"), "same"))}, '
            f'set {_esc(_listed(fork.get("set"), "nothing"))}. ')
    if comparison.get("identical"):
        head += "The fork reproduces the original exactly.</p>"
    else:
        fd = comparison.get("first_divergent_step") or {}
        head += (f'First divergent turn: {_esc(comparison.get("first_divergent_turn"))}'
                 + (f', step {_esc(fd.get("step"))} (keys {_esc(", ".join(fd.get("differing_keys", [])))})'
                    if fd else "") + ".</p>")
    rows = []
    for r in comparison.get("turns", []):
        def side(utts):
            return "<br>".join(f"<b>{_esc(sp)}</b>: {_esc(tx)}" for sp, tx in utts)
        metrics = "; ".join(f'{_esc(k)}: {_esc(v["original"])} → {_esc(v["forked"])}'
                            if v["original"] != v["forked"] else f"{_esc(k)}: {_esc(v['original'])}"
                            for k, v in sorted(r["metrics"].items()))
        cls = "" if r["same_text"] and r["same_metrics"] else ' class="cs-differs"'
        rows.append(f"<tr><td>{_esc(r['turn'])}</td><td{cls}>{side(r['original'])}</td>"
                    f"<td{cls}>{side(r['forked'])}</td><td>{metrics}</td></tr>")
    dm = "; ".join(f'{_esc(k)}: {_esc(v["original"])} → {_esc(v["forked"])}'
                   for k, v in sorted(comparison.get("dialogue_metrics", {}).items()))
    return (f'<div class="cs-fork">{head}<table class="cs-diff"><tr><th>turn</th><th>original</th>'
            f"<th>fork</th><th>turn metrics</th></tr>{''.join(rows)}</table><p>dialogue metrics: {dm}</p></div>")


def _trace_file(run_dir: Path, variant: str, session_id: str, trial: int) -> Path | None:
    base = run_dir / "traces" / variant / f"{session_id}{f'__t{trial}' if trial else ''}.jsonl"
    for p in (base, base.with_name(base.name + ".gz")):
        if p.exists():
            return p
    return None


def run_topology_mermaid(run_dir: Path) -> str | None:
    """The run's graph as Mermaid text (cached in ``topology.mmd``); None when the graph cannot load."""
    cached = run_dir / "topology.mmd"
    if cached.exists():
        return cached.read_text(encoding="utf-8")
    try:
        cfg = load_config(run_dir / "config.yaml")
        module = load_graph_module(cfg.graph)
        text = mermaid_text(module.build(module.Params(**cfg.params)))
    except (ConvsimError, TypeError, ValueError):
        return None
    cached.write_text(text, encoding="utf-8")
    return text


def report_fragments(run_dir: str | Path, *, thresholds: Mapping | None = None,
                     max_sessions_per_variant: int = 20, max_steps: int = 400,
                     records: Iterable[Mapping] | None = None) -> dict:
    """Everything the report needs from the tracing side, as HTML fragments.

    ``records``: the sessions the page draws (default: results.jsonl, streamed); the state trace
    of the first ``max_sessions_per_variant`` of each variant that has one is rendered.

    ``thresholds`` defaults to the graph's ``METRIC_THRESHOLDS`` and the metric inputs to its
    ``METRIC_INPUTS`` (both optional module attributes, see docs/tracing.md).
    """
    run_dir = Path(run_dir)
    mermaid = run_topology_mermaid(run_dir)
    metric_inputs: dict = {}
    try:
        module = load_graph_module(load_config(run_dir / "config.yaml").graph)
        metric_inputs = dict(getattr(module, "METRIC_INPUTS", {}) or {})
        if thresholds is None:
            thresholds = dict(getattr(module, "METRIC_THRESHOLDS", {}) or {})
    except ConvsimError:
        pass
    sessions: dict[tuple, str] = {}
    per_variant: dict[str, int] = {}
    results = run_dir / "results.jsonl"
    if records is None:
        records = iter_jsonl(results) if results.exists() else []
    for rec in records:
        key = (str(rec.get("variant")), str(rec.get("session_id")), int(rec.get("trial", 0)))
        if per_variant.get(key[0], 0) >= max_sessions_per_variant:
            continue
        path = _trace_file(run_dir, *key)
        if path is None:
            continue
        per_variant[key[0]] = per_variant.get(key[0], 0) + 1
        trace = read_trace(path)
        explanations = explain_turn_metrics(trace, rec.get("turn_metrics") or [], thresholds or {},
                                            metric_inputs=metric_inputs)
        sessions[key] = trace_timeline_html(trace, uid=_uid("cs", *key), explanations=explanations,
                                            max_steps=max_steps)
    fork_path = run_dir / "fork_comparison.json"
    fork = fork_comparison_html(json.loads(fork_path.read_text(encoding="utf-8"))) if fork_path.exists() else ""
    return {"head": VIEWER_HEAD, "topology": topology_html(mermaid) if mermaid else "", "fork": fork,
            "sessions": sessions}
