"""The window-based polarity scorer, the deterministic vote round, subgroups, coverage and the
canonical strategy table (reference group_and_retrieval.md §1b)."""

import pytest

from convsim.agents.group.strategies import STRATEGY_TABLE, apply_strategy, strategy_for
from convsim.agents.group.vote import coverage_commitment, subgroup_assignment, vote_eligible, vote_round
from convsim.evaluation.group.text import informative_tokens, is_strong_rejection, polarity_score


@pytest.mark.parametrize("text,option,score", [
    ("I love Italian food", "Italian", 4),            # phrase +2, positive cue +2
    ("Italian is fine", "Italian", 2),                # phrase only
    ("no Italian please", "Italian", -2),             # phrase +2, negation -4
    ("I don't want Italian", "Italian", -2),          # negation wins over the positive cue
    ("not really into anything like Italian", "Italian", 4),   # "not" is 5 words back: only "like" counts
    ("Italian or Mexican", "Thai", 0),
    ("a quiet historic site", "Historic Site", 2),    # two-word phrase
    ("old site and historic walls", "Historic Site", 2),   # partial: +1 per word
    ("avoid the theme rides", "Theme Park", -4),      # a negated partial word
    ("I love Italian, Italian again", "Italian", 8),  # each occurrence counts, both near "love"
])
def test_polarity_score(text, option, score):
    assert polarity_score(text, option) == score


def test_strong_rejection_threshold():
    assert is_strong_rejection(-2) and is_strong_rejection(-4) and not is_strong_rejection(-1)


def test_informative_tokens_skip_negated_words_on_request():
    assert informative_tokens("I want Chinese food. But no Seafood, please.") == ["chinese", "seafood"]
    assert informative_tokens("I want Chinese food. But no Seafood, please.", positive_only=True) == ["chinese"]


def test_vote_tie_is_lexicographic():
    prefs = {"A": "I love Thai", "B": "I love Indian"}
    v = vote_round(prefs, ["Thai", "Indian"], strategy_id="approval_vote_plus_coverage")
    assert [d["total_score"] for d in v["option_details"]] == [4, 4]
    assert v["selected_option"] == "Indian"
    assert v["minority_members"] == ["A"] and v["member_primary_option"] == {"A": "Thai", "B": "Indian"}


def test_vote_negation_turns_a_majority_into_a_tie():
    prefs = {"A": "I love Thai", "B": "I love Indian, no Thai", "C": "Thai is fine"}
    v = vote_round(prefs, ["Thai", "Indian"], strategy_id="x")
    details = {d["option"]: d for d in v["option_details"]}
    assert details["Thai"]["total_score"] == 4 - 2 + 2       # B's "no Thai" costs 4
    assert details["Thai"]["strong_rejections"] == 1
    assert details["Indian"]["total_score"] == 4
    assert v["selected_option"] == "Indian"                  # tie -> lexicographic
    prefs["B"] = "I love Indian"
    assert vote_round(prefs, ["Thai", "Indian"], strategy_id="x")["selected_option"] == "Thai"


def test_family_lodging_tie_goes_to_fewest_strong_rejections():
    prefs = {"Mom": "I want a shared room", "Dad": "I want a private room", "Kid": "no shared room"}
    v = vote_round(prefs, ["shared_room", "private_room"], strategy_id="parent_vote_lower_misery",
                   voters=["Mom", "Dad"], tie_break="score_then_fewest_rejections")
    # both 4 among the voters and no voter rejects either: lexicographic -> private_room
    assert v["selected_option"] == "private_room"
    prefs["Dad"] = "I want a private room, no shared room"
    v = vote_round(prefs, ["shared_room", "private_room"], strategy_id="parent_vote_lower_misery",
                   voters=["Mom", "Dad"], tie_break="score_then_fewest_rejections")
    assert v["selected_option"] == "private_room"


def test_fewest_rejections_breaks_a_score_tie():
    prefs = {"P1": "I love Zoo and Park, no Beach", "P2": "Beach Beach Beach"}
    v = vote_round(prefs, ["Beach", "Zoo"], strategy_id="s", tie_break="score_then_fewest_rejections")
    d = {x["option"]: x for x in v["option_details"]}
    # Beach: -2 + 6 = 4 with one strong rejection; Zoo: 4 with none -> Zoo
    assert d["Beach"]["total_score"] == 4 and d["Zoo"]["total_score"] == 4
    assert v["selected_option"] == "Zoo"


def test_vote_eligibility():
    assert vote_eligible(use_social_theory=True, has_conflict=True, operator="least_misery")
    assert not vote_eligible(use_social_theory=True, has_conflict=True, operator="subgroup_required")
    assert not vote_eligible(use_social_theory=False, has_conflict=True, operator="least_misery")
    assert not vote_eligible(use_social_theory=True, has_conflict=False, operator="least_misery")


def test_subgroup_assignment_parity_and_non_empty():
    prefs = {"A": "I love Zoo", "B": "I love Museum", "C": "anything", "D": "I love Zoo"}
    v = vote_round(prefs, ["Zoo", "Museum"], strategy_id="subgroup_required")
    g = subgroup_assignment(prefs, v)
    assert g["options"] == ["Zoo", "Museum"]
    # C ties (0 vs 0) at index 2 (even) -> first option
    assert g["groups"] == {"Zoo": ["A", "C", "D"], "Museum": ["B"]}
    same = {"A": "I love Zoo", "B": "I love Zoo"}
    g = subgroup_assignment(same, vote_round(same, ["Zoo", "Museum"], strategy_id="s"))
    assert all(g["groups"].values())   # both groups kept non-empty


def test_coverage_commitment_names_minorities():
    prefs = {"A": "I love Thai", "B": "I love Indian", "C": "I love Indian"}
    v = vote_round(prefs, ["Thai", "Indian"], strategy_id="approval_vote_plus_coverage")
    c = coverage_commitment("cuisine", v)
    assert c["minority_targets"] == {"A": "Thai"} and "Thai for A" in c["commitment"]
    assert coverage_commitment("cuisine", v, exclude={"Thai"}) is None


def test_strategy_table_is_the_reference_table():
    assert STRATEGY_TABLE["cuisine"]["colleagues"] == "approval_vote_plus_coverage"
    assert STRATEGY_TABLE["event"]["elder_young"] == "elder_stamina_hc"
    assert strategy_for("event", "family") == ("parent_veto_hc", "hard_constraint")
    assert strategy_for("room_type", "strangers") == ("individual_choice", "individual_choice")


def test_elder_stamina_removes_high_stamina_options():
    stated = [{"member": "Gran", "role": "elder", "text": "I prefer Music events.", "option": "Music", "reject": None},
              {"member": "Jake", "role": "young", "text": "I love Sports events.", "option": "Sports", "reject": None}]
    d = apply_strategy("event", "elder_young", stated)
    assert d["selected"] == ["Music"] and d["strategy_id"] == "elder_stamina_hc"


def test_subgroup_required_splits_a_conflict():
    stated = [{"member": m, "role": "stranger", "text": f"I love {o}", "option": o, "reject": None}
              for m, o in (("A", "Zoo"), ("B", "Museum"), ("C", "Zoo"))]
    d = apply_strategy("attraction", "strangers", stated)
    assert d["subgrouping_required"] and d["subgroup_assignment"]["groups"] == {"Zoo": ["A", "C"], "Museum": ["B"]}
