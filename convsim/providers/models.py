"""Model specs and the per-session chat-model handle.

A model is named by a spec string:

* ``none`` — no model; agents use their rule-based/template behaviour.
* ``ollama:<model>`` — ChatOllama (``OLLAMA_HOST`` or ``http://localhost:11434``);
  ``ollama:<model>@<http(s)://host:port>`` names the server in the spec.
* ``openai:<model>@<base_url>`` — any OpenAI-compatible server (vLLM, llama.cpp server,
  LM Studio, Ollama's ``/v1``). The API key comes from ``OPENAI_API_KEY`` (default ``none``).
  Sent by :mod:`convsim.providers.openai_client` (the request ChatOpenAI sends, without its per-call CPU).
* ``llamacpp:gemma3-270m`` or ``llamacpp:<file.gguf>`` — in-process llama.cpp.

Agents never import a provider: they get a :class:`ChatModel` from the session context,
which records every call (tokens, latency, cache hit) and the settings it ran with.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
import weakref
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator

from pydantic import BaseModel, ValidationError

from convsim.errors import ConvsimError
from convsim.textio import too_deep_at
from convsim.providers import stopping
from convsim.providers.retry import RetryPolicy, call_with_retry, infra_fault, missing_model

PROVIDERS = ("none", "ollama", "openai", "llamacpp")
LLAMACPP_MAX_TOKENS = 256  # what an in-process llama.cpp answer is cut at when max_tokens is unset


class ModelUnavailable(RuntimeError):
    """A model server's fault outlasted the retries (infrastructure, not the agent; convsim.providers.retry)."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec with the generation settings recorded with every result."""

    spec: str
    provider: str
    model: str = ""
    base_url: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    num_ctx: int | None = None
    max_tokens: int | None = None

    @property
    def completion_limit(self) -> int | None:
        """The most tokens an answer can have: ``max_tokens``, llama.cpp's own default when unset,
        None (no bound) for a server left to its default."""
        if self.max_tokens is None and self.provider == "llamacpp":
            return LLAMACPP_MAX_TOKENS
        return self.max_tokens

    @property
    def settings(self) -> dict:
        return {"spec": self.spec, "temperature": self.temperature, "seed": self.seed,
                "num_ctx": self.num_ctx, "max_tokens": self.max_tokens}


def parse_model_spec(value: object, *, where: str = "model") -> ModelSpec:
    """Parse ``"ollama:qwen:7b"`` or ``{"spec": ..., "temperature": ...}`` into a :class:`ModelSpec`."""
    settings: dict[str, Any] = {}
    if isinstance(value, dict):
        settings = dict(value)
        spec = settings.pop("spec", None)
    elif isinstance(value, ModelSpec):
        return value
    else:
        spec = value
    if not isinstance(spec, str) or not spec.strip():
        raise ConvsimError(f"model spec must be a non-empty string, got {spec!r}", field=where)
    spec = spec.strip()
    unknown = set(settings) - {"temperature", "seed", "num_ctx", "max_tokens"}
    if unknown:
        raise ConvsimError(f"unknown model setting(s) {sorted(unknown)}", field=where)
    for key, value in settings.items():  # recorded with every result: a wrong type must not run
        number = (int, float) if key == "temperature" else (int,)
        if value is not None and (isinstance(value, bool) or not isinstance(value, number)
                                  or (key == "temperature" and not 0 <= value <= 2)
                                  or (key != "temperature" and key != "seed" and value < 1)):
            wanted = "a number in 0..2" if key == "temperature" else "an integer" if key == "seed" else \
                "a positive integer"
            raise ConvsimError(f"model setting {key} must be {wanted}, got {value!r}", field=f"{where}.{key}")
    if spec == "none":
        return ModelSpec(spec="none", provider="none", **settings)
    provider, sep, rest = spec.partition(":")
    if not sep or provider not in PROVIDERS or not rest:
        raise ConvsimError(
            f"bad model spec {spec!r}: expected none, ollama:<model>, openai:<model>@<base_url>, "
            "llamacpp:gemma3-270m or llamacpp:<file.gguf>", field=where)
    base_url = None
    model = rest
    if provider == "ollama" and "@" in rest:  # a server of its own: ollama:<model>@<http(s)://host:port>
        model, _, base_url = rest.rpartition("@")
        if not model.strip() or not base_url.startswith(("http://", "https://")):
            raise ConvsimError(f"bad model spec {spec!r}: expected ollama:<model> (the server is OLLAMA_HOST) or "
                               "ollama:<model>@<http(s)://host:port>", field=where)
    if provider == "ollama" and (not model.strip() or any(c.isspace() for c in model)):
        raise ConvsimError(f"bad model spec {spec!r}: expected ollama:<model>", field=where)
    if provider == "openai":
        model, at, base_url = rest.rpartition("@")
        if not at or not model or not base_url.startswith(("http://", "https://")):
            raise ConvsimError(f"bad model spec {spec!r}: expected openai:<model>@<http(s)://base_url>",
                               field=where)
    if provider == "llamacpp" and model != "gemma3-270m" and not model.endswith(".gguf"):
        raise ConvsimError(f"bad model spec {spec!r}: llamacpp takes gemma3-270m or a .gguf file",
                           field=where)
    return ModelSpec(spec=spec, provider=provider, model=model, base_url=base_url, **settings)


