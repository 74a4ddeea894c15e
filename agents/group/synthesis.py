"""Preference synthesis for one slot: passive merge (C1/C2), raw (C3) and guided (C4/C5).

- ``passive``: no system turn; the constraint state keeps the latest statement per slot (a
  state tracker that overwrites, as a passive aggregator does). C1 has one speaker, so this is the
  spokesperson's wish.
- ``raw``: conflict detection plus a plain-language decision by plurality (ties: stronger total
  polarity, then lexicographic); no strategy names and no subgroups (theory lexicon stripped).
- ``guided``: the canonical strategy of ``agents.group.strategies`` (clamped: the decision's
  ``resolution_strategy`` is always the canonical id) in the reference's text contract
  "Conflict: … / Strategy: <id>. / Decision: … / Reason: … / Next step: …".

With a model (``ChatModel`` not none) the model rewrites the turn's text from
``prompts/group_synthesis_raw.txt`` / ``group_synthesis_guided.txt``; the decision stays the rules'
(so the plan is reproducible); a failed call keeps the template text and is recorded.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from agents.group.strategies import apply_strategy, describe_options, detect_conflict
from agents.group.vote import option_label, score_options

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
_SLOT_WORDS = {"traveler_type": "travel style", "travel_purpose": "trip purpose",
               "spending_preference": "budget", "cuisine": "food", "attraction": "sightseeing",
               "event": "events", "lodging": "lodging"}


def stated_preferences(turns: list[dict], members: list[dict], slot: str) -> dict[str, list[dict]]:
    """``{sub_slot: [{"member", "role", "text", "option", "reject"}]}`` from ``user_provide`` turns."""
    roles = {m["name"]: m["role"] for m in members}
    rows: dict[str, list[dict]] = {}
    for t in turns:
        meta = t["meta"]
        base = {"member": t["speaker"], "role": roles.get(t["speaker"], "member"), "text": t["text"],
                "reject": meta.get("preference_reject")}
        if slot == "lodging":
            rows.setdefault("room_type", []).append({**base, "option": meta["preference_option"]})
            rows.setdefault("house_rule", []).append({**base, "option": meta["house_rule"], "reject": None})
        else:
            rows.setdefault(slot, []).append({**base, "option": meta["preference_option"]})
    return rows


def _plurality(stated: list[dict]) -> str:
    counts = Counter(s["option"] for s in stated)
    scores = score_options({s["member"]: s["text"] for s in stated}, sorted(counts))
    return min(counts, key=lambda o: (-counts[o], -sum(scores[o].values()), o))


def _base(sub: str, stated: list[dict], source: str) -> dict:
    return {"sub_slot": sub, "source": source, "has_conflict": detect_conflict(stated),
            "strategy_id": "N/A", "operator": "N/A", "resolution_strategy": "N/A",
            "vote_summary": None, "coverage_commitment": None, "subgroup_assignment": None,
            "subgrouping_required": False, "subgrouping_optional": False, "alternate": False}


def decide(slot: str, group_type: str, stated: dict[str, list[dict]], mode: str) -> dict:
    """The decision for one slot: ``{sub_slot: decision}`` (lodging has room_type + house_rule)."""
    out = {}
    for sub, rows in stated.items():
        if mode == "guided":
            d = {**_base(sub, rows, "guided"), **apply_strategy(sub, group_type, rows)}
            if sub == "house_rule":
                # every house-rule strategy is a hard constraint: all stated requirements must hold
                d["selected"] = sorted({r["option"] for r in rows})
        elif mode == "raw":
            d = _base(sub, rows, "raw_synthesis")
            d["selected"] = [_plurality(rows)]
        else:   # passive: the latest statement overwrites the slot
            d = _base(sub, rows, "constraint_state")
            d["selected"] = [rows[-1]["option"]]
        d["primary"] = d["selected"][0]
        out[sub] = d
    return out


def _conflict_line(rows: list[dict]) -> str:
    wants = [f"{r['member']} wants {option_label(r['option'])}" for r in rows]
    rejects = [f"{r['member']} rules out {r['reject']}" for r in rows if r.get("reject")]
    return "; ".join(wants + rejects)


def synthesis_text(slot: str, decision: dict, stated: dict[str, list[dict]], mode: str) -> tuple[str, str]:
    """``(utterance, resolution_explanation)`` of the system's synthesis turn (templates)."""
    parts, reasons = [], []
    for sub, d in decision.items():
        rows = stated[sub]
        chosen = describe_options(d["selected"]).replace("_", " ")
        if not d["has_conflict"]:
            parts.append(f"Everyone agrees on {chosen} for {sub.replace('_', ' ')}, so that is settled.")
            reasons.append(f"All of you asked for {chosen}.")
            continue
        if mode == "raw":
            parts.append(f"I hear different wishes for {sub.replace('_', ' ')}: {_conflict_line(rows)}. "
                         f"Most of you lean towards {chosen}, so I suggest {chosen} as a compromise.")
            reasons.append(f"{chosen} has the most support among you.")
            continue
        reason = d["explanation_style"]
        branch = ""
        if d.get("subgroup_assignment"):
            g = d["subgroup_assignment"]["groups"]
            branch = " Branches: " + "; ".join(f"{', '.join(ms)} go for {option_label(o)}"
                                                for o, ms in g.items()) + "."
        commit = f" {d['coverage_commitment']['commitment']}" if d.get("coverage_commitment") else ""
        parts.append(f"Conflict: {_conflict_line(rows)}. / Strategy: {d['strategy_id']}. / "
                     f"Decision: {chosen}.{branch} / Reason: {reason}.{commit} / "
                     f"Next step: moving on once you are happy with {chosen}.")
        reasons.append(f"{chosen}: {reason}.{commit}")
    return " ".join(parts), " ".join(reasons)


def llm_synthesis_text(model, slot: str, stated: dict[str, list[dict]], decision: dict,
                       template_text: str, mode: str) -> tuple[str, dict | None]:
    """Let the model word the synthesis turn; returns (text, failure record or None)."""
    name = "group_synthesis_guided.txt" if mode == "guided" else "group_synthesis_raw.txt"
    prompt = (PROMPTS / name).read_text(encoding="utf-8").format(
        slot=_SLOT_WORDS.get(slot, slot),
        preferences="\n".join(f"- {r['member']}: {r['text']}" for rows in stated.values() for r in rows),
        decision=template_text)
    try:
        text = model.invoke([("system", "You mediate a group travel planning chat."), ("user", prompt)],
                            purpose=f"synthesize_{slot}").strip()
    except Exception as exc:   # infrastructure errors are the engine's to retry; record and go on
        return template_text, {"slot": slot, "error": repr(exc), "raw": None}
    if len(text.split()) < 6:
        return template_text, {"slot": slot, "error": "answer shorter than 6 words", "raw": text}
    return text, None

