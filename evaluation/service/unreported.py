"""Metrics an agent in the service slot did not give the evaluator the input for: ``None`` with the
reason, never 0.

The built-in pipeline exposes its triage (domain, intent), its belief state, its policy step, its
proposed action and its supervisor; an agent in the slot reports what it chooses
(``convsim.slots``: ``structured``). ``mask_turn(scores, reported)`` sets each turn metric whose
input is missing to ``None`` and returns the reasons; ``mask_dialogue`` does the same for the
dialogue metrics built from them. Metrics computable from the reply text and the tool use (text
hallucination, response grounding, DB grounding of the derived action, policy compliance of the
bookings, system correctness, the state-graded outcomes) are left as computed.
"""
from __future__ import annotations

REPORTED = {  # structured output -> the turn metrics that need it
    "belief_state": ("slot_accuracy", "joint_goal_accuracy", "slot_precision", "slot_false_discovery"),
    "domain": ("domain_routing",),
    "intent": ("intent_accuracy", "intent_accuracy_rule_gold"),
    "acts": ("act_type_accuracy", "act_type_precision", "act_type_recall"),
}
WHY = {"belief_state": "the agent reports no belief state", "domain": "the agent reports no domain",
       "intent": "the agent reports no intent", "acts": "the agent reports no dialogue acts"}
# steps of the built-in pipeline an agent in the slot does not have
NO_STEP = {"policy_decision_accuracy": "the agent has no separate policy step",
           "action_selection_accuracy": "the agent has no separate action-selection step",
           "supervisor_correction": "the agent has no supervisor",
           "db_grounding_proposed": "the agent has no proposed-before-supervision action"}
DIALOGUE = {"memory_transfer": "belief_state", "supervisor_corrections": "supervisor_correction",
            "supervisor_blocks": "supervisor_correction", "db_grounding_proposed": "db_grounding_proposed"}


def mask_turn(scores: dict, reported: list[str] | tuple[str, ...]) -> tuple[dict, dict[str, str]]:
    """``(scores with unreported inputs as None, {metric: reason})``."""
    out, reasons = dict(scores), {}
    for field, names in REPORTED.items():
        if field in reported:
            continue
        for name in names:
            if name in out:
                out[name] = None
                reasons[name] = WHY[field]
    for name, why in NO_STEP.items():
        if name in out:
            out[name] = None
            reasons[name] = why
    return out, reasons


def mask_dialogue(metrics: dict, reported: list[str] | tuple[str, ...]) -> tuple[dict, dict[str, str]]:
    """The dialogue metrics of an agent in the slot: those built from an unreported input ``None``."""
    out, reasons = dict(metrics), {}
    for name, source in DIALOGUE.items():
        if source in REPORTED and source in reported:
            continue
        if name in out:
            out[name] = None
            reasons[name] = WHY.get(source) or NO_STEP.get(source, "not reported")
    for field, names in REPORTED.items():
        if field not in reported:
            reasons.update({n: WHY[field] for n in names if n in out and out[n] is None})
    for name, why in NO_STEP.items():
        if name in out and out[name] is None:
            reasons[name] = why
    return out, reasons
