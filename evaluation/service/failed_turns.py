"""A turn whose agent model failed is scored as failed, not as its rule fallback's success.

When an agent model of the customer-service system (triage, policy, action, response) answers
invalid output, the graph's rule or template fallback takes over so that the dialogue goes on
(agents/service/llm_nodes.py). What the fallback did is the rule baseline's work: scoring it would
compare the baseline with itself. So each score the failed node is responsible for is set to its
failure value (0) on that turn, where the score applies (a None stays None), and ``system_correct``
of the turn is 0; a dialogue in which any agent model failed is no task success of the agent
(``task_success``, ``task_success_structured``, ``task_completion``, ``task_completion_gated``: 0
where they apply). The count is ``agent_model_failed_turns`` (docs/customer_service.md).
"""
from __future__ import annotations

from convsim.evaluation.service.scoring import HEURISTIC_QUALITY

# the turn scores each agent node is responsible for
NODE_SCORES = {
    "triage": ("domain_routing", "intent_accuracy", "intent_accuracy_rule_gold", "slot_accuracy",
               "joint_goal_accuracy", "slot_precision"),
    "policy": ("policy_decision_accuracy",),
    "action": ("action_selection_accuracy", "act_type_accuracy", "act_type_precision", "act_type_recall"),
    "response": ("response_quality", HEURISTIC_QUALITY, "response_grounding"),
}
DIALOGUE_OUTCOMES = ("task_success", "task_success_structured", "task_completion", "task_completion_gated")


def failed_nodes(scores: dict, system_entry: dict | None) -> list[str]:
    """The agent nodes whose model failed this turn: the evaluator's ``llm_failed_nodes`` and the
    response model's failure recorded on the system turn (``meta.failure``)."""
    nodes = list(scores.get("llm_failed_nodes") or [])
    if system_entry and system_entry.get("speaker") == "system" and (system_entry.get("meta") or {}).get("failure"):
        nodes.append("response")
    return nodes


def score_failed_turn(scores: dict, nodes: list[str]) -> dict:
    """``scores`` with the failed nodes' scores at 0 (where applicable) and ``system_correct`` 0."""
    if not nodes:
        return scores
    out = dict(scores, agent_model_failed=sorted(set(nodes)))
    for node in nodes:
        for key in NODE_SCORES.get(node, ()):
            if out.get(key) is not None:
                out[key] = 0
    if out.get("system_correct") is not None or out.get("system_correct_unscored"):
        out["system_correct"], out["system_correct_unscored"] = 0, 0
    return out


def score_failed_dialogue(dm: dict, turns: list[dict]) -> dict:
    """``dm`` with the task outcomes at 0 (where they apply) when an agent model failed in a turn,
    and the count of such turns (``agent_model_failed_turns``, 0 when none did)."""
    n = sum(bool(t.get("agent_model_failed")) for t in turns)
    out = dict(dm, agent_model_failed_turns=n)
    if n:
        for key in DIALOGUE_OUTCOMES:
            if out.get(key) is not None:
                out[key] = 0
    return out
