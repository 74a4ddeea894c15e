"""How a session attempt ended: one status per session, recorded in ``results.jsonl``.

==================  ==========================================================  ===============
status              meaning                                                     on resume
==================  ==========================================================  ===============
``ok``              the session ran to its end                                  kept
``agent_failure``   the system under test failed (:class:`AgentError`): scored  kept
``simulator_failure`` the user simulator or a judge failed, or a simulator      kept, excluded
                    check flagged the session: counted, not an agent score      from agent scores
``infra_error``     a model server's fault (unreachable, 5xx, 429, timeout,     re-run
                    unreadable body) after retries; in ``errors.jsonl``, never
                    scored
``code_error``      an exception in graph code                                  re-run
==================  ==========================================================  ===============
"""
from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OK = "ok"
    AGENT_FAILURE = "agent_failure"
    SIMULATOR_FAILURE = "simulator_failure"
    INFRA_ERROR = "infra_error"
    CODE_ERROR = "code_error"

    def __str__(self) -> str:
        return self.value


#: statuses whose record stays in results.jsonl and is not re-run on resume
FINAL = frozenset({Status.OK, Status.AGENT_FAILURE, Status.SIMULATOR_FAILURE})
#: statuses whose record counts towards agent scores
SCORED = frozenset({Status.OK, Status.AGENT_FAILURE})
