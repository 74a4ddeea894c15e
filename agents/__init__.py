"""The nodes' logic, one subpackage per system under test; graphs wire them together.

- ``convsim.agents.crs``: the movie recommender's simulated user (``user``), the recommender
  (``recommender``) and the PEPPER-style judge (``pepper_judge``);
- ``convsim.agents.service``: customer service (``triage``, ``memory``, ``policy``, ``action``,
  ``supervisor``, ``response``, ``user_simulator``, ``judge``);
- ``convsim.agents.group``: group travel planning (``members``, ``synthesis``, ``strategies``, ``vote``,
  ``feedback``, ``planner``, ``plan_writer``);
- ``convsim.agents.courses``: course retrieval (``retrievers``, ``relevance_judge``);
- ``convsim.agents.judge``: the structured-judge machinery every system shares.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    "Judge": "judge", "judge_conversation": "crs.pepper_judge", "judge_courses": "courses.relevance_judge",
    "user_turn": "crs.user", "crs_turn": "crs.recommender", "TerminationReason": "service.user_simulator",
    "get_retriever": "courses.retrievers",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