# ----------------------------------------------------------------------------- backends

_BACKENDS: dict[tuple, Any] = {}
# Set by convsim.providers.limits.activate: wraps every server request (in-flight cap, pacing, run budget).
call_guard: Any = None
_BACKENDS_LOCK = threading.Lock()


def _backend(spec: ModelSpec, timeout: float = 120.0, stream: Any = None):
    """The chat backend for the spec (``invoke(messages, **kwargs)`` returning a message with
    ``content`` and ``usage_metadata``), shared by all sessions and threads (built once).
    ``stream``: the timeouts of streamed answers (``RetryPolicy.stream_timeouts()``), None: not streamed."""
    if stream is not None and spec.provider not in ("openai", "ollama"):
        stream = None  # only HTTP answers are streamed (in-process llama.cpp is cancelled per token)
    key = (spec.provider, spec.model, spec.base_url, spec.temperature, spec.seed, spec.num_ctx,
           spec.max_tokens, timeout, stream)
    backend = _BACKENDS.get(key)  # no lock once built: every model call of every thread passes here
    if backend is None:
        with _BACKENDS_LOCK:
            if key not in _BACKENDS:
                _BACKENDS[key] = _make_backend(spec, timeout) if stream is None else _make_backend(spec, timeout, stream)
            backend = _BACKENDS[key]
    return backend


def _make_backend(spec: ModelSpec, timeout: float = 120.0, stream: Any = None):
    # provider-side retries are off: convsim.providers.retry retries, records each attempt and classifies
    import os
    if spec.provider == "ollama" and stream is not None:
        # streamed through convsim.providers.httpjson: first-token / idle timeouts, cancelled by a stop
        from convsim.providers.ollama_client import OllamaChat
        return OllamaChat(spec, timeout, stream)
    if spec.provider == "ollama":
        from langchain_ollama import ChatOllama
        kwargs: dict[str, Any] = {"model": spec.model, "temperature": spec.temperature,
                                  "client_kwargs": {"timeout": timeout}}
        if spec.seed is not None:
            kwargs["seed"] = spec.seed
        if spec.num_ctx is not None:
            kwargs["num_ctx"] = spec.num_ctx
        if spec.max_tokens is not None:
            kwargs["num_predict"] = spec.max_tokens
        if spec.base_url or os.environ.get("OLLAMA_HOST"):  # the spec's own server first
            kwargs["base_url"] = spec.base_url or os.environ["OLLAMA_HOST"]
        return ChatOllama(**kwargs)
    if spec.provider == "openai":
        # not ChatOpenAI: the same request for a fraction of the CPU (see convsim/providers/openai_client.py)
        from convsim.providers.openai_client import OpenAIChat
        return OpenAIChat(spec, timeout, stream=stream)
    if spec.provider == "llamacpp":
        from convsim.providers.llamacpp import ChatLlamaCpp
        return ChatLlamaCpp.from_spec(spec)
    raise ConvsimError(f"model {spec.spec!r} has no backend", field="model")


# ----------------------------------------------------------------------------- the handle

