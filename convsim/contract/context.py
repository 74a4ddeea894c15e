"""What every graph's ``Context`` inherits, and the live metric channel."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from convsim.providers.models import ChatModel, none_model


@dataclass
class SessionContext:
    """Read-only inputs of one session; a graph's ``Context`` subclasses it.

    Carried to nodes by LangGraph's ``context_schema`` (``runtime.context``), so
    nothing about a session is global.
    """

    params: Any = None
    models: dict[str, ChatModel] = field(default_factory=dict)
    embedder_spec: str = "tfidf"
    seed: int = 0
    session_id: str = ""
    trial: int = 0
    run_dir: str | None = None

    def model(self, role: str) -> ChatModel:
        """The role's model handle; a ``none`` handle when the role is not configured."""
        if role not in self.models:
            self.models[role] = none_model(role)
        return self.models[role]

    def llm_calls(self) -> list[dict]:
        """Every call of the session's models, once (the runner gives all roles one shared list)."""
        seen: set[int] = set()
        out: list[dict] = []
        for m in self.models.values():
            if id(m.calls) not in seen:
                seen.add(id(m.calls))
                out.extend(m.calls)
        return out


def emit_metrics(runtime: Any, *, turn: int | None, metrics: dict, kind: str = "turn") -> None:
    """Send metrics on LangGraph's ``custom`` stream so the runner can show them live.

    ``runtime`` is the node's ``Runtime`` (or anything with ``stream_writer``). Outside a
    streaming run the writer is a no-op, so nodes stay callable from plain scripts.
    """
    event = {"kind": kind, "turn": turn, "metrics": metrics}
    # The runner hands the event straight to its sink (progress, trace): asking LangGraph for the
    # ``custom`` stream mode would turn off its fast path (~1.4x the cost of a values-only stream).
    sink = getattr(getattr(runtime, "context", None), "event_sink", None)
    if sink is not None:
        sink(event)
        return
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        return
    writer(event)
