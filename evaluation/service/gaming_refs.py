"""The customer-service gaming references and the headline metrics none of them may win.

``configs/service_faults.yaml`` runs two gaming references beside the clean agent:

* ``silent_actions``: every action right, every reply "Sorry, I cannot help with that. Goodbye."
  (the simulated customer reads the action; only the reply-text checks see it);
* ``never_book``: every booking it could make answered "no availability" (MAS4CS's action map
  counts ``nobook`` as the "book" class; ``evaluation/service/refusal.py`` checks the refusal
  against the database, so an ungrounded refusal is a wrong action).

``write_service_gaming_check(run_dir)`` is the run's analysis hook (``evaluation/gaming.py``):
it writes ``gaming_check.md`` / ``.json`` and prints whether any gaming reference beats ``clean``
on a headline metric (``HEADLINE``: the graph's SUMMARY_METRICS that an agent can move, each in
its good direction; policy violations as the dataset rate).
"""
from __future__ import annotations

from pathlib import Path

from convsim.evaluation.gaming import write_gaming_check

GAMING = {"silent_actions": "clean", "never_book": "clean"}
HEADLINE = {"task_success": ("metrics", True), "task_completion": ("metrics", True),
            "system_correctness": ("metrics", True), "joint_goal_accuracy": ("metrics", True),
            "domain_routing": ("metrics", True), "memory_transfer": ("metrics", True),
            "policy_violation_rate": ("dataset", False), "text_hallucination": ("metrics", False),
            "response_grounding": ("metrics", True), "db_grounding_proposed": ("metrics", True),
            "db_grounding": ("metrics", True), "slot_accuracy": ("metrics", True),
            "act_type_accuracy": ("metrics", True), "response_quality": ("metrics", True),
            "heuristic_response_quality": ("metrics", True)}


def write_service_gaming_check(run_dir: str | Path) -> list[dict]:
    return write_gaming_check(Path(run_dir), GAMING, HEADLINE)
