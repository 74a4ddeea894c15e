"""Dataset-level figures of one group-planning condition (the graph's ``dataset_metrics``).

Beside the welfare figures the summary shows how many options the condition's decisions hold per
actionable (sub)slot: the planner spreads the chosen options over meals and attraction slots and
M10 counts a member satisfied when any planned place of the slot matches, so a condition with more
options satisfies more members by count alone. ``semantic_metrics`` says whether M8's semantic
channel, M10's semantic channel, M12, M14 and M15 are sentence-transformer cosines or, with
TF-IDF, lexical approximations.
"""

from __future__ import annotations

OPTION_SLOTS = ("cuisine", "attraction", "event", "room_type")


def options_per_slot(records: list[dict]) -> dict:
    """Mean number of options the decisions of a condition hold per actionable (sub)slot."""
    per: dict[str, list[int]] = {}
    for r in records:
        for subs in (r.get("decisions") or {}).values():
            for sub, d in subs.items():
                if sub in OPTION_SLOTS:
                    per.setdefault(sub, []).append(len(d.get("selected") or []))
    out = {f"options_{k}": sum(v) / len(v) for k, v in per.items()}
    vals = [x for v in per.values() for x in v]
    out["options_mean_actionable"] = sum(vals) / len(vals) if vals else None
    return out


def group_dataset_metrics(records: list[dict]) -> dict:
    """Pooled M10 over every stated pair of every session, the share of sessions whose worst-off
    member got 0, options per slot and the semantic metrics' label."""
    sat = tot = zero = n = 0
    settings: dict = {}
    for r in records:
        dm = r.get("dialogue_metrics") or {}
        settings = r.get("metric_settings") or settings
        if dm.get("M10_pairs"):
            sat += dm["M10_satisfied_pairs"]
            tot += dm["M10_pairs"]
        if dm.get("W2") is not None:
            n += 1
            zero += dm["W2"] == 0
    return {"M10_pooled_over_sessions": sat / tot if tot else None,
            "share_sessions_W2_zero": zero / n if n else None,
            **options_per_slot(records), "semantic_metrics": settings.get("semantic_label")}
