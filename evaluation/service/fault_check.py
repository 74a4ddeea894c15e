"""Post-run check of a fault-injection run: is every injected fault caught by its metric?

Reads ``summary.json`` and ``config.yaml`` of a run of ``configs/service_faults.yaml``; for each
variant whose params set a ``fault`` it compares the fault's metric with the clean variant of the
same supervisor setting and writes ``fault_check.md`` / ``fault_check.json`` (one table), and
prints the table. A fault counts as *caught* when its metric moves the stated way:

* ``book_missing_slots``: unsupervised, ``policy_violation_rate`` > 0; supervised, the supervisor
  claims to block such bookings, so ``policy_violation_rate`` = 0 and ``supervisor_corrections`` > 0;
* ``ungrounded_action``: ``db_grounding_proposed_micro`` < 1 (the proposal is checked before the
  supervisor); supervised, the executed action is grounded again (``db_grounding_micro`` = 1) and
  ``supervisor_corrections`` > 0;
* ``invent_entity``: ``text_hallucination_micro`` > 0 (the supervisor runs before the response
  writer and claims nothing here);
* ``forget_area``: ``memory_transfer_macro`` < 1;
* ``misroute``: ``domain_routing`` (macro mean) < 1;
* ``never_book`` (gaming reference: "no availability" for every booking it could make):
  ``system_correctness`` (macro mean) < 1; its opportunities are the clean variant's bookings;
* ``silent_actions`` (the gaming reference: right actions, a reply that states none of them):
  ``response_grounding_micro`` < 1 (and ``task_success_rate`` falls with it: a booking whose
  reference number never reached the customer is no success).

A verdict needs opportunities: a fault can only be seen where it could fire and its metric could
see it (``OPPORTUNITIES``: booking requests the policy blocked, proposed mentions, text
mentions, memory-transfer opportunities, routed turns, checked response acts, counted in the
faulty variant). With fewer
than ``min_opportunities`` (default ``MIN_OPPORTUNITIES`` = 5) the verdict is *not enough
opportunities* (``caught`` None), neither caught nor missed: before, memory_transfer was marked
caught on 1 opportunity in 30 sessions.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

RULES = {  # fault -> (metric, source, test on faulty, test on clean)
    "book_missing_slots": ("policy_violation_rate", "dataset", lambda v: v is not None and v > 0),
    "ungrounded_action": ("db_grounding_proposed_micro", "dataset", lambda v: v is not None and v < 1),
    "invent_entity": ("text_hallucination_micro", "dataset", lambda v: v is not None and v > 0),
    "forget_area": ("memory_transfer_macro", "dataset", lambda v: v is not None and v < 1),
    "misroute": ("domain_routing", "metrics", lambda v: v is not None and v < 1),
    "silent_actions": ("response_grounding_micro", "dataset", lambda v: v is not None and v < 1),
    # the never-booking gaming reference: each refusal of an available venue is a wrong action
    "never_book": ("system_correctness", "metrics", lambda v: v is not None and v < 1),
}
# fault -> the dataset count of its opportunities (unsupervised / supervised); None: no minimum
OPPORTUNITIES = {
    "book_missing_slots": ("bookings_blocked", "bookings_blocked"),
    "ungrounded_action": ("db_mentions_proposed", "db_mentions_proposed"),
    "invent_entity": ("text_mentions", "text_mentions"),
    "forget_area": ("memory_transfer_opportunities", "memory_transfer_opportunities"),
    "misroute": ("domain_routing_micro_n_turns", "domain_routing_micro_n_turns"),
    "silent_actions": ("response_acts_checked", "response_acts_checked"),
    "never_book": ("bookings_made", "bookings_made"),  # the clean variant's bookings (see fault_rows)
}
MIN_OPPORTUNITIES = 5
SUPERVISED = {  # what an enabled supervisor claims to catch: metric after it, and its corrections
    "book_missing_slots": ("policy_violation_rate", lambda v: v == 0),
    "ungrounded_action": ("db_grounding_micro", lambda v: v == 1),
}


def _value(variant: dict, metric: str, source: str):
    if source == "dataset":
        return variant.get("dataset", {}).get(metric)
    return (variant.get("metrics", {}).get(metric) or {}).get("mean")


def fault_rows(summary: dict, variant_params: dict[str, dict],
               min_opportunities: int = MIN_OPPORTUNITIES) -> list[dict]:
    """One row per fault variant: its metric, the clean value, its opportunities, and the verdict
    (``caught`` True / False, or None with verdict "not enough opportunities")."""
    variants = summary["variants"]
    clean = {p.get("supervisor", True): name for name, p in variant_params.items()
             if p.get("fault", "none") == "none" and name in variants}
    rows = []
    for name, params in variant_params.items():
        fault = params.get("fault", "none")
        if fault == "none" or name not in variants:
            continue
        supervised = params.get("supervisor", True)
        v = variants[name]
        base = variants.get(clean.get(supervised) or clean.get(True) or "", {})
        if fault in SUPERVISED and supervised:
            metric, test = SUPERVISED[fault]
            corrections = v.get("dataset", {}).get("supervisor_corrections", 0)
            value = v.get("dataset", {}).get(metric)
            caught = bool(test(value) and corrections > 0)
            expect = f"{metric} restored and supervisor_corrections > 0 (got {corrections})"
            if fault == "ungrounded_action":  # the proposal itself must still show the fault
                proposed = v.get("dataset", {}).get("db_grounding_proposed_micro")
                caught = caught and RULES[fault][2](proposed)
                expect += f"; proposed grounding {_fmt(proposed)}"
        else:
            metric, source, test = RULES[fault]
            value = _value(v, metric, source)
            caught = bool(test(value))
            expect = {"policy_violation_rate": "> 0", "text_hallucination_micro": "> 0"}.get(metric, "< 1")
        key = OPPORTUNITIES.get(fault, (None, None))[1 if supervised else 0]
        # never_book makes no booking by design: its opportunities are the bookings the clean agent made
        opportunities = (base if fault == "never_book" else v).get("dataset", {}).get(key) if key else None
        if key and opportunities is None:  # a summary without the count cannot tell
            caught, verdict = None, f"not enough opportunities ({key} not counted)"
        elif key and opportunities < min_opportunities:
            caught, verdict = None, f"not enough opportunities ({opportunities} < {min_opportunities})"
        else:
            verdict = "caught" if caught else "missed"
        rows.append({"variant": name, "fault": fault, "supervisor": supervised,
                     "fault_rate": params.get("fault_rate", 1.0), "metric": metric,
                     "clean": _value(base, metric, "dataset" if metric.endswith(("_rate", "_micro", "_macro"))
                                     else "metrics"),
                     "faulty": value, "expected": expect, "caught": caught, "verdict": verdict,
                     "opportunities": opportunities, "opportunity_key": key, "n": v.get("n")})
    return rows


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def markdown(rows: list[dict]) -> str:
    lines = ["| variant | fault | supervisor | metric | clean | faulty | expected | opportunities | caught |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = r.get("verdict") or ("caught" if r["caught"] else "missed")
        shown = {"caught": "yes", "missed": "NO"}.get(verdict, verdict)
        opp = "—" if not r.get("opportunity_key") else f"{_fmt(r.get('opportunities'))} {r['opportunity_key']}"
        lines.append(f"| {r['variant']} | {r['fault']} (rate {r['fault_rate']}) | {'on' if r['supervisor'] else 'off'} "
                     f"| {r['metric']} | {_fmt(r['clean'])} | {_fmt(r['faulty'])} | {r['expected']} "
                     f"| {opp} | {shown} |")
    return "\n".join(lines) + "\n"


def write_fault_check(run_dir: Path, min_opportunities: int = MIN_OPPORTUNITIES) -> list[dict]:
    """Analysis hook: writes fault_check.md/json into the run directory and prints the table."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    base = cfg.get("params") or {}
    params = {v["name"]: {**base, **(v.get("params") or {})} for v in cfg.get("variants") or []}
    rows = fault_rows(summary, params, min_opportunities)
    if not rows:
        return rows
    (run_dir / "fault_check.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    text = markdown(rows)
    (run_dir / "fault_check.md").write_text(text, encoding="utf-8")
    print("Fault injection: each fault against its metric (clean = same supervisor setting)")
    print(text)
    return rows
