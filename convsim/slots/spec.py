"""Agent spec strings: what fills an agent slot.

==============================  ==================================================================
spec                            kind
==============================  ==================================================================
``template``, ``builtin:oracle``  a built-in agent of the scenario (the graph runs it)
``my_crs.py:graph``             a LangGraph graph (``graph``) or a Python callable (``callable``)
``pkg.mod:app``                 from a file or an importable module: decided when it is loaded
``graph:...``, ``callable:...``  the same, with the kind forced
``openai:<model>@<base_url>``   an OpenAI-compatible ``/v1/chat/completions`` endpoint that is the agent
                                (``...#tool_rounds=N&tool_choice=C&max_tokens=M&temperature=T&seed=S``:
                                its tool-calling rounds per turn, default 8, the ``tool_choice``
                                it is sent, and generation settings)
``langgraph:<url>#<assistant>``  a LangGraph deployment through ``RemoteGraph``, one thread per session
``a2a:<url>``                   an A2A agent (``a2a-sdk`` client), one context per session
==============================  ==================================================================
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from convsim.errors import ConvsimError

KINDS = ("builtin", "graph", "callable", "openai", "langgraph", "a2a")
REMOTE_KINDS = frozenset({"openai", "langgraph", "a2a"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_ATTR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec. ``kind``: one of :data:`KINDS`; ``target``: the built-in's name,
    ``path.py:attr`` / ``pkg.mod:attr``, the model and URL, or the URL; ``text``: the spec as
    written (recorded with every result); ``options``: what the kind needs beside the target
    (``{"assistant_id": ...}``, ``{"model": ..., "base_url": ...}``)."""

    kind: str
    target: str
    text: str
    options: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_builtin(self) -> bool:
        return self.kind == "builtin"

    @property
    def is_remote(self) -> bool:
        return self.kind in REMOTE_KINDS

    def __str__(self) -> str:
        return self.text


def _bad(text: object, field_name: str, why: str) -> ConvsimError:
    return ConvsimError(f"bad agent spec {text!r}: {why}", field=field_name)


