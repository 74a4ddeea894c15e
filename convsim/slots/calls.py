"""A remote agent's calls as the run makes model calls: through the run's provider limits
(:mod:`convsim.providers.limits`), retried on infrastructure faults (:mod:`convsim.providers.retry`),
recorded in the session's ``llm_calls``, and a fault that outlasts the retries raised as
:class:`convsim.providers.models.ModelUnavailable` (``infra_error``: logged, re-run on resume).

Inside a convsim session the adapter finds the session's call log, retry policy and identity on
the LangGraph runtime's context (``agent_session``, set by :mod:`convsim.running.session`); outside
one (a script calling an adapter) it uses the defaults and keeps its records to itself.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable

from convsim.providers import models
from convsim.providers.models import ModelUnavailable
from convsim.providers.retry import RetryPolicy, call_with_retry, infra_fault


def session_handles() -> dict:
    """The running session's ``agent_session`` (``key``, ``calls``, ``unavailable``, ``retry``,
    ``call_tasks``), or ``{}`` outside a convsim session."""
    try:
        from langgraph.runtime import get_runtime
        ctx = get_runtime().context
    except Exception:  # noqa: BLE001 — not inside a graph run
        return {}
    return getattr(ctx, "agent_session", None) or {}


def session_key(session_id: str) -> str:
    """What a stateful adapter keys a session's state by (its thread, its A2A context): the session
    attempt's ``variant/session/t<trial>`` inside a convsim run (two variants or trials of one
    session never share a thread), else ``session_id``."""
    return session_handles().get("key") or str(session_id)


@dataclass(frozen=True)
class Endpoint:
    """What the limits and the call records know a remote agent by (a ModelSpec look-alike)."""

    spec: str
    provider: str
    base_url: str
    model: str = ""
    completion_limit: int | None = None


def remote_call(endpoint: Endpoint, fn: Callable[[], Any], *, role: str, purpose: str = "agent") -> Any:
    """``fn()`` (one request to a remote agent) under the run's limits, retried on infrastructure
    faults, recorded in the session's calls; ModelUnavailable when the faults outlast the retries."""
    handles = session_handles()
    policy: RetryPolicy = handles.get("retry") or RetryPolicy()
    calls: list = handles.get("calls") if handles.get("calls") is not None else []
    unavailable: list = handles.get("unavailable") if handles.get("unavailable") is not None else []

    def record(started: float, ok: bool, error: str | None) -> None:
        node, step, task, inner = models._current_task()
        calls.append({"role": role, "model": endpoint.spec, "purpose": purpose, "node": node, "step": step,
                      "task": task, **({"subgraph_node": inner} if inner is not None else {}),
                      "prompt_tokens": None, "completion_tokens": None, "total_tokens": None,
                      "latency_s": round(time.perf_counter() - started, 6), "cache_hit": False, "ok": ok,
                      "error": error})

    def attempt() -> Any:
        started = time.perf_counter()
        guard = models.call_guard
        try:
            with (guard(endpoint, ()) if guard is not None else nullcontext()):
                started = time.perf_counter()  # latency is the agent's, not the wait for a slot
                out = fn()
        except Exception as exc:  # noqa: BLE001 — classified, then re-raised
            if infra_fault(exc) is not None:
                record(started, False, f"{type(exc).__name__}: {exc}"[:2000])
            raise
        record(started, True, None)
        return out

    try:
        return call_with_retry(attempt, policy)
    except ModelUnavailable as exc:  # the run budget refused the call
        unavailable.append(str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 — classified
        kind = infra_fault(exc)
        if kind is None:
            raise
        err = ModelUnavailable(f"agent {endpoint.spec} (role {role}): {kind} after {policy.attempts} "
                               f"attempt(s): {type(exc).__name__}: {exc}")
        unavailable.append(str(err))
        raise err from exc
