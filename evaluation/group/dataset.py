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


def _pooled(records: list[dict], hits: str, total: str) -> float | None:
    """Σ hits / Σ total over the sessions' dialogue metrics; None when the total is 0."""
    h = t = 0
    for r in records:
        dm = r.get("dialogue_metrics") or {}
        if dm.get(total):
            h += dm[hits]
            t += dm[total]
    return h / t if t else None


def group_dataset_metrics(records: list[dict]) -> dict:
    """Pooled M10 over every stated pair of every session, M2's false-alarm rate pooled over
    every agreeing synthesised slot of every session (most sessions have none, so the mean of
    the per-session rates covers few sessions), the share of sessions whose worst-off member got
    0, options per slot and the semantic metrics' label."""
    zero = n = 0
    settings: dict = {}
    for r in records:
        dm = r.get("dialogue_metrics") or {}
        settings = r.get("metric_settings") or settings
        if dm.get("W2") is not None:
            n += 1
            zero += dm["W2"] == 0
    return {"M10_pooled_over_sessions": _pooled(records, "M10_satisfied_pairs", "M10_pairs"),
            "M2_false_alarm_pooled_over_sessions": _pooled(records, "M2_false_alarms", "M2_agreeing_slots"),
            "share_sessions_W2_zero": zero / n if n else None,
            **options_per_slot(records), "semantic_metrics": settings.get("semantic_label")}
