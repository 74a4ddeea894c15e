"""Group travel planning metrics M1–M7 (dialogue only), welfare W1–W3 and the Gini coefficient.

The group travel planning metric definitions, with the ambiguities resolved as
``reference/group_and_retrieval.md`` §1b suggests (see docs/group_planning.md). Inputs are plain
data: ``turns`` = ``[{"speaker", "intent", "utterance", "meta": {...}}]`` and ``flags`` =
``{"multi_user", "enable_synthesis", "use_social_theory", "enable_feedback", "member_count"}``.
Each function returns ``None`` when the metric does not apply (never a silent 0 or NaN), except
where the spec fixes a 0.0 for a disabled condition (M4, M5), as noted.
The plan-dependent metrics M8–M16 are in ``convsim.evaluation.group.plan_metrics``.
"""

from __future__ import annotations

import math
import re

from convsim.evaluation.group.plan_parse import ACTIONABLE_SLOTS, intent_slot, stated_preferences
from convsim.evaluation.group.text import informative_tokens, tokenize

CONFLICT_WORDS = ("conflict", "different", "compromise")
THEORY_PHRASES = re.compile(
    r"parental authority|elder stamina|subgroup|generational balance|least misery|social choice|"
    r"log.?roll|approval vot|utilitarian|egalitarian|rawls|nash welfare|borda|weighted average|"
    r"hard constraint|veto", re.I)


