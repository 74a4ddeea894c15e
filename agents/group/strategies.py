"""Canonical social-choice strategies of guided synthesis (C4/C5) and their operators.

The strategy table and operator styles are the reference's (``group_and_retrieval.md`` §1b).
``apply_strategy`` turns the members' stated preferences for one slot into a decision: the
options the plan must contain (primary first), an optional vote summary, a coverage commitment for
minority members and a subgroup assignment. Decisions are deterministic (rules, no model).
"""

from __future__ import annotations

from convsim.agents.group.members import HIGH_STAMINA
from convsim.agents.group.vote import (coverage_commitment, least_misery_choice, option_label,
                               score_options, subgroup_assignment, vote_eligible, vote_round)

STRATEGY_TABLE: dict[str, dict[str, str]] = {
    "traveler_type": {"family": "hard_constraint", "elder_young": "least_misery",
                      "colleagues": "self_select", "spouses": "alternate", "strangers": "cluster"},
    "travel_purpose": {"family": "weighted_avg", "elder_young": "subgroup_optional",
                       "colleagues": "weighted_avg", "spouses": "alternate", "strangers": "cluster"},
    "spending_preference": {"family": "parent_budget_hc", "elder_young": "self_select",
                            "colleagues": "budget_guardrail_hc", "spouses": "higher_pref_with_compensation",
                            "strangers": "self_select"},
    "cuisine": {"family": "include_both", "elder_young": "least_misery",
                "colleagues": "approval_vote_plus_coverage", "spouses": "mutual_interest",
                "strangers": "subgroup_required"},
    "attraction": {"family": "include_both", "elder_young": "subgroup_required",
                   "colleagues": "subgroup_required", "spouses": "log_roll", "strangers": "subgroup_required"},
    "event": {"family": "parent_veto_hc", "elder_young": "elder_stamina_hc",
              "colleagues": "subgroup_optional", "spouses": "mutual_interest", "strangers": "subgroup_optional"},
    "room_type": {"family": "parent_vote_lower_misery", "elder_young": "flexible_shared_first",
                  "colleagues": "approval_vote_plus_coverage", "spouses": "higher_pref_with_compensation",
                  "strangers": "individual_choice"},
    "house_rule": {"family": "hard_constraint", "elder_young": "elder_accessibility_hc",
                   "colleagues": "shared_rules_intersection_hc", "spouses": "shared_rules_intersection_hc",
                   "strangers": "declare_upfront_hc"},
}
OPERATOR_STYLE = {
    "hard_constraint": "constraint violations are removed first",
    "least_misery": "pick option minimizing strongest dissatisfaction",
    "approval_vote_plus_coverage": "top collective option + commit minority inclusion later",
    "weighted_avg": "weighted support and minority-friendly allocations",
    "subgroup_required": "split required with explicit branch assignments",
    "subgroup_optional": "shared backbone with optional branch",
    "alternate": "trade ownership/wins across days/slots",
    "log_roll": "trade ownership/wins across days/slots",
    "parent_vote_lower_misery": "parents decide; ties use lower-misery tie-break",
    "include_both": "include every conflicting option somewhere in the plan",
    "mutual_interest": "pick the option both find acceptable",
    "higher_pref_with_compensation": "stronger preference wins; the other is compensated later",
    "self_select": "each member keeps their own choice where the plan allows",
    "cluster": "group members with similar wishes and serve the largest cluster first",
    "flexible_shared_first": "a shared arrangement everyone can live with comes first",
    "individual_choice": "each member books the room type they asked for",
}
# What the members read instead of the internal strategy id (system texts never print ids; none
# of these phrases is in the M4b theory lexicon).
STRATEGY_LABELS = {
    "hard_constraint": "the organiser's rule comes first", "least_misery": "nobody gets their worst option",
    "self_select": "everyone keeps their own pick", "alternate": "taking turns", "cluster": "serve the largest like-minded group first",
    "weighted_avg": "weighted support", "subgroup_optional": "a shared day with an optional split",
    "parent_budget_hc": "the parents set the budget", "budget_guardrail_hc": "a shared budget limit",
    "higher_pref_with_compensation": "the strongest wish wins and the other is made up for later",
    "include_both": "include both", "approval_vote_plus_coverage": "the most approved option, with room for the rest",
    "mutual_interest": "common ground", "subgroup_required": "split up for part of the day",
    "log_roll": "trading wins across days", "parent_veto_hc": "the parents can rule options out",
    "elder_stamina_hc": "a gentle pace for the eldest", "parent_vote_lower_misery": "the parents decide",
    "flexible_shared_first": "a shared arrangement first", "individual_choice": "everyone books their own room",
    "elder_accessibility_hc": "accessible for the eldest", "shared_rules_intersection_hc": "every house rule anyone needs",
    "declare_upfront_hc": "house rules agreed upfront",
}
PLAIN_REASONS = {   # operator -> the reason in plain words (the operator styles are internal)
    "hard_constraint": "options someone cannot accept were taken out first",
    "least_misery": "it is the option nobody minds much",
    "approval_vote_plus_coverage": "it got the most support, and the others get their turn later",
    "weighted_avg": "it has the broadest support",
    "subgroup_required": "you split into two groups for this part and meet again afterwards",
    "subgroup_optional": "you share the day and can split for this part if you like",
    "alternate": "you take turns across the days", "log_roll": "you take turns across the days",
    "parent_vote_lower_misery": "the parents chose, picking what upsets fewest",
    "include_both": "both wishes fit into the trip",
    "mutual_interest": "it is the option you can both enjoy",
    "higher_pref_with_compensation": "the stronger wish wins this time and the other comes first next time",
    "self_select": "everyone keeps their own choice where the plan allows",
    "cluster": "it serves the largest group with similar wishes first",
    "flexible_shared_first": "a shared arrangement everyone can live with comes first",
    "individual_choice": "everyone books the room type they asked for",
}
AUTHORITY_ROLES = ("parent", "elder")   # whose word a hard constraint follows, in order
_WEIGHTS = {"parent": 2.0, "elder": 2.0}