@dataclass
class StructuredResult:
    """What :meth:`ChatModel.structured` returns: the value, or a failure with its raw answer."""

    ok: bool
    value: Any = None
    raw: str = ""
    error: str | None = None
    attempts: int = 0
    raws: list = field(default_factory=list)  # every answer that failed, in order (the last is ``raw``)

    def as_record(self) -> dict:
        value = self.value.model_dump() if isinstance(self.value, BaseModel) else self.value
        return {"ok": self.ok, "value": value, "raw": self.raw, "error": self.error,
                "attempts": self.attempts, **({"failed_raws": list(self.raws)} if self.raws else {})}


_MESSAGE_CLASSES: dict[str, Any] = {}


def _message_classes() -> dict[str, Any]:
    if not _MESSAGE_CLASSES:  # imported on first use: a run with model none never needs them
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        _MESSAGE_CLASSES.update({"system": SystemMessage, "user": HumanMessage, "human": HumanMessage,
                                 "assistant": AIMessage, "ai": AIMessage})
    return _MESSAGE_CLASSES


def _role_and_content(m) -> tuple | None:
    """``(role, content)`` of a message given as a ``(role, content)`` pair or a ``{role, content}``
    dict; None for anything else (a LangChain message)."""
    if isinstance(m, (tuple, list)):
        role, content = m
        return role, content
    if isinstance(m, dict):
        return m["role"], m["content"]
    return None


def _to_messages(messages) -> list:
    classes = _message_classes()
    if isinstance(messages, str):
        return [classes["user"](messages)]
    out = []
    for m in messages:
        pair = _role_and_content(m)
        if pair is not None:
            role, content = pair
        elif hasattr(m, "content"):  # a LangChain message already
            out.append(m)
            continue
        else:
            raise ConvsimError(f"a message is (role, content), {{role, content}} or a LangChain message, "
                               f"not {m!r}", field="messages")
        cls = classes.get(role)
        if cls is None:
            raise ConvsimError(f"unknown message role {role!r}", field="messages")
        out.append(cls(content))
    return out


