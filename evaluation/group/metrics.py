"""Group travel planning metrics M1–M7 (dialogue only), welfare W1–W3 and the Gini coefficient.

M2, M3 and M5 are computed from behaviour, not from the system's self-reports: M2 is
the F1 of the slots the system flags against the slots where the members' stated preferences
actually diverge (``conflict_detection_f1``); M3 counts an explanation only when it names a
member's wish and the decision made and is not a paste of the members' words
(``explanation_grounded_rate``); M5 counts a divergent slot only when a member gave feedback about
its own wish (``member_feedback_rate``). M4 needs the plan (a strategy counts only when its effect
is in the plan): ``strategy_effect_rate``, called by ``convsim.evaluation.group.evaluate``. The
spec's readings of the self-reports are kept as diagnostics (``M2_recall``, ``M3_reported``,
``M4_reported``, ``M5_reported``: ``conflict_detection_rate``, ``resolution_explanation_rate``,
``theory_strategy_usage_rate``, ``feedback_activation_rate``).

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
from convsim.evaluation.group.text import STOPWORDS, informative_tokens, tokenize

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
    """``M2_recall`` (the spec's M2, a diagnostic now; M2 is ``conflict_detection_f1``) = detected / divergent slots; detected = a synthesis turn of the slot reports
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
    """``M3_reported`` (the spec's M3 on the system's own field, a diagnostic now; M3 is
    ``explanation_grounded_rate``) = explained / synthesis slots; explained = the turn's own ``resolution_explanation`` has
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
    """``M4_reported`` (the spec's M4 on the named strategy, a diagnostic now; M4 is
    ``strategy_effect_rate``) = actionable synthesis slots whose ``resolution_strategy`` is a real strategy (not
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
    """``M5_reported`` (the spec's M5 on the system's flag and any feedback turn, a diagnostic now;
    M5 is ``member_feedback_rate``) = conflict slots (synthesis ``has_conflict``) with any user_feedback_/sys_feedback_
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


# ---------------------------------------------------------------- M2–M5 from behaviour

def _stated_options(turns: list[dict]) -> dict[str, dict[str, list[str]]] | None:
    """``{slot: {speaker: [options]}}`` from the ``user_provide_*`` turns' ``preference_option``
    (lodging: with ``house_rule``) and ``preference_also_ok`` (the option the member said would
    also do); None when some turn has no ``preference_option`` (a CSV from elsewhere)."""
    out: dict[str, dict[str, list[str]]] = {}
    for t in turns:
        if t["intent"].startswith("user_provide_"):
            meta = t.get("meta") or {}
            if meta.get("preference_option") is None:
                return None
            opts = [str(meta[k]) for k in ("preference_option", "preference_also_ok", "house_rule") if meta.get(k)]
            out.setdefault(intent_slot(t["intent"]), {}).setdefault(t["speaker"], []).extend(opts)
    return out


def _wish_texts(turns: list[dict]) -> dict[str, dict[str, str]]:
    """``{slot: {speaker: what they said}}`` from the ``user_provide_*`` turns."""
    out: dict[str, dict[str, str]] = {}
    for t in turns:
        if t["intent"].startswith("user_provide_"):
            per = out.setdefault(intent_slot(t["intent"]), {})
            per[t["speaker"]] = f"{per.get(t['speaker'], '')} {t['utterance']}".strip()
    return out


def names_option(tokens: list[str] | set[str], option: str) -> bool:
    """The text (its tokens) names ``option``: every content word of its label ("entire home" for
    ``entire_room``) or of its id read as words occurs in it."""
    from convsim.catalog.travel import option_label
    toks = set(tokens)
    for words in {option_label(option), str(option).replace("_", " ")}:
        content = [w for w in tokenize(words) if len(w) >= 3 and w not in STOPWORDS] or tokenize(words)
        if content and all(w in toks for w in content):
            return True
    return False


def conflict_detection_counts(turns: list[dict]) -> dict:
    """M2 from behaviour: the slots the synthesis flags (its ``has_conflict``, or the text's words
    without the field) against the slots where the members' stated preferences actually diverge
    (``divergent_slots``: the members' own statements, not the system's flag).
    TP = divergent and flagged, FP = flagged but not divergent (agreeing slots and slots with one
    speaker), FN = divergent and not flagged. ``M2`` = F1 = 2 TP / (2 TP + FP + FN),
    ``M2_precision`` = TP / (TP + FP), ``M2_recall`` = TP / (TP + FN) (the spec's M2). All None
    without synthesis turns (C1/C2); M2 None when nothing diverges and nothing is flagged. A
    mediator that flags every slot loses precision wherever the members agree."""
    synth = _synthesis_turns(turns)
    if not synth:
        return {"M2": None, "M2_precision": None, "M2_recall": None}
    divergent, flagged = divergent_slots(turns), _reported_conflict_slots(turns)
    tp, fp, fn = len(divergent & flagged), len(flagged - divergent), len(divergent - flagged)
    return {"M2": 2 * tp / (2 * tp + fp + fn) if (tp + fp + fn) else None,
            "M2_precision": tp / (tp + fp) if (tp + fp) else None,
            "M2_recall": tp / (tp + fn) if (tp + fn) else None}


def conflict_detection_f1(turns: list[dict]) -> float | None:
    """M2 (``conflict_detection_counts``)."""
    return conflict_detection_counts(turns)["M2"]


COPY_RUN = 4          # tokens in a row shared with a member's words: a pasted span
MAX_COPIED_SHARE = 0.5


def copied_share(text: str, sources: list[str], run: int = COPY_RUN) -> float:
    """Share of ``text``'s tokens inside a run of >= ``run`` consecutive tokens that also occurs in
    one of ``sources`` (the members' own words): 0 for the system's own words, ~1 for a paste."""
    toks = tokenize(text)
    if len(toks) < run:
        return 0.0
    grams = {tuple(st[i:i + run]) for src in sources for st in [tokenize(src)] for i in range(len(st) - run + 1)}
    covered = [False] * len(toks)
    for i in range(len(toks) - run + 1):
        if tuple(toks[i:i + run]) in grams:
            covered[i:i + run] = [True] * run
    return sum(covered) / len(toks)


def _decided_options(ts: list[dict]) -> list[str] | None:
    """The options the synthesis turn says it decided (``selected_options``), None when absent."""
    out = []
    for t in ts:
        sel = (t.get("meta") or {}).get("selected_options")
        if isinstance(sel, dict):
            out += [str(o) for v in sel.values() if isinstance(v, list) for o in v]
    return out or None


def explanation_grounded_rate(turns: list[dict]) -> float | None:
    """M3 from behaviour = synthesis slots with a grounded explanation / synthesis slots.

    The explanation is the turn's ``resolution_explanation`` (its utterance when the field is
    absent). It is grounded when (a) it refers to the members' actual wishes for the slot: it
    names an option some member stated (``preference_option`` or ``preference_also_ok``; without labels: it shares an
    informative token with a member's words for the slot), (b) it is specific to the decision
    made: it names one of the options the turn decided (``selected_options``, when given), and
    (c) it is not a paste: at most ``MAX_COPIED_SHARE`` of its tokens lie in runs of
    ``COPY_RUN`` tokens copied from the members' words (``copied_share``). A slot nobody stated
    a wish for counts by the spec's rule (an explanation of >= 3 tokens). None without synthesis
    turns (C1/C2)."""
    synth = _synthesis_turns(turns)
    if not synth:
        return None
    options, wishes = _stated_options(turns), _wish_texts(turns)
    every_wish = [w for per in wishes.values() for w in per.values()]

    def grounded(slot: str, t: dict, decided: list[str] | None) -> bool:
        own = _reported(t, "resolution_explanation")
        text = str(own or "") if own is not _ABSENT else t["utterance"]
        toks = tokenize(text)
        if slot not in wishes:
            return len(toks) >= 3
        if copied_share(text, every_wish) > MAX_COPIED_SHARE:
            return False
        if options is not None:
            stated = {o for opts in options.get(slot, {}).values() for o in opts}
            refers = any(names_option(toks, o) for o in stated)
        else:
            said = {w for txt in wishes[slot].values() for w in informative_tokens(txt, k=50, positive_only=True)}
            refers = bool(said & set(toks))
        specific = decided is None or any(names_option(toks, o) for o in decided)
        return refers and specific

    ok = sum(any(grounded(slot, t, _decided_options([t])) for t in ts) for slot, ts in synth.items())
    return ok / len(synth)


# strategies that claim to put several members' options into the plan
MULTI_OPTION_STRATEGIES = frozenset({"include_both", "alternate", "log_roll", "self_select", "cluster",
                                     "individual_choice", "subgroup_required", "subgroup_optional"})


def _strategy_key(name) -> str:
    return re.sub(r"[^a-z]+", "_", str(name or "").lower()).strip("_")


def _named_strategy(t: dict) -> str:
    own = _reported(t, "resolution_strategy")
    if own is _ABSENT:
        m = STRATEGY_LINE.search(t["utterance"])
        own = m.group(1) if m else ""
    return "" if str(own or "").strip().upper() in ("", "N/A", "NONE") else str(own).strip()


def strategy_effect_rate(turns: list[dict], satisfied: dict[tuple[str, str], bool], *,
                         use_social_theory: bool) -> float | None:
    """M4 from behaviour = actionable synthesis slots whose named strategy has a visible effect
    in the plan / actionable synthesis slots (the spec's denominator; lodging's sub-slots are one).

    ``satisfied``: ``{(member, slot): bool}``, whether the lived plan meets the member's stated
    wish (the W/M10 table; lodging: its room-type channel, since the strategy decides the room type
    and house rules are a union outside it; none for an over-full plan). Let k be the number of
    distinct wishes (each member's ``preference_option``; without labels ``_stated_labels``) among the members whose wish the plan meets on the slot, K the
    number of distinct wishes stated. A strategy that claims to place several members' options
    (``MULTI_OPTION_STRATEGIES``: include_both, subgroups, alternate, …) counts when k >= min(2, K);
    any other named strategy (a vote, least misery, a hard constraint) counts when k >= 1. A slot
    without a named strategy counts 0. So ``include_both`` on a plan that holds one member's option
    does not count. 0.0 when social theory is off (C1–C3, as the spec fixes); None when no
    actionable slot was synthesised."""
    if not use_social_theory:
        return 0.0
    synth = {s: ts for s, ts in _synthesis_turns(turns).items() if s in ACTIONABLE_SLOTS}
    if not synth:
        return None
    firsts = _stated_options(turns)   # lodging's strategy decides the room type (house rules: a union)
    labels = ({slot: {m: {opts[0]} for m, opts in per.items()} for slot, per in firsts.items()}
              if firsts is not None else _stated_labels(turns))
    seen = 0
    for slot, ts in synth.items():
        names = [n for n in (_named_strategy(t) for t in ts) if n]
        if not names:
            continue
        per = labels.get(slot, {})
        wishes_all = {frozenset(v) for v in per.values()}
        wishes_met = {frozenset(v) for m, v in per.items() if satisfied.get((m, slot))}
        need = min(2, len(wishes_all)) if any(_strategy_key(n) in MULTI_OPTION_STRATEGIES for n in names) else 1
        seen += len(wishes_met) >= max(need, 1)
    return seen / len(synth)


def member_feedback_rate(turns: list[dict], *, enable_feedback: bool) -> float | None:
    """M5 from behaviour = divergent synthesised slots on which a member gave feedback about its
    own wish / divergent synthesised slots.

    Divergent: the members' stated preferences differ (``divergent_slots``; not the system's
    flag, so flagging fewer slots does not shrink the denominator). Feedback counts when a
    ``user_feedback_<slot>`` turn comes from a member who stated a wish for the slot and refers to
    it: names that member's stated option (``preference_option``) or shares an informative token
    with that member's own words for the slot. An "Okay." the system puts in a member's mouth is
    not feedback. 0.0 when feedback is off (C1–C4, as the spec fixes); None when no synthesised
    slot diverges."""
    if not enable_feedback:
        return 0.0
    divergent = divergent_slots(turns) & set(_synthesis_turns(turns))
    if not divergent:
        return None
    options, wishes = _stated_options(turns) or {}, _wish_texts(turns)
    given = set()
    for t in turns:
        if not t["intent"].startswith("user_feedback_"):
            continue
        slot = intent_slot(t["intent"])
        own = wishes.get(slot, {}).get(t["speaker"])
        if own is None:
            continue
        toks = tokenize(t["utterance"])
        if any(names_option(toks, o) for o in options.get(slot, {}).get(t["speaker"], [])) \
                or set(informative_tokens(own, k=50, positive_only=True)) & set(toks):
            given.add(slot)
    return len(divergent & given) / len(divergent)


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
    """M1–M7 as one flat dict (M7's parts as ``M7_total_turns`` etc.), with the spec's readings of
    the self-reports beside them (``M2_recall``, ``M3_reported``, ``M4_reported``, ``M5_reported``).
    M4 itself needs the plan: ``convsim.evaluation.group.evaluate`` adds it."""
    m7 = dialogue_efficiency(turns)
    return {"M1": voice_coverage(turns, member_count=int(flags.get("member_count") or 0),
                                 multi_user=bool(flags.get("multi_user", True))),
            **conflict_detection_counts(turns), **conflict_false_alarms(turns),
            "M3": explanation_grounded_rate(turns),
            "M3_reported": resolution_explanation_rate(turns),
            # M4 needs the plan (strategy_effect_rate, in convsim.evaluation.group.evaluate)
            "M4_reported": theory_strategy_usage_rate(turns, use_social_theory=bool(flags.get("use_social_theory"))),
            "M4b": theory_text_leakage_rate(turns),
            "M5": member_feedback_rate(turns, enable_feedback=bool(flags.get("enable_feedback"))),
            "M5_reported": feedback_activation_rate(turns, enable_feedback=bool(flags.get("enable_feedback"))),
            "M6": member_acceptance_rate(turns),
            **{f"M7_{k}": v for k, v in m7.items()}}


__all__ = ["voice_coverage", "divergent_slots", "agreeing_slots", "conflict_detection_rate",
           "conflict_detection_counts", "conflict_detection_f1", "copied_share", "explanation_grounded_rate",
           "strategy_effect_rate", "member_feedback_rate", "names_option",
           "conflict_false_alarms", "resolution_explanation_rate",
           "theory_strategy_usage_rate", "theory_text_leakage_rate", "feedback_activation_rate",
           "member_acceptance_rate", "dialogue_efficiency", "welfare", "gini", "dialogue_only_metrics",
           "stated_preferences"]
