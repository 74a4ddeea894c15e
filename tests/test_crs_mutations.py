"""One test per mutation that survived the suite (issue 34 §6): each fails when its mutation is
applied by hand (docs/crs_shift.md "Mutation tests" lists them and how they were checked)."""

import pytest

from convsim.evaluation.crs.nodes import TASSettings, shift_recovery
from convsim.evaluation.crs.tas import recovery
from convsim.evaluation.crs.tas_cas import (
    SIM_TOPIC_SHIFT, TOPIC_JACCARD_SHIFT, detect_shifts, shift_outcomes, tas_cas_dialogue,
)
from convsim.evaluation.crs.validity import reference_checks


def _state(cc, cr, shift_at=2):
    n = len(cc)
    transcript = []
    for t in range(1, n + 1):
        transcript += [{"speaker": "user", "turn": t, "text": "", "meta": {"shift_event": t == shift_at}},
                       {"speaker": "system", "turn": t, "text": "", "meta": {}}]
    return {"transcript": transcript,
            "turn_metrics": [{"turn": t, "cc": a, "cr": b} for t, (a, b) in enumerate(zip(cc, cr), start=1)]}


def test_recovery_reads_cc_not_cr():
    """Mutation: shift_recovery passes the CR column as CC."""
    aligned = shift_recovery(_state([0.0, 0.9, 0.0], [0.0, 0.1, 0.0]), TASSettings(window=1), None)[0]
    assert aligned["recovery_rate"] == 1.0
    words = shift_recovery(_state([0.0, 0.1, 0.0], [0.0, 0.9, 0.0]), TASSettings(window=1), None)[0]
    assert words["recovery_rate"] == 0.0


def test_recovery_threshold_is_inclusive():
    """Mutation: ``>=`` -> ``>`` in recovery (CC(s+d) >= tau; the original rule's CC >= floor, CR >= tau)."""
    assert recovery([1], [0.65], [0.0], window=1, tau=0.65)["recovery_rate"] == 1.0
    assert recovery([1], [0.35], [0.0], window=1, tau=0.65, rule="original", cc_floor=0.35)["recovery_rate"] == 1.0
    assert recovery([1], [0.0], [0.65], window=1, tau=0.65, rule="original")["recovery_rate"] == 1.0
    assert recovery([1], [0.64], [0.0], window=1, tau=0.65)["recovery_rate"] == 0.0


def _const_sim(value):
    return lambda a, b: value


@pytest.mark.parametrize("compare", ["consecutive", "segment"])
def test_the_detector_thresholds_are_the_papers(compare):
    """Mutations: SIM_TOPIC_SHIFT 0.55 -> 0.45, TOPIC_JACCARD_SHIFT 0.35 -> 0.25."""
    assert (SIM_TOPIC_SHIFT, TOPIC_JACCARD_SHIFT) == (0.55, 0.35)
    texts, same = ["a", "b"], [{"x"}, {"x"}]
    # similarity 0.5 lies under 0.55 (a shift), over 0.45 (none): lexical departure alone, rule "or"
    assert detect_shifts(texts, same, sim=_const_sim(0.5), rule="or", compare=compare) == [1]
    # topic Jaccard 0.3 (3 of 10 shared) lies under 0.35, over 0.25: topical departure alone
    a = {"a", "b", "c", "d", "e", "f", "g", "h"}
    b = {"f", "g", "h", "i", "j"}
    assert len(a & b) / len(a | b) == pytest.approx(0.3)
    assert detect_shifts(texts, [a, b], sim=_const_sim(0.99), rule="or", compare=compare) == [1]


def test_consecutive_detector_counts_empty_topics_as_jaccard_zero():
    """Mutation: the consecutive detector's Jaccard(∅, ∅) 0 -> 1 (the paper's code counts 0)."""
    texts, empty = ["a", "b"], [set(), set()]
    assert detect_shifts(texts, empty, sim=_const_sim(0.1), rule="and", compare="consecutive") == [1]


@pytest.mark.parametrize("compare", ["consecutive", "segment"])
def test_rule_or_needs_only_one_departure(compare):
    """Mutation: the detector always AND instead of OR (half the shifts)."""
    texts, same = ["a", "b"], [{"x"}, {"x"}]
    assert detect_shifts(texts, same, sim=_const_sim(0.1), rule="or", compare=compare) == [1]
    assert detect_shifts(texts, same, sim=_const_sim(0.1), rule="and", compare=compare) == []


def test_interference_is_divided_by_the_stale_topics():
    """Mutation: interference divided by the old (or new) topic set instead of O ∖ N."""
    user = [{"a", "b", "c"}, {"c", "d", "e"}]          # O = {a, b, c}, N = {c, d, e}, O ∖ N = {a, b}
    system = [{"a"}, {"a", "x"}]                       # the reply to the shift leaks one stale topic
    out = shift_outcomes([1], user, system)
    assert out[0]["interference"] == pytest.approx(0.5)


def test_context_retention_is_system_to_system():
    """Mutation: CAS context retention computed user -> system instead of system -> system."""
    def sim(a, b):
        return 1.0 if a == b else 0.0
    users, systems = ["u1", "u2", "u3"], ["same", "same", "same"]
    out = tas_cas_dialogue(users, systems, [{"t"}] * 3, [{"t"}] * 3, sim=sim)
    assert out["tas_cas_context_retention"] == 1.0


def test_an_honest_reference_that_echoes_is_caught():
    """Mutation: the honest-not-flagged threshold 0.1 -> 1.1 (no honest system could ever fail it)."""
    means = {"template": {"echo_turn_share": 0.5, "restate_turn_share": 0.0},
             "oracle": {"echo_turn_share": 0.0, "restate_turn_share": 0.5},
             "echo": {"echo_turn_share": 0.9}}
    checks = reference_checks(means)
    assert checks["echo_turn_share: film-naming systems not flagged"] is False
    assert checks["restate_turn_share: honest references not flagged"] is False
    fine = {"template": {"echo_turn_share": 0.05, "restate_turn_share": 0.05},
            "oracle": {"echo_turn_share": 0.0, "restate_turn_share": 0.0}}
    assert reference_checks(fine)["echo_turn_share: film-naming systems not flagged"] is True
