"""What the process executor's fork server imports once, so that every worker forked from it starts
with LangGraph, LangChain and convsim's runner already imported (convsim.running.process_executor).

Imported in the fork server, the module also makes it ignore SIGTERM: a batch scheduler that
signals every process of the job (``killpg``) must not end the fork server, since its end ends
the workers (they ask for SIGKILL on their parent's death) before the driver's graceful stop
reaches them. The fork server still ends with the driver: it stops when the driver's end of its
pipe closes. Imported anywhere else (a test importing every module), it changes nothing.
"""
from __future__ import annotations

import signal
import sys


def _in_fork_server() -> bool:
    """Whether this import is the fork server's preload (multiprocessing.forkserver.main)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


if _in_fork_server():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

# what every worker needs: LangGraph's graphs and runtime, LangChain's messages and runnables,
# pydantic, convsim's runner (plans, sessions, providers, traces), the agent slots' adapters and the
# answer checks (scikit-learn's English stop words: 1.2 s to import, which each worker's first
# session paid); the graph files and what else they import are imported by each worker's plan
import langchain_core.messages  # noqa: E402,F401
import langchain_core.runnables  # noqa: E402,F401
import langgraph.graph  # noqa: E402,F401
import langgraph.pregel  # noqa: E402,F401
import sklearn.feature_extraction.text  # noqa: E402,F401

import convsim.providers.answer_language  # noqa: E402,F401
import convsim.providers.models  # noqa: E402,F401
import convsim.providers.openai_client  # noqa: E402,F401
import convsim.running.plan  # noqa: E402,F401
import convsim.running.process_executor  # noqa: E402,F401
import convsim.running.session  # noqa: E402,F401
import convsim.slots.adapters  # noqa: E402,F401

convsim.providers.answer_language.stop_words()  # cached: every forked worker has it
