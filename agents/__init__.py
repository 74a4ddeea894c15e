"""The nodes' logic, one module per role; graphs wire them together.

Public entry points (each module's docstring says more):

- movie recommender: ``crs_user`` (rule-based simulator), ``crs_recommender`` (the CRS);
- judges: ``judge`` (generic structured LLM judge), ``pepper_judge``, ``relevance_judge``,
  ``service_judge``;
- customer service: ``service_triage``, ``service_memory``, ``service_policy``, ``service_action``,
  ``service_supervisor``, ``service_response``, ``service_user_simulator``;
- group planning: ``group_members``, ``group_synthesis``, ``group_strategies``, ``group_vote``,
  ``group_feedback``, ``group_planner``, ``group_plan_writer``;
- course retrieval: ``course_retrievers``.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    "Judge": "judge", "judge_conversation": "pepper_judge", "judge_courses": "relevance_judge",
    "user_turn": "crs_user", "crs_turn": "crs_recommender", "TerminationReason": "service_user_simulator",
    "get_retriever": "course_retrievers",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
