"""A run's agent specs, resolved before it starts (preflight): each role a slot the graph declares
(``SLOTS``), each spec parsed (a file or module spec loaded), a built-in one the slot offers. Bad
input is one :class:`convsim.ConvsimError` naming the field (``agents.crs``); nothing is written."""
from __future__ import annotations

from typing import Any

from convsim.errors import ConvsimError
from convsim.slots.contract import Slot
from convsim.slots.spec import TOOL_CHOICES, AgentSpec, parse_agent_spec


def graph_slots(module: Any) -> dict[str, Slot]:
    """The graph file's ``SLOTS`` ({role: Slot}); ``{}`` when it declares none."""
    slots = getattr(module, "SLOTS", None) or {}
    if not isinstance(slots, dict) or not any(isinstance(v, Slot) for v in slots.values()):
        return {}  # a module-level name SLOTS of another kind (group_planning's planning slots)
    if not all(isinstance(v, Slot) for v in slots.values()):
        raise ConvsimError("SLOTS must map each role to a convsim.slots.Slot", file=getattr(module, "__file__", None),
                           field="SLOTS")
    return slots


def resolve_agents(module: Any, agents: dict[str, str], *, where: str, variant: str) -> dict[str, AgentSpec]:
    """``{role: AgentSpec}`` for every slot of the graph: the spec given, else the slot's default
    built-in (a slot with no built-in and no spec is left out). An unknown role, a bad spec, a
    built-in the slot does not offer, or an ``openai:`` spec's ``#tool_choice`` naming a tool the
    slot does not declare (``Slot.tools``) is a ConvsimError naming ``agents.<role>``."""
    slots = graph_slots(module)
    for role in agents:
        if role not in slots:
            raise ConvsimError(f"unknown agent role {role!r} (variant {variant}); the graph's agent slots: "
                               f"{', '.join(slots) or 'none'}", file=where, field=f"agents.{role}")
    out: dict[str, AgentSpec] = {}
    for role, slot in slots.items():
        text = agents.get(role)
        if text is None:
            if slot.default is not None:
                out[role] = AgentSpec("builtin", slot.default, slot.default, {})
            continue
        try:
            spec = parse_agent_spec(text, field=f"agents.{role}")
        except ConvsimError as exc:
            raise ConvsimError(exc.message, file=where, field=exc.field) from None
        if spec.kind == "builtin" and slot.builtins and spec.target not in slot.builtins:
            raise ConvsimError(f"no built-in agent {spec.target!r} for role {role!r}; built-ins: "
                               f"{', '.join(slot.builtins)} (or a file, module, openai:, langgraph:, a2a: spec)",
                               file=where, field=f"agents.{role}")
        choice = spec.options.get("tool_choice") if spec.kind == "openai" else None
        if choice and choice not in TOOL_CHOICES and slot.tools and choice not in slot.tools:
            raise ConvsimError(f"bad agent spec {text!r}: tool_choice={choice} names no tool of the {role} slot; "
                               f"its tools: {', '.join(slot.tools)}", file=where, field=f"agents.{role}")
        out[role] = spec
    return out


def agents_into_params(module: Any, overrides: dict, specs: dict[str, AgentSpec], given: dict[str, str]) -> dict:
    """The params overrides with the given specs under ``agents`` when the graph's Params has an
    ``agents`` field (how a scenario's node reads them), the params' own ``agents`` kept under them."""
    fields = getattr(getattr(module, "Params", None), "model_fields", {})
    if "agents" not in fields or not given:
        return overrides
    merged = {**(overrides.get("agents") or {}), **{role: specs[role].text for role in given}}
    return {**overrides, "agents": merged}


def agents_from_params(specs: dict[str, AgentSpec], params: Any, *, where: str) -> dict[str, AgentSpec]:
    """``specs`` with each slot's spec as the graph's params settled it (``params.agents``, which a
    Params validator may fill: crs_shift's ``crs_agent: oracle`` is the built-in ``oracle``), so what
    a result records is the agent that ran."""
    settled = getattr(params, "agents", None)
    if not isinstance(settled, dict):
        return specs
    out = dict(specs)
    for role, text in settled.items():
        if role in out and text and text != out[role].text:
            try:
                out[role] = parse_agent_spec(text, field=f"agents.{role}")
            except ConvsimError as exc:
                raise ConvsimError(exc.message, file=where, field=exc.field) from None
    return out
