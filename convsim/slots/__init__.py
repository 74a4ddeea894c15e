"""Agent slots: the researcher's own agent in a scenario's place.

A graph file declares the role(s) its system under test plays as :class:`Slot` objects
(``SLOTS = {"crs": Slot(...)}``); an agent spec string (``--agent ROLE=SPEC`` on the command
line, ``agents:`` in a config or a variant) names what fills the slot, parsed by
:func:`parse_agent_spec` into an :class:`AgentSpec`; :func:`make_agent` builds the adapter that
calls it (a LangGraph graph from a file or module, a Python callable in openevals' ``app``
convention, an OpenAI-compatible chat endpoint, a LangGraph deployment through ``RemoteGraph``,
an A2A agent), and every adapter answers one turn with an :class:`AgentTurn` (the reply, the
structured outputs the agent reported, its tool calls, and the raw answer). The scenario's tools
reach every kind: a callable in ``inputs["tools"]``, an OpenAI endpoint as function-calling tools
(convsim runs the calls it answers with), a LangGraph deployment or an A2A agent over HTTP for the
turn (:mod:`convsim.slots.toolserver`). A remote agent's
transport faults raise :class:`convsim.providers.models.ModelUnavailable` (infrastructure: retried,
logged, re-run on resume); an exception from the user's agent or a garbage answer raises
:class:`convsim.errors.AgentError` with the raw answer kept (``agent_failure``).
"""
from __future__ import annotations

from convsim.slots.adapters import Agent, make_agent
from convsim.slots.contract import AgentTurn, Slot
from convsim.slots.spec import AgentSpec, parse_agent_spec

__all__ = ["Agent", "AgentSpec", "AgentTurn", "Slot", "make_agent", "parse_agent_spec"]
