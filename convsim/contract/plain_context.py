"""A run's context as plain JSON: what LangGraph Platform (``langgraph dev``, the LangGraph SDK's
``runs.wait(..., context=...)``) and a hand-written ``graph.invoke(state, context={...})`` send.

``{"params": {"n_turns": 2}, "models": {"agent": "openai:m@http://host/v1"}, "seed": 3}`` becomes the
graph's ``Context``: ``params`` validated into the graph's ``Params`` (an unknown key or a bad value is
one :class:`~convsim.errors.ConvsimError` naming the field, as ``--set`` is on the command line),
``models`` parsed like ``--model ROLE=SPEC`` (a spec string or ``{"spec", "temperature", ...}``; a role
the graph's ``MODEL_ROLES`` does not name is refused, the valid roles listed) into model handles,
and the other keys (``seed``, ``session_id``, ``trial``, ``embedder_spec``) as they are. Before,
LangGraph built ``Context(**d)`` and the nodes found a dict where ``Params`` belonged (``'dict' object
has no attribute 'n_turns'``) and a string where a model handle belonged.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any

from pydantic import BaseModel, ValidationError

from convsim.errors import ConvsimError
from convsim.providers.models import ChatModel, parse_model_spec


def _params_class(schema: type) -> type[BaseModel] | None:
    for f in dataclasses.fields(schema):
        if f.name == "params" and f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            return type(value) if isinstance(value, BaseModel) else None
    return None


def needs_coercion(context: Any) -> bool:
    """Whether ``context`` is plain JSON (a dict), or a Context LangGraph built from one (``params`` a
    dict, a model a string or dict)."""
    if isinstance(context, dict):
        return True
    params, models = getattr(context, "params", None), getattr(context, "models", None)
    return isinstance(params, dict) or (isinstance(models, dict)
                                        and any(isinstance(m, (str, dict)) for m in models.values()))


def context_from_json(schema: type, data: Any) -> Any:
    """The graph's ``Context`` (``schema``, a SessionContext dataclass) from a plain-JSON context."""
    if not isinstance(data, dict):  # a Context LangGraph built from a dict: its fields, as given
        data = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    names = {f.name for f in dataclasses.fields(schema)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConvsimError(f"unknown context key(s) {unknown}; a context takes {sorted(names)}", field="context")
    values = dict(data)
    params_cls = _params_class(schema)
    params = values.get("params")
    if isinstance(params, dict) and params_cls is not None:
        bad = sorted(set(params) - set(params_cls.model_fields))
        if bad:
            raise ConvsimError(f"unknown param(s) {bad}; valid params: {', '.join(params_cls.model_fields)}",
                               field="context.params")
        try:
            values["params"] = params_cls.model_validate(params)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ()))
            raise ConvsimError(f"bad param {where}: {err.get('msg')}", field=f"context.params.{where}") from None
    models = values.get("models")
    if isinstance(models, dict):
        roles = getattr(sys.modules.get(schema.__module__), "MODEL_ROLES", None)
        handles: dict[str, ChatModel] = {}
        calls: list[dict] = []  # one list for every role, as the runner gives a session
        for role, spec in models.items():
            if not isinstance(spec, (str, dict)):  # a model handle (or a test double) already
                handles[role] = spec
                continue
            if roles is not None and role not in roles:
                raise ConvsimError(f"unknown model role {role!r}; this graph's roles: {', '.join(roles)}",
                                   field=f"context.models.{role}")
            handles[role] = ChatModel(spec=parse_model_spec(spec, where=f"context.models.{role}"), role=role,
                                      calls=calls)
        values["models"] = handles
    return schema(**values)
