"""What a scenario declares for its system under test (:class:`Slot`) and what an agent returns
for one turn (:class:`AgentTurn`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

RETURNS = ("reply", "ranking", "plan")


@dataclass(frozen=True)
class Slot:
    """A role a graph file lets the researcher's agent play: ``SLOTS = {"crs": Slot(...), ...}``.

    ``handed``: one line saying what the agent is handed each turn; ``returns``: ``"reply"``,
    ``"ranking"`` or ``"plan"``; ``structured``: the structured outputs metrics read when the agent
    reports them (``("recommended_ids",)``); ``builtins``: the built-in agents that fill the slot
    without an adapter, the first the default. ``language``: the language the agent's reply must be
    in (``"en"``; None: not checked), with ``vocabulary()`` the words the scenario knows besides
    English stop words (convsim.providers.answer_language): a reply that fails is the agent's
    garbage (``AgentError``, raw kept), like an empty one. ``tools``: the names of the tools the
    scenario hands the agent each turn (empty: none, or not declared); an ``openai:`` spec whose
    ``#tool_choice`` names another is refused before the run.
    """

    role: str
    handed: str
    returns: str
    structured: tuple[str, ...] = ()
    builtins: tuple[str, ...] = ()
    language: str | None = None
    vocabulary: Callable[[], frozenset] | None = field(default=None, compare=False)
    tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.returns not in RETURNS:
            raise ValueError(f"Slot {self.role!r}: returns must be one of {RETURNS}, got {self.returns!r}")
        object.__setattr__(self, "structured", tuple(self.structured))
        object.__setattr__(self, "builtins", tuple(self.builtins))
        object.__setattr__(self, "tools", tuple(self.tools))

    @property
    def default(self) -> str | None:
        """The built-in agent used when no spec names one (None when the slot has no built-in)."""
        return self.builtins[0] if self.builtins else None


@dataclass
class AgentTurn:
    """One turn of an agent: the reply said to the user, the structured outputs it reported
    (``{}`` when none), its tool calls ``[{"name", "args", "result"}]`` in call order, and its raw
    answer (kept in the record when the answer is a failure)."""

    text: str
    structured: dict = field(default_factory=dict)
    tool_calls: list[dict] = field(default_factory=list)
    raw: object = None

    def as_meta(self) -> dict:
        """The JSON-able parts for a transcript turn's ``meta``."""
        return {"structured": dict(self.structured), "tool_calls": list(self.tool_calls)}
