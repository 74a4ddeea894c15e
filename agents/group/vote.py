"""The deterministic vote round, subgroup assignment and coverage commitment (C4/C5).

Reference ``group_and_retrieval.md`` §1b: the vote runs iff social theory is on, the slot has a
conflict and the operator is one of ``VOTE_OPERATORS``. Each member's preference text is scored
against every candidate option with the window-based polarity scorer
(``convsim.evaluation.group.text.polarity_score``); the winner is the highest total, ties broken
lexicographically (``score_then_lexicographic``). Family lodging: only parents vote and ties go
to the fewest strong rejections, then lexicographic order.
"""

from __future__ import annotations

from convsim.catalog.travel import option_label
from convsim.evaluation.group.text import is_strong_rejection, polarity_score

VOTE_OPERATORS = frozenset({"approval_vote_plus_coverage", "weighted_avg", "parent_vote_lower_misery",
                            "least_misery", "mutual_interest", "higher_pref_with_compensation"})


def vote_eligible(*, use_social_theory: bool, has_conflict: bool, operator: str) -> bool:
    return bool(use_social_theory and has_conflict and operator in VOTE_OPERATORS)


def score_options(preferences: dict[str, str], options: list[str]) -> dict[str, dict[str, int]]:
    """``{option: {member: polarity score}}`` over the members' preference texts."""
    return {o: {m: polarity_score(text, option_label(o)) for m, text in preferences.items()}
            for o in options}


def _primary(member: str, scores: dict[str, dict[str, int]]) -> str:
    # a member's primary option: their highest score, lexicographic among ties
    return min(scores, key=lambda o: (-scores[o][member], o))


def vote_round(preferences: dict[str, str], options: list[str], *, strategy_id: str,
               voters: list[str] | None = None, tie_break: str = "score_then_lexicographic") -> dict:
    """Score every option, pick the winner and name the minority members.

    ``preferences``: member -> preference text (all members, voters or not);
    ``voters``: who counts toward the total (default: everyone);
    ``tie_break``: "score_then_lexicographic" or "score_then_fewest_rejections" (family lodging).
    Returns the reference's ``vote_summary``.
    """
    if not options:
        raise ValueError("vote_round needs at least one option")
    voters = list(preferences) if voters is None else voters
    scores = score_options(preferences, sorted(set(options)))
    details = []
    for o in sorted(scores):
        details.append({"option": o, "total_score": sum(scores[o][m] for m in voters),
                        "member_scores": dict(scores[o]),
                        "strong_rejections": sum(is_strong_rejection(scores[o][m]) for m in voters)})
    if tie_break == "score_then_fewest_rejections":
        key = lambda d: (-d["total_score"], d["strong_rejections"], d["option"])  # noqa: E731
    else:
        key = lambda d: (-d["total_score"], d["option"])  # noqa: E731
    selected = min(details, key=key)["option"]
    primary = {m: _primary(m, scores) for m in preferences}
    return {"method": "deterministic_vote_parser", "strategy_id": strategy_id,
            "tie_break": tie_break, "voters": voters, "selected_option": selected,
            "option_details": details,
            "minority_members": sorted(m for m, o in primary.items() if o != selected),
            "member_primary_option": primary}


def least_misery_choice(preferences: dict[str, str], options: list[str]) -> str:
    """The option whose worst member score is highest (ties: higher total, then lexicographic)."""
    scores = score_options(preferences, sorted(set(options)))
    return min(scores, key=lambda o: (-min(scores[o].values()), -sum(scores[o].values()), o))


def coverage_commitment(slot: str, vote_summary: dict, *, exclude: set[str] = frozenset()) -> dict | None:
    """Commit each minority member's primary option to a later part of the plan."""
    targets = {m: vote_summary["member_primary_option"][m] for m in vote_summary["minority_members"]
               if vote_summary["member_primary_option"][m] not in exclude}
    if not targets:
        return None
    listing = ", ".join(f"{option_label(o)} for {m}" for m, o in sorted(targets.items()))
    return {"slot": slot, "minority_targets": targets,
            "commitment": f"We will also include {listing} later in the trip."}


def subgroup_assignment(preferences: dict[str, str], vote_summary: dict) -> dict | None:
    """``preference_nearest_split_with_stable_tiebreak`` over the top-2 vote options.

    Each member goes to the option they score higher; a tie goes by member index parity (even ->
    first option). Both groups are kept non-empty by moving the member with the smallest margin.
    Returns ``{"method", "options": [a, b], "groups": {a: [...], b: [...]}}`` or None when the
    vote has fewer than two options.
    """
    ranked = sorted(vote_summary["option_details"], key=lambda d: (-d["total_score"], d["option"]))
    if len(ranked) < 2:
        return None
    a, b = ranked[0]["option"], ranked[1]["option"]
    sa, sb = ranked[0]["member_scores"], ranked[1]["member_scores"]
    groups: dict[str, list[str]] = {a: [], b: []}
    margin = {}
    for i, m in enumerate(preferences):
        diff = sa[m] - sb[m]
        margin[m] = abs(diff)
        groups[a if diff > 0 or (diff == 0 and i % 2 == 0) else b].append(m)
    for src, dst in ((a, b), (b, a)):
        if not groups[dst] and len(groups[src]) > 1:
            mover = min(groups[src], key=lambda m: (margin[m], m))
            groups[src].remove(mover)
            groups[dst].append(mover)
    return {"method": "preference_nearest_split_with_stable_tiebreak", "options": [a, b],
            "groups": groups}
