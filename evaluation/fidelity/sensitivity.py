"""How much an agent's score depends on the simulated user.

A sensitivity run (``configs/service_sensitivity.yaml``) names its variants ``<simulator>__<agent>``:
the same agents against several simulators. From the run's ``summary.json`` (the per-variant means
the report shows), :func:`sensitivity` gives, per headline metric:

* per agent, its score under every simulator and the *spread* (max - min) across them;
* per pair of simulators, Kendall's tau-b (``scipy.stats.kendalltau``) between the agents' scores
  under the one and under the other: 1 = the same ranking, below 1 = the simulator reorders the
  agents (None when fewer than three agents have a score under both, or a ranking is all ties).

:func:`write_sensitivity` is the analysis hook: ``sensitivity.json`` and ``sensitivity.md``.
"""
from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from scipy.stats import kendalltau

from convsim import ConvsimError

SEP = "__"
HEADLINE = ("task_success", "task_completion", "joint_goal_accuracy", "domain_routing", "intent_accuracy",
            "policy_violations", "text_hallucination", "response_grounding", "db_grounding", "memory_transfer")


def split_variant(name: str) -> tuple[str, str] | None:
    sim, sep, agent = name.partition(SEP)
    return (sim, agent) if sep and sim and agent else None


def score_grid(summary: Mapping, metric: str) -> dict[str, dict[str, float]]:
    """``{simulator: {agent: mean}}`` of one metric (variants not named ``sim__agent`` are skipped;
    a metric without a finite mean is left out)."""
    grid: dict[str, dict[str, float]] = {}
    for name, entry in (summary.get("variants") or {}).items():
        parts = split_variant(name)
        mean = ((entry.get("metrics") or {}).get(metric) or {}).get("mean")
        if parts and mean is not None and math.isfinite(mean):
            grid.setdefault(parts[0], {})[parts[1]] = float(mean)
    return grid


def sensitivity(summary: Mapping, metrics: Sequence[str] = HEADLINE) -> list[dict]:
    """One entry per metric that some agent has under two or more simulators."""
    out = []
    for metric in metrics:
        grid = score_grid(summary, metric)
        sims = sorted(grid)
        agents = sorted({a for row in grid.values() for a in row})
        spread = {}
        for a in agents:
            values = {s: grid[s][a] for s in sims if a in grid[s]}
            if len(values) >= 2:
                spread[a] = {"scores": values, "spread": max(values.values()) - min(values.values())}
        if not spread:
            continue
        taus = []
        for s1, s2 in itertools.combinations(sims, 2):
            common = [a for a in agents if a in grid[s1] and a in grid[s2]]
            tau = None
            if len(common) >= 3:
                t = kendalltau([grid[s1][a] for a in common], [grid[s2][a] for a in common]).statistic
                tau = None if t is None or math.isnan(t) else float(t)
            taus.append({"a": s1, "b": s2, "agents": len(common), "kendall_tau": tau})
        out.append({"metric": metric, "simulators": sims, "agents": spread, "kendall": taus})
    return out


def markdown(rows: Sequence[dict]) -> str:
    lines = []
    for row in rows:
        sims = row["simulators"]
        lines += [f"### {row['metric']}", "", "| agent | " + " | ".join(sims) + " | spread |",
                  "|---|" + "---|" * (len(sims) + 1)]
        for agent, e in row["agents"].items():
            cells = [f"{e['scores'][s]:.3f}" if s in e["scores"] else "—" for s in sims]
            lines.append(f"| {agent} | " + " | ".join(cells) + f" | {e['spread']:.3f} |")
        taus = [f"{t['a']} vs {t['b']}: {'—' if t['kendall_tau'] is None else format(t['kendall_tau'], '.2f')}"
                for t in row["kendall"]]
        lines += ["", "Kendall tau of the agents' ranking: " + "; ".join(taus), ""]
    return "\n".join(lines) + "\n"


def write_sensitivity(run_dir: str | Path) -> list[dict]:
    """Analysis hook: sensitivity.json and sensitivity.md from the run's summary.json."""
    run_dir = Path(run_dir)
    path = run_dir / "summary.json"
    if not path.exists():
        raise ConvsimError("no summary.json (run the summary first)", file=run_dir)
    rows = sensitivity(json.loads(path.read_text(encoding="utf-8")))
    (run_dir / "sensitivity.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    text = markdown(rows)
    (run_dir / "sensitivity.md").write_text(text, encoding="utf-8")
    print("Sensitivity of the agents' scores to the simulated user")
    print(text)
    return rows