def strategy_for(slot: str, group_type: str) -> tuple[str, str]:
    """``(strategy_id, operator)``; every ``*_hc`` id is a hard constraint."""
    sid = STRATEGY_TABLE[slot][group_type]
    return sid, ("hard_constraint" if sid.endswith("_hc") else sid)


def detect_conflict(stated: list[dict]) -> bool:
    """A slot is in conflict when members stated different options or one rejects another's."""
    options = {s["option"] for s in stated}
    rejected = {s.get("reject") for s in stated} & options
    return len(options) > 1 or bool(rejected)


def _ranked(scores: dict[str, dict[str, int]], weights: dict[str, float] | None = None) -> list[str]:
    w = weights or {}
    return sorted(scores, key=lambda o: (-sum(v * w.get(m, 1.0) for m, v in scores[o].items()), o))


def apply_strategy(slot: str, group_type: str, stated: list[dict], *, use_vote: bool = True) -> dict:
    """Guided decision for one (sub)slot. ``stated``: ``[{"member", "role", "text", "option", "reject"}]``."""
    sid, op = strategy_for(slot, group_type)
    prefs = {s["member"]: s["text"] for s in stated}
    roles = {s["member"]: s["role"] for s in stated}
    # candidates: every first choice and every option a member called acceptable (the reference's
    # ballots carry top_choice and acceptable[]), the same candidates C3's synthesis sees
    options = sorted({s["option"] for s in stated} | {s["also_ok"] for s in stated if s.get("also_ok")})
    has_conflict = detect_conflict(stated)
    scores = score_options(prefs, options)
    ranked = _ranked(scores)
    out = {"strategy_id": sid, "operator": op, "resolution_strategy": sid, "has_conflict": has_conflict,
           "vote_summary": None, "coverage_commitment": None, "subgroup_assignment": None,
           "subgrouping_required": False, "subgrouping_optional": False, "alternate": False,
           "member_options": {s["member"]: s["option"] for s in stated}}
    if use_vote and vote_eligible(use_social_theory=True, has_conflict=has_conflict, operator=op):
        parents = [m for m in prefs if roles[m] == "parent"]
        family_lodging = slot == "room_type" and group_type == "family" and parents
        out["vote_summary"] = vote_round(
            prefs, options, strategy_id=sid, voters=parents if family_lodging else None,
            tie_break="score_then_fewest_rejections" if family_lodging else "score_then_lexicographic")
    vote = out["vote_summary"]
    if op == "hard_constraint":
        # remove options someone strongly rejects, drop high-stamina ones for elders, then defer
        # to the authority (first parent / elder) if any, else the best remaining total
        # parent_veto_hc: the parents hold the veto; other hard constraints: anyone's veto counts
        holders = [m for m in prefs if roles[m] == "parent"] if sid == "parent_veto_hc" else list(prefs)
        allowed = [o for o in ranked if min(scores[o][m] for m in holders or prefs) > -2]
        if sid == "elder_stamina_hc":
            allowed = [o for o in allowed if o not in HIGH_STAMINA] or allowed
        allowed = allowed or ranked
        authority = next((m for r in AUTHORITY_ROLES for m in prefs if roles[m] == r), None)
        auth_opt = next((s["option"] for s in stated if s["member"] == authority), None)
        chosen = [auth_opt] if sid in ("hard_constraint", "parent_budget_hc") and auth_opt in allowed else []
        chosen += [o for o in allowed if o not in chosen][: 2 - len(chosen)] if has_conflict else []
        out["selected"] = chosen or allowed[:1]
    elif op in ("least_misery", "flexible_shared_first", "mutual_interest"):
        first = least_misery_choice(prefs, options)
        out["selected"] = [first]
    elif op == "parent_vote_lower_misery":
        out["selected"] = [vote["selected_option"] if vote else ranked[0]]
    elif op == "weighted_avg":
        out["selected"] = [_ranked(scores, {m: _WEIGHTS.get(roles[m], 1.0) for m in prefs})[0]]
    elif op in ("approval_vote_plus_coverage", "higher_pref_with_compensation"):
        if op == "higher_pref_with_compensation":
            top = min(options, key=lambda o: (-max(scores[o].values()), o))
        else:
            top = vote["selected_option"] if vote else ranked[0]
        out["selected"] = [top]
    elif op in ("include_both", "alternate", "log_roll", "self_select", "cluster", "individual_choice"):
        out["selected"] = ranked if op in ("self_select", "individual_choice") else ranked[:2]
        out["alternate"] = op in ("alternate", "log_roll")
    elif op in ("subgroup_required", "subgroup_optional"):
        out["selected"] = ranked[:1]
        if has_conflict and len(ranked) > 1:
            summary = vote or vote_round(prefs, options, strategy_id=sid)
            assignment = subgroup_assignment(prefs, summary)
            out["subgroup_assignment"] = assignment
            out[f"subgrouping_{op.split('_')[1]}"] = True
            out["selected"] = assignment["options"]
    else:  # pragma: no cover - the table only holds the operators above
        raise ValueError(f"no rule for operator {op!r}")
    if vote and op in ("approval_vote_plus_coverage", "weighted_avg", "higher_pref_with_compensation",
                       "least_misery", "mutual_interest", "parent_vote_lower_misery"):
        # minority members whose primary option is not already in the plan get a commitment;
        # a commitment never brings back an option someone strongly rejects
        vetoed = {o for o in options if min(scores[o].values()) <= -2}
        out["coverage_commitment"] = coverage_commitment(slot, vote, exclude=set(out["selected"]) | vetoed)
        if out["coverage_commitment"]:
            out["selected"] += sorted(set(out["coverage_commitment"]["minority_targets"].values()))
    out["primary"] = out["selected"][0]
    out["explanation_style"] = PLAIN_REASONS[op]
    out["strategy_label"] = STRATEGY_LABELS.get(sid, sid.replace("_", " "))
    return out


def fit_budget(decision: dict, budget: int) -> dict:
    """Keep at most ``budget`` options (primary first); drop a subgroup split that needs two
    options when only one fits, and commitments to options that no longer fit."""
    d = {**decision, "selected": list(decision["selected"])[:budget]}
    if d.get("subgroup_assignment") and len(d["selected"]) < 2:
        d.update(subgroup_assignment=None, subgrouping_required=False, subgrouping_optional=False)
    cc = d.get("coverage_commitment")
    if cc:
        kept = {m: o for m, o in cc["minority_targets"].items() if o in d["selected"]}
        d["coverage_commitment"] = {**cc, "minority_targets": kept, "commitment": (
            "We will also include " + ", ".join(f"{option_label(o)} for {m}" for m, o in sorted(kept.items()))
            + " later in the trip.")} if kept else None
    d["primary"] = d["selected"][0]
    return d


def describe_options(options: list[str]) -> str:
    labels = [option_label(o) for o in options]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