# the chat-completions role of each role a graph may name (what message_dicts makes of its class),
# and the LangChain message type of each chat-completions role
_CHAT_ROLES = {"system": "system", "user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
_TYPES = {"system": "system", "user": "human", "assistant": "ai"}


class PlainMessage(dict):
    """A chat-completions message, ``{"content": ..., "role": ...}`` (what the request body holds;
    JSON-encoded as the dict it is), that also reads as the LangChain message it stands for:
    ``.content`` and ``.type`` (what the response cache, the run budget and a test double read)."""

    __slots__ = ()

    @property
    def content(self) -> str:
        return self["content"]

    @property
    def type(self) -> str:
        return _TYPES[self["role"]]


def _to_chat_messages(messages) -> list:
    """Messages for a backend that sends chat-completions dicts (:class:`~convsim.providers.openai_client.OpenAIChat`):
    each ``(role, text)`` or ``{role, content}`` with a string text as the :class:`PlainMessage`
    ``openai_client.message_dicts`` makes of the LangChain message :func:`_to_messages` builds for
    it, without building it (~20 us a message); anything else as :func:`_to_messages` has it
    (LangChain messages, which ``message_dicts`` converts when the body is built)."""
    if isinstance(messages, str):
        return [PlainMessage(content=messages, role="user")]
    out = []
    for m in messages:
        pair = _role_and_content(m)
        if pair is None:
            out.extend(_to_messages([m]))
            continue
        role, content = pair
        chat_role = _CHAT_ROLES.get(role) if type(content) is str else None
        if chat_role is None:  # an unknown role (the same error), or content LangChain would check
            out.extend(_to_messages([(role, content)]))
        else:
            out.append(PlainMessage(content=content, role=chat_role))
    return out


def _task_metadata() -> dict | None:
    """The metadata LangGraph gives the calling task (None outside a graph run)."""
    try:
        from langgraph.config import get_config
        return get_config().get("metadata", {})
    except Exception:  # outside a graph run
        return None


def _current_task(metadata: dict | None = None) -> tuple[str | None, int | None, int | None, str | None]:
    """The calling graph task: the session graph's node running it, LangGraph's step number, the
    index of a ``Send`` task among its superstep's sends, and the inner node when the call is made
    inside a subgraph (``None``s outside a graph run). ``metadata``: :func:`_task_metadata`'s,
    when the caller has it already."""
    if metadata is None and (metadata := _task_metadata()) is None:
        return None, None, None, None
    node = metadata.get("langgraph_node")
    namespace = str(metadata.get("langgraph_checkpoint_ns") or "").split("|")
    inner = node if len(namespace) > 1 else None
    top = namespace[0].partition(":")[0] or node
    path = metadata.get("langgraph_path") or ()
    push = (path[1] if inner is None and len(path) > 1 and path[0] == "__pregel_push"
            and isinstance(path[1], int) else None)
    return top, metadata.get("langgraph_step"), push, inner


def _current_task_id(metadata: dict | None = None) -> str | None:
    """LangGraph's id of the calling task of the session's graph (a subgraph's call: of the task
    running the subgraph), as its ``tasks`` stream names it; None outside a graph run.
    ``metadata``: as for :func:`_current_task`."""
    if metadata is None and (metadata := _task_metadata()) is None:
        return None
    namespace = metadata.get("langgraph_checkpoint_ns")
    return str(namespace or "").split("|")[0].partition(":")[2] or None


_JSON_BLOCK = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


_DECODER = json.JSONDecoder()
STRUCTURED_MAX_CHARS = 200_000  # a structured (JSON) answer longer than this is no answer
MAX_JSON_STARTS = 64  # opening brackets tried per candidate text: a bound on the work garbage can cost
MAX_ANSWER_DEPTH = 64  # containers nested deeper than this in a model's answer make it garbage


def _valid_json(text: str, value: Any) -> Any:
    # a \\u escape is the only way a lone surrogate gets into parsed JSON: walk only then
    return valid_text(value) if "\\u" in text else value


def extract_json(text: str) -> Any:
    """The first JSON object or array in a model answer (code fences and chatter tolerated).

    Bounded work on any answer: each candidate is parsed once whole, then from at most
    ``MAX_JSON_STARTS`` opening brackets (``{`` first, then ``[``), each ``raw_decode`` stopping at
    the value's end or the first error; nesting too deep for the parser is garbage, not a crash.
    Raises ``ValueError`` when there is none.
    """
    candidates = [m.group(1) for m in _JSON_BLOCK.finditer(text)] + [text]
    for cand in candidates:
        cand = cand.strip()
        if cand.count("[") + cand.count("{") > MAX_ANSWER_DEPTH:  # else it cannot be too deep
            # nesting deeper than any answer schema is garbage: the text is cut before it (a valid
            # answer followed by a looping model's brackets is kept). json's own limit is the
            # interpreter's recursion limit, which libraries raise (grandalf, jedi): a 5,000-deep
            # answer then parsed, and a deeper one could overflow the C stack
            at = too_deep_at(cand, MAX_ANSWER_DEPTH)
            if at is not None:
                cand = cand[:at]
        try:
            return _valid_json(cand, json.loads(cand))
        except (ValueError, RecursionError):
            pass
        for opener in "{[":
            start = cand.find(opener)
            for _ in range(MAX_JSON_STARTS):
                if start == -1:
                    break
                try:
                    return _valid_json(cand, _DECODER.raw_decode(cand, start)[0])
                except (ValueError, RecursionError):
                    start = cand.find(opener, start + 1)
    raise ValueError("no JSON object found in the answer")


@dataclass
class ChatModel:
    """One session's handle on one model role; records every call it makes."""

    spec: ModelSpec
    role: str = "model"
    retries_on_connection: int | None = None  # retries after the first try; overrides retry.attempts
    calls: list[dict] = field(default_factory=list)
    cache: Any = None  # optional ResponseCache (see convsim.providers.cache)
    # the session's identity in cache keys ("variant/session/t<trial>"; "" = the request alone) and how
    # often the session sent each request (shared by its handles, like ``calls``): a session reads only
    # what the same session sent before (an earlier run of it), never another session's answer
    cache_scope: str = ""
    cache_seen: dict[str, Iterator[int]] = field(default_factory=dict)
    retry: RetryPolicy | None = None  # the run's retry: section (convsim.providers.retry); None = defaults
    # every ModelUnavailable this handle raised (shared by a session's handles, like ``calls``): the
    # session is an infra_error even when graph code caught the exception and went on (a fallback)
    unavailable: list[str] = field(default_factory=list)
    # id() of each call dict -> the LangGraph task that made it (shared like ``calls``; None: not
    # kept): the trace gives each parallel task of one node (a Send fan-out) its own calls
    call_tasks: dict[int, str] | None = None

    @property
    def retry_policy(self) -> RetryPolicy:
        policy = self.retry or RetryPolicy()
        if self.retries_on_connection is not None:
            policy = policy.model_copy(update={"attempts": self.retries_on_connection + 1})
        return policy

    @property
    def is_none(self) -> bool:
        return self.spec.provider == "none"

    @property
    def settings(self) -> dict:
        return self.spec.settings

    def _record(self, *, purpose, started, message, ok, cache_hit=False, error=None) -> None:
        usage = getattr(message, "usage_metadata", None) or {}
        metadata = _task_metadata()  # read once for both: LangGraph's config of the calling task
        node, step, task, inner = _current_task(metadata) if metadata is not None else (None,) * 4
        call = {
            "role": self.role, "model": self.spec.spec, "purpose": purpose, "node": node, "step": step,
            "task": task, **({"subgraph_node": inner} if inner is not None else {}),
            "prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
            "total_tokens": usage.get("total_tokens"),  # what the server gave: a total alone counts too
            "latency_s": round(time.perf_counter() - started, 6), "cache_hit": cache_hit, "ok": ok,
            "error": error,
        }
        if (self.call_tasks is not None and metadata is not None
                and (task_id := _current_task_id(metadata)) is not None):
            self.call_tasks[id(call)] = task_id  # before the call is seen in ``calls``
        self.calls.append(call)

    def _invoke_message(self, messages, purpose: str, **kwargs):
        if self.is_none:
            raise RuntimeError(f"role {self.role!r} has model 'none': use the rule-based path")
        msgs = _to_chat_messages(messages) if self.spec.provider == "openai" else _to_messages(messages)
        key = None
        if self.cache is not None:
            key = self.cache.key(self.spec.settings, msgs, kwargs)
            if self.cache_scope:  # the n-th time this session sends it: a sampled answer is not reused
                # setdefault and next() are atomic: parallel tasks of the session never draw the same n
                n = next(self.cache_seen.setdefault(key, itertools.count(1)))
                key = self.cache.scoped(key, f"{self.cache_scope}#{n}")
            hit = self.cache.get(key)
            if hit is not None:
                from langchain_core.messages import AIMessage
                msg = AIMessage(hit["content"], usage_metadata=hit.get("usage"))
                self._record(purpose=purpose, started=time.perf_counter(), message=msg, ok=True,
                             cache_hit=True)
                return msg
        policy = self.retry_policy

        def call():
            started, sent = time.perf_counter(), False
            stopping.check()  # a stopped run starts no model call, nor a retry
            try:
                with (call_guard(self.spec, msgs) if call_guard is not None else nullcontext()) as charge:
                    started, sent = time.perf_counter(), True  # latency is the server's, not the wait for a slot
                    try:
                        stream = policy.stream_timeouts()
                        backend = _backend(self.spec, policy.timeout) if stream is None else \
                            _backend(self.spec, policy.timeout, stream)
                        msg = backend.invoke(msgs, **kwargs)
                    except Exception as exc:  # noqa: BLE001 — re-raised below
                        if charge is not None and cut_answer(exc) is not None:
                            charge(_cut_usage(exc))  # served, then cut at max_tokens: its tokens count
                        raise
                    if charge is not None:
                        charge(msg)
                    content = getattr(msg, "content", None)
                    if isinstance(content, str) and (cleaned := valid_text(content)) is not content:  # a surrogate went
                        msg.content = cleaned
                return msg, started
            except Exception as exc:  # noqa: BLE001 — classify then re-raise
                if infra_fault(exc) is not None:  # recorded per attempt, retried by call_with_retry
                    self._record(purpose=purpose, started=started, message=None, ok=False,
                                 error=f"{type(exc).__name__}: {exc}")
                elif cut_answer(exc) is not None:  # served (tokens spent) but cut: still a recorded call
                    self._record(purpose=purpose, started=started, message=_cut_usage(exc), ok=False,
                                 error="the answer reached max_tokens")
                elif sent:  # any other failed attempt (an HTTP 400...): a call made, and counted by the budget
                    self._record(purpose=purpose, started=started, message=None, ok=False,
                                 error=f"{type(exc).__name__}: {exc}"[:2000])
                    try:
                        exc.convsim_refused_request = True  # see refused_request
                    except AttributeError:  # an exception type without attributes
                        pass
                raise
        try:
            msg, started = call_with_retry(call, policy, sleep=stopping.sleep)
        except Exception as exc:  # noqa: BLE001 — classify then re-raise
            if stopping.requested():  # cut by a stop (an in-process backend's call ended by it): abandoned
                raise stopping.RunStopped(stopping.reason()) from exc
            if isinstance(exc, ModelUnavailable):  # the run budget refused the call (convsim.providers.limits)
                self.unavailable.append(str(exc))  # an infra_error even if graph code catches it
                raise
            kind = infra_fault(exc)
            if kind is not None:
                unavailable = ModelUnavailable(f"{self.spec.spec} (role {self.role}): {kind} after "
                                               f"{policy.attempts} attempt(s): {type(exc).__name__}: {exc}")
                self.unavailable.append(str(unavailable))
                raise unavailable from exc
            if missing_model(exc):  # HTTP 404: the server has no such model (infrastructure, not a bug)
                unavailable = ModelUnavailable(f"{self.spec.spec} (role {self.role}): model not found (HTTP 404): "
                                               f"{type(exc).__name__}: {str(exc)[:300]}")
                self.unavailable.append(str(unavailable))
                raise unavailable from exc
            raise
        self._record(purpose=purpose, started=started, message=msg, ok=True)
        if self.cache is not None:
            self.cache.put(key, {"content": msg.content, "usage": getattr(msg, "usage_metadata", None)})
        return msg

    def invoke(self, messages, *, purpose: str = "generate", **kwargs) -> str:
        """Send messages, return the answer text."""
        content = self._invoke_message(messages, purpose, **kwargs).content
        return content if isinstance(content, str) else json.dumps(content)

    def _json_kwargs(self, schema_text: str) -> dict:
        # a fresh dict per call where the schema itself is sent: a backend may keep or change it
        if self.spec.provider == "ollama":
            return {"format": json.loads(schema_text)}
        if self.spec.provider == "openai":
            return {"response_format": {"type": "json_object"}}
        if self.spec.provider == "llamacpp":
            return {"response_format": {"type": "json_object", "schema": json.loads(schema_text)}}
        return {}

    def structured(self, messages, schema: type[BaseModel], *, purpose: str = "structured",
                   retries: int = 2) -> StructuredResult:
        """Ask for JSON matching ``schema``, validate it, retry with the error; never raise on garbage.

        The JSON schema goes into the prompt and, where the provider has one, into its
        JSON mode (Ollama ``format``, llama.cpp grammar, OpenAI ``json_object``).
        """
        schema_text = schema_json(schema)
        msgs = _to_messages(messages)
        from langchain_core.messages import AIMessage, HumanMessage
        msgs = msgs + [HumanMessage(
            "Answer with a single JSON object and nothing else. It must match this JSON schema:\n"
            + schema_text)]
        raw, error, raws = "", None, []
        for attempt in range(1, retries + 2):
            try:
                raw = self.invoke(msgs, purpose=purpose, **self._json_kwargs(schema_text))
            except TypeError:  # a backend that rejects the JSON-mode kwarg
                raw = self.invoke(msgs, purpose=purpose)
            except Exception as exc:  # noqa: BLE001 — only a JSON answer cut at max_tokens is kept
                cut = cut_answer(exc)
                if cut is None:
                    raise
                raw, error = cut, f"{type(exc).__name__}: the answer reached max_tokens"
                raws.append(raw)
                msgs = msgs + [AIMessage(raw), HumanMessage(
                    "That answer was cut off. Reply again with only a short JSON object.")]
                continue
            try:
                from convsim.providers.answer_text import text_defect, value_defect
                # bytes, controls, nothing: no answer (answer_text); a JSON answer may be long (a
                # plan, a judgement of many items): its length is bounded per string below
                defect = text_defect(raw, max_chars=STRUCTURED_MAX_CHARS)
                if defect is not None:
                    raise ValueError(f"not an answer: {defect}")
                value = schema.model_validate(extract_json(raw))
                defect = value_defect(value.model_dump())  # a "\u0000" escaped inside the JSON
                if defect is not None:
                    raise ValueError(f"not an answer: {defect}")
                return StructuredResult(ok=True, value=value, raw=raw, attempts=attempt, raws=raws)
            except (ValueError, ValidationError) as exc:
                error = f"{type(exc).__name__}: {str(exc)[:500]}"
                raws.append(raw)
                msgs = msgs + [AIMessage(raw), HumanMessage(
                    f"That answer was invalid ({error}). Reply again with only the JSON object.")]
        return StructuredResult(ok=False, value=None, raw=raw, error=error, attempts=retries + 1, raws=raws)

    async def ainvoke(self, messages, *, purpose: str = "generate", **kwargs) -> str:
        import asyncio
        return await asyncio.to_thread(self.invoke, messages, purpose=purpose, **kwargs)

    async def astructured(self, messages, schema: type[BaseModel], *, purpose: str = "structured",
                          retries: int = 2) -> StructuredResult:
        import asyncio
        return await asyncio.to_thread(self.structured, messages, schema, purpose=purpose,
                                       retries=retries)


_SCHEMA_TEXT: "weakref.WeakKeyDictionary[type, str]" = weakref.WeakKeyDictionary()


def schema_json(schema: type[BaseModel]) -> str:
    """``json.dumps(schema.model_json_schema())``, built once per schema class: pydantic takes
    ~0.3 ms to build it, more than the rest of a model call on the openai path. Held weakly: a
    class built per case (the course judge's) goes when its case is done (an lru_cache kept the
    last 512 of them, never hit again)."""
    text = _SCHEMA_TEXT.get(schema)
    if text is None:
        text = _SCHEMA_TEXT[schema] = json.dumps(schema.model_json_schema())
    return text


def echoed_prompt(answer: str, prompt_texts, *, min_chars: int = 20) -> str | None:
    """The first line of ``prompt_texts`` (the instructions, templates and inputs a graph sent, not
    what the user said) that ``answer`` repeats verbatim, or None. A weak model often answers with
    its prompt, or part of it (``Conversation so far: ...``, a candidate list, a JSON action): that
    is a failed answer, to record with its raw text like any other, never a reply to score. Lines
    shorter than ``min_chars`` (after stripping) are not looked for: a real answer may repeat a
    short phrase."""
    if not answer:
        return None
    for text in prompt_texts:
        for line in str(text).splitlines():
            line = line.strip()
            if len(line) >= min_chars and line in answer:
                return line
    return None


def refused_request(exc: BaseException) -> bool:
    """Whether ``exc`` ended a model request without a fault to retry or an answer (an HTTP 400, a
    request the backend rejected): no model's behaviour, so a graph that turns the errors of its
    agents into agent failures must re-raise it (the session is then a ``code_error``, re-run on resume)."""
    return getattr(exc, "convsim_refused_request", False) is True


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: Any) -> Any:
    """``text`` with each lone surrogate (a server's or a model's ``"\\ud800"``: no character, and
    no UTF-8 encoding) replaced by U+FFFD; anything else as it is. Answers enter convsim through it."""
    if isinstance(text, str) and _SURROGATE.search(text):
        return _SURROGATE.sub("\ufffd", text)
    if isinstance(text, dict):
        return {valid_text(k): valid_text(v) for k, v in text.items()}
    if isinstance(text, list):
        return [valid_text(v) for v in text]
    return text


def cut_answer(exc: BaseException) -> str | None:
    """The text of a JSON-mode answer that hit max_tokens (openai's LengthFinishReasonError, which
    langchain-openai raises instead of returning it), or None for any other error."""
    if type(exc).__name__ != "LengthFinishReasonError":
        return None
    try:
        return valid_text(exc.completion.choices[0].message.content or "")  # type: ignore[attr-defined]
    except (AttributeError, IndexError):
        return ""


def _cut_usage(exc: BaseException) -> Any:
    usage = getattr(getattr(exc, "completion", None), "usage", None)
    if usage is None:
        return None
    from types import SimpleNamespace
    return SimpleNamespace(usage_metadata={"input_tokens": usage.prompt_tokens,
                                           "output_tokens": usage.completion_tokens})


def none_model(role: str = "model") -> ChatModel:
    return ChatModel(spec=ModelSpec(spec="none", provider="none"), role=role)