def _synthesis_turns(turns: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for t in turns:
        if t["intent"].startswith("sys_synthesize_"):
            out.setdefault(intent_slot(t["intent"]), []).append(t)
    return out


def voice_coverage(turns: list[dict], *, member_count: int, multi_user: bool) -> float | None:
    """M1 = distinct speakers of ``user_provide_*`` turns / member_count (C1: 1 / member_count).

    M1. None when member_count < 1.
    """
    if member_count < 1:
        return None
    if not multi_user:
        return 1 / member_count
    speakers = {t["speaker"] for t in turns if t["intent"].startswith("user_provide_")}
    return min(len(speakers), member_count) / member_count


def _stated_labels(turns: list[dict]) -> dict[str, dict[str, set]]:
    """``{slot: {speaker: what they stated}}`` from the ``user_provide_*`` turns: the stated
    option in ``meta.preference_option`` (lodging: with ``meta.house_rule``, the two sub-slots
    the synthesis decides) when every turn of the slot has one, else (CSV from elsewhere) the
    informative tokens of the utterances."""
    rows: dict[str, list[tuple[str, object, frozenset]]] = {}
    for t in turns:
        if t["intent"].startswith("user_provide_"):
            meta = t.get("meta") or {}
            opt = meta.get("preference_option")
            if opt is not None and meta.get("house_rule") is not None:
                opt = (opt, meta["house_rule"])
            rows.setdefault(intent_slot(t["intent"]), []).append(
                (t["speaker"], opt, frozenset(informative_tokens(t["utterance"], k=50))))
    out: dict[str, dict[str, set]] = {}
    for slot, rs in rows.items():
        use_option = all(opt is not None for _, opt, _ in rs)
        per_speaker = out.setdefault(slot, {})
        for speaker, opt, toks in rs:
            per_speaker.setdefault(speaker, set()).update({str(opt)} if use_option else toks)
    return out


def divergent_slots(turns: list[dict]) -> set[str]:
    """Slots where members stated different preferences (``_stated_labels``; lodging diverges on
    the room type or the house rule)."""
    return {slot for slot, per in _stated_labels(turns).items()
            if len({frozenset(v) for v in per.values()}) > 1}


def agreeing_slots(turns: list[dict]) -> set[str]:
    """Slots where at least two members stated preferences and all stated the same."""
    return {slot for slot, per in _stated_labels(turns).items()
            if len(per) > 1 and len({frozenset(v) for v in per.values()}) == 1}


def _reported(t: dict, key: str):
    """The synthesis's own report of ``key`` (meta), or the sentinel ``_ABSENT`` when the turn
    carries no such field (a CSV written elsewhere): only then do the lexical fallbacks apply."""
    meta = t.get("meta") or {}
    return meta[key] if key in meta else _ABSENT


_ABSENT = object()
STRATEGY_LINE = re.compile(r"strategy:\s*([^/\n.]+)", re.I)


def _reports_conflict(t: dict) -> bool:
    """The synthesis turn's own ``meta.has_conflict``; only a turn without that field (CSV from
    elsewhere) counts by its text ("conflict", "different", "compromise")."""
    flag = _reported(t, "has_conflict")
    if flag is not _ABSENT:
        return bool(flag)
    return any(w in t["utterance"].lower() for w in CONFLICT_WORDS)


def _reported_conflict_slots(turns: list[dict]) -> set[str]:
    return {slot for slot, ts in _synthesis_turns(turns).items() if any(_reports_conflict(t) for t in ts)}


def conflict_detection_rate(turns: list[dict]) -> float | None:
    """M2 = detected / divergent slots; detected = a synthesis turn of the slot reports
    ``meta.has_conflict`` true; only when the turn has no ``has_conflict`` field at all does the
    text count ("conflict", "different", "compromise"). The system's own report decides, so a
    synthesis that misses a conflict scores lower even if its template says "different".
    M2 is recall only: a synthesis that reports a conflict on every slot scores 1.0
    (``conflict_false_alarms`` is its other side).
    None without synthesis turns (C1/C2) or without divergent slots.
    """
    divergent = divergent_slots(turns)
    if not _synthesis_turns(turns) or not divergent:
        return None
    return len(divergent & _reported_conflict_slots(turns)) / len(divergent)


def conflict_false_alarms(turns: list[dict]) -> dict:
    """M2's false-alarm side: ``M2_false_alarm`` = agreeing synthesis slots whose synthesis turn
    reports a conflict (as M2 reads the report) / agreeing synthesis slots, where agreeing = at
    least two members stated preferences and all stated the same (``agreeing_slots``). None
    without synthesis turns or without an agreeing synthesised slot. Also the counts
    ``M2_agreeing_slots`` and ``M2_false_alarms`` (None without synthesis), so the rate can be
    pooled over sessions (few sessions have an agreeing slot)."""
    synth = _synthesis_turns(turns)
    if not synth:
        return {"M2_false_alarm": None, "M2_agreeing_slots": None, "M2_false_alarms": None}
    agreeing = agreeing_slots(turns) & set(synth)
    alarms = len(agreeing & _reported_conflict_slots(turns))
    return {"M2_false_alarm": alarms / len(agreeing) if agreeing else None,
            "M2_agreeing_slots": len(agreeing), "M2_false_alarms": alarms}


def resolution_explanation_rate(turns: list[dict]) -> float | None:
    """M3 = explained / synthesis slots; explained = the turn's own ``resolution_explanation`` has
    >= 3 tokens; a turn without that field (CSV from elsewhere) counts when its text has >= 6
    tokens. None without synthesis turns."""
    synth = _synthesis_turns(turns)
    if not synth:
        return None

    def explained(t):
        own = _reported(t, "resolution_explanation")
        return len(tokenize(own or "")) >= 3 if own is not _ABSENT else len(tokenize(t["utterance"])) >= 6
    explained = sum(any(explained(t) for t in ts) for ts in synth.values())
    return explained / len(synth)


def theory_strategy_usage_rate(turns: list[dict], *, use_social_theory: bool) -> float | None:
    """M4 = actionable synthesis slots whose ``resolution_strategy`` is a real strategy (not
    "", "N/A") / actionable synthesis slots (lodging, cuisine, event, attraction; lodging's
    room_type and house_rule count as one slot). M4: 0.0 when social theory is off
    (C1–C3), as the spec fixes; None when theory is on but no actionable slot was synthesised."""
    if not use_social_theory:
        return 0.0
    synth = {s: ts for s, ts in _synthesis_turns(turns).items() if s in ACTIONABLE_SLOTS}
    if not synth:
        return None
    def strategy(t):
        own = _reported(t, "resolution_strategy")
        if own is _ABSENT:   # no metadata: a "Strategy: …" line of the text names one
            m = STRATEGY_LINE.search(t["utterance"])
            own = m.group(1) if m else ""
        return str(own or "").strip().upper() not in ("", "N/A", "NONE")
    used = sum(any(strategy(t) for t in ts) for ts in synth.values())
    return used / len(synth)


def theory_text_leakage_rate(turns: list[dict]) -> float | None:
    """M4b = candidate turns (sys_synthesize_*, sys_feedback_*, sys_present_plan) containing a
    theory phrase / candidate turns. M4b. None without candidate turns."""
    cands = [t for t in turns if t["intent"].startswith(("sys_synthesize_", "sys_feedback_"))
             or t["intent"] == "sys_present_plan"]
    if not cands:
        return None
    return sum(bool(THEORY_PHRASES.search(t["utterance"])) for t in cands) / len(cands)


def feedback_activation_rate(turns: list[dict], *, enable_feedback: bool) -> float | None:
    """M5 = conflict slots (synthesis ``has_conflict``) with any user_feedback_/sys_feedback_
    turn / conflict slots. M5: 0.0 when feedback is off (C1–C4), as the spec fixes;
    None when feedback is on but no slot was flagged."""
    if not enable_feedback:
        return 0.0
    conflict = {s for s, ts in _synthesis_turns(turns).items()
                if any((t.get("meta") or {}).get("has_conflict") for t in ts)}
    if not conflict:
        return None
    fed = {intent_slot(t["intent"]) for t in turns if t["intent"].startswith(("user_feedback_", "sys_feedback_"))}
    return len(conflict & fed) / len(conflict)


def member_acceptance_rate(turns: list[dict]) -> float | None:
    """M6 = speakers with a ``user_accept_plan`` / ``user_approve_approach`` turn / speakers who
    gave preferences. M6. None when nobody gave preferences."""
    speakers = {t["speaker"] for t in turns if t["intent"].startswith("user_provide_")}
    if not speakers:
        return None
    accepted = {t["speaker"] for t in turns if t["intent"] in ("user_accept_plan", "user_approve_approach")}
    return len(speakers & accepted) / len(speakers)


def dialogue_efficiency(turns: list[dict]) -> dict:
    """M7 = {total_turns, turns_per_slot = total / slots discussed, feedback_turn_overhead =
    feedback turns / total}. M7. Values None when there are no turns / slots."""
    slots = {intent_slot(t["intent"]) for t in turns} - {None}
    total = len(turns)
    fb = sum(t["intent"].startswith(("user_feedback_", "sys_feedback_")) for t in turns)
    return {"total_turns": total, "turns_per_slot": total / len(slots) if slots else None,
            "feedback_turn_overhead": fb / total if total else None}


def welfare(rates: dict[str, float]) -> dict:
    """W1 = mean s_i, W2 = min s_i, W3 = (prod s_i)^(1/N) over per-member satisfaction rates.

    W1–W3. W3 is the raw geometric mean (0 when any s_i = 0) and ``W3_zero_members``
    counts the members with s_i = 0 (reference ambiguity 2). All None without members.
    """
    vals = list(rates.values())
    if not vals:
        return {"W1": None, "W2": None, "W3": None, "W3_zero_members": None}
    w3 = 0.0 if min(vals) <= 0 else math.exp(sum(math.log(v) for v in vals) / len(vals))
    return {"W1": sum(vals) / len(vals), "W2": min(vals), "W3": w3,
            "W3_zero_members": sum(v <= 0 for v in vals)}


def gini(values: list[float]) -> float | None:
    """Gini = sum_i sum_j |x_i - x_j| / (2 n^2 mu). M13. None when n = 0 or mu = 0."""
    n = len(values)
    if n == 0:
        return None
    mu = sum(values) / n
    if mu == 0:
        return None
    return sum(abs(a - b) for a in values for b in values) / (2 * n * n * mu)


def dialogue_only_metrics(turns: list[dict], flags: dict) -> dict:
    """M1–M7 as one flat dict (M7's parts as ``M7_total_turns`` etc.)."""
    m7 = dialogue_efficiency(turns)
    return {"M1": voice_coverage(turns, member_count=int(flags.get("member_count") or 0),
                                 multi_user=bool(flags.get("multi_user", True))),
            "M2": conflict_detection_rate(turns), **conflict_false_alarms(turns),
            "M3": resolution_explanation_rate(turns),
            "M4": theory_strategy_usage_rate(turns, use_social_theory=bool(flags.get("use_social_theory"))),
            "M4b": theory_text_leakage_rate(turns),
            "M5": feedback_activation_rate(turns, enable_feedback=bool(flags.get("enable_feedback"))),
            "M6": member_acceptance_rate(turns),
            **{f"M7_{k}": v for k, v in m7.items()}}


__all__ = ["voice_coverage", "divergent_slots", "agreeing_slots", "conflict_detection_rate",
           "conflict_false_alarms", "resolution_explanation_rate",
           "theory_strategy_usage_rate", "theory_text_leakage_rate", "feedback_activation_rate",
           "member_acceptance_rate", "dialogue_efficiency", "welfare", "gini", "dialogue_only_metrics",
           "stated_preferences"]