def _url(text: str, url: str, field_name: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _bad(text, field_name, f"{url!r} is no http(s) URL")
    return url.rstrip("/")


OPENAI_OPTIONS = {"tool_rounds": "an integer >= 1 (answers with tool calls one turn may give)",
                  "max_tokens": "an integer >= 1", "seed": "an integer", "temperature": "a number in 0..2",
                  "tool_choice": "auto, none, required or a tool's name (letters, digits, _ and -, at most 64)"}
TOOL_CHOICES = ("auto", "none", "required")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")  # OpenAI's rule for a function's name


def _openai_option(text: str, option: str, field_name: str) -> dict:
    """One ``key=value`` of an ``openai:`` spec's ``#...`` options (:data:`OPENAI_OPTIONS`)."""
    name, eq, value = (x.strip() for x in option.partition("="))
    if name not in OPENAI_OPTIONS or not eq:
        raise _bad(text, field_name, "the options of an openai: spec are #key=value&... with keys "
                                     + ", ".join(OPENAI_OPTIONS))
    if name == "tool_choice":  # a name the scenario's tools lack is found at the first agent turn
        if value not in TOOL_CHOICES and not _TOOL_NAME.match(value):
            raise _bad(text, field_name, f"tool_choice must be {OPENAI_OPTIONS[name]}, got {value!r}")
        return {name: value}
    try:
        parsed: float | int = float(value) if name == "temperature" else int(value)
    except ValueError:
        parsed = None  # type: ignore[assignment]
    if parsed is None or (name == "temperature" and not 0 <= parsed <= 2) or \
            (name in ("tool_rounds", "max_tokens") and parsed < 1):
        raise _bad(text, field_name, f"{name} must be {OPENAI_OPTIONS[name]}, got {value!r}")
    return {name: parsed}


def parse_agent_spec(text: str, *, field: str = "agent") -> AgentSpec:
    """Parse an agent spec string (see the module docstring); a bad spec raises
    :class:`convsim.ConvsimError` naming ``field``. A ``file.py:attr`` or ``pkg.mod:attr`` spec
    is loaded here, so a missing file, module or attribute is bad input found before a run starts,
    and a LangGraph graph is told from a callable."""
    if isinstance(text, AgentSpec):
        return text
    if not isinstance(text, str) or not text.strip():
        raise _bad(text, field, "an agent spec is a non-empty string")
    text = text.strip()
    head, sep, rest = text.partition(":")
    if not sep:
        if not _NAME.match(text):
            raise _bad(text, field, "a built-in agent's name is a word (template, oracle, ...)")
        return AgentSpec("builtin", text, text, {})
    if head == "builtin":
        if not _NAME.match(rest):
            raise _bad(text, field, "builtin: takes a built-in agent's name")
        return AgentSpec("builtin", rest, text, {})
    if head == "openai":
        model, at, base = rest.rpartition("@")
        if not at or not model.strip():
            raise _bad(text, field, "write openai:<model>@<base_url> (the endpoint's /v1 base URL)")
        base, hashmark, fragment = base.partition("#")
        options = {"model": model.strip(), "base_url": _url(text, base.strip(), field)}
        for option in fragment.split("&") if hashmark else ():
            options.update(_openai_option(text, option, field))
        return AgentSpec("openai", rest, text, options)
    if head == "langgraph":
        url, hashmark, assistant = rest.partition("#")
        if not hashmark or not assistant.strip():
            raise _bad(text, field, "write langgraph:<url>#<assistant_id> (the graph's name in langgraph.json, "
                                    "or an assistant id)")
        return AgentSpec("langgraph", rest, text, {"url": _url(text, url.strip(), field),
                                                    "assistant_id": assistant.strip()})
    if head == "a2a":
        return AgentSpec("a2a", rest, text, {"url": _url(text, rest.strip(), field)})
    forced = None
    if head in ("graph", "callable"):
        forced, target = head, rest
    else:
        target = text
    obj = load_target(target, text=text, field=field)
    kind = "graph" if is_langgraph(obj) else "callable"
    if forced == "graph" and kind != "graph":
        raise _bad(text, field, f"{target} is no LangGraph graph (a compiled graph or a StateGraph), "
                                f"it is a {type(obj).__name__}")
    if forced == "callable" or kind == "callable":
        if not callable(obj):
            raise _bad(text, field, f"{target} is neither a LangGraph graph nor callable (a {type(obj).__name__})")
        kind = "callable"
    return AgentSpec(kind, target, text, {})


def is_langgraph(obj: Any) -> bool:
    """A compiled LangGraph graph (Pregel) or an uncompiled StateGraph."""
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel
    return isinstance(obj, (Pregel, StateGraph))


_LOADED: dict[str, Any] = {}
_LOCK = threading.Lock()


def load_target(target: str, *, text: str | None = None, field: str = "agent") -> Any:
    """The object a ``path.py:attr`` or ``pkg.mod:attr`` target names (imported once per process)."""
    text = text or target
    if target in _LOADED:
        return _LOADED[target]
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not _ATTR.match(attr):
        raise _bad(text, field, "write path/to/file.py:attr or package.module:attr "
                                "(or openai:, langgraph:, a2a:, builtin:)")
    with _LOCK:
        if target in _LOADED:
            return _LOADED[target]
        if where.endswith(".py") or "/" in where or "\\" in where:
            path = Path(where).expanduser().resolve()
            if not path.is_file():
                raise _bad(text, field, f"no file {where}")
            name = f"convsim_agent_{path.stem}_{abs(hash(str(path))) % 10**8}"
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise _bad(text, field, f"cannot import {where}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                if str(path.parent) not in sys.path:
                    sys.path.insert(0, str(path.parent))  # the file's own imports of its neighbours
                try:
                    spec.loader.exec_module(module)
                except Exception as exc:
                    sys.modules.pop(name, None)
                    raise _bad(text, field, f"{where} failed to import: {type(exc).__name__}: {exc}") from exc
        else:
            if not _MODULE.match(where):
                raise _bad(text, field, f"{where!r} is neither a .py file nor a module name")
            try:
                module = importlib.import_module(where)
            except Exception as exc:
                raise _bad(text, field, f"cannot import module {where}: {type(exc).__name__}: {exc}") from exc
        obj: Any = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise _bad(text, field, f"{where} has no attribute {attr!r}")
            obj = getattr(obj, part)
        _LOADED[target] = obj
        return obj
