"""Which model-call failures are infrastructure, and how they are retried.

An infrastructure fault is the model *server's* failure, not the model's answer:

==========================  ===========================================================
fault                       how it shows up (convsim.providers.httpjson / openai SDK / ollama / httpx)
==========================  ===========================================================
unreachable                 ConnectError / ReadError, APIConnectionError, refused connection
timeout                     ReadTimeout / ConnectTimeout, APITimeoutError
HTTP 5xx, 429, 408          HTTPStatusError / APIStatusError / ResponseError with that status_code
unreadable body             JSONDecodeError / UnicodeDecodeError raised *by the provider call*
malformed completion        :class:`MalformedCompletion`: a 200 whose JSON is not a completion
                            (an ``error`` body, no or empty ``choices``, not an object)
==========================  ===========================================================

Each is retried with exponential backoff (``initial_wait * 2**n``, capped at ``max_wait``); a 429
or 503 that says ``Retry-After`` waits at least that long (capped at ``max_retry_after``). After
``attempts`` tries the call raises :class:`convsim.providers.models.ModelUnavailable`: the session ends as
``infra_error``, goes to ``errors.jsonl``, is never scored and is run again on resume.

A well-formed answer with the wrong content (garbage instead of JSON) is *not* infrastructure:
:meth:`ChatModel.structured` keeps its raw text as a recorded failure.

The retry loop is a plain loop (tenacity computes the exponential wait): a ``Retrying`` object per
call cost ~40 us of CPU on every model call, retried or not, a fifth of a call's whole cost.
"""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from tenacity import RetryCallState, wait_exponential

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504}) | frozenset(range(520, 530))

_UNREACHABLE = {"ConnectError", "ConnectionError", "ConnectionRefusedError", "APIConnectionError",
                "RemoteProtocolError", "ReadError", "WriteError", "NetworkError"}
_TIMEOUT = {"ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
            "APITimeoutError", "TimeoutError"}


class MalformedCompletion(ValueError):
    """A 200 from a chat server whose JSON is not a completion (an ``error`` body, no, null or empty
    ``choices``, not an object): the server's fault, like an unreadable body, not the graph code's."""


class RetryPolicy(BaseModel):
    """The ``retry:`` section of an experiment config (every model call of the run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    attempts: int = Field(4, ge=1, le=20, description="tries per model call, the first included")
    initial_wait: float = Field(1.0, ge=0, description="seconds before the first retry (doubles)")
    max_wait: float = Field(30.0, ge=0, description="cap of the exponential wait, seconds")
    max_retry_after: float = Field(60.0, ge=0, description="cap of a server's Retry-After, seconds")
    timeout: float = Field(120.0, gt=0, description="seconds one HTTP request may take (not streamed)")
    # streamed answers (OpenAI-compatible SSE, Ollama NDJSON): three timeouts instead of ``timeout``
    stream: bool = Field(False, description="stream the answers of HTTP model servers (OpenAI-compatible "
                         "and Ollama), timed by the three timeouts below instead of timeout")
    first_token_timeout: float = Field(600.0, gt=0, description="streamed: seconds from sending a request "
                                       "to its first token (the server's queue and prompt processing)")
    idle_timeout: float = Field(30.0, gt=0, description="streamed: seconds between two tokens (the "
                                "server's work; a longer pause is a stalled stream)")
    total_timeout: float | None = Field(1800.0, gt=0, description="streamed: seconds one request may "
                                        "take in all (None: no cap)")
    answer_attempts: int = Field(2, ge=1, le=10, description="tries per model answer that fails the "
                                 "answer check (convsim.providers.answer_check), the first included")
    # the circuit breaker: after this many sessions in a row ended infra_error, no new session starts
    # and the run exits 3 (the rest resumable); None: never
    stop_after_infra_errors: int | None = Field(5, ge=1, description="consecutive infra_error sessions "
                                                "that stop scheduling (exit 3; None: never)")


    def stream_timeouts(self) -> "StreamTimeouts | None":
        """The timeouts of a streamed request, or None when answers are not streamed."""
        if not self.stream:
            return None
        return StreamTimeouts(self.first_token_timeout, self.idle_timeout, self.total_timeout)


class StreamTimeouts(NamedTuple):
    """How long a streamed answer may take: to its first token (the server's queue and prompt
    processing), between two tokens (its work), in all (None: no cap)."""

    first_token: float
    idle: float
    total: float | None


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _status_code(exc: BaseException) -> int | None:
    for e in _chain(exc):
        code = getattr(e, "status_code", None)
        if isinstance(code, int):
            return code
        response = getattr(e, "response", None)
        code = getattr(response, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def infra_fault(exc: BaseException) -> str | None:
    """What infrastructure fault a provider call's exception is (``None``: not infrastructure).

    Only call it on exceptions raised by the provider call itself: there a JSON or UTF-8 decoding
    error means the server's body was unreadable; in graph code it would be a bug.
    """
    names = {type(e).__name__ for e in _chain(exc)}
    if names & _TIMEOUT:
        return "timeout"
    code = _status_code(exc)
    if code is not None and code >= 400:  # a 200 whose body failed to parse is checked below
        return f"HTTP {code}" if code in RETRY_STATUS else None
    if names & _UNREACHABLE:
        return "unreachable"
    if any(isinstance(e, (ValueError, UnicodeError)) and type(e).__name__ in
           {"JSONDecodeError", "UnicodeDecodeError"} for e in _chain(exc)):
        return "unreadable body"
    if any(isinstance(e, MalformedCompletion) for e in _chain(exc)):
        return "malformed completion"
    return None


def missing_model(exc: BaseException) -> bool:
    """Whether a provider call's exception is the server's HTTP 404: the model (or the endpoint) is
    not there (Ollama's and OpenAI's ``model ... not found``). Infrastructure, not a bug in graph
    code: never retried (it will not appear), the session an ``infra_error``, re-run on resume."""
    return _status_code(exc) == 404


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The server's ``Retry-After`` (seconds or an HTTP date), or ``retry-after-ms``, if it sent one."""
    for e in _chain(exc):
        headers = getattr(getattr(e, "response", None), "headers", None)
        if headers is None:
            continue
        ms = headers.get("retry-after-ms")
        if ms:
            try:
                return max(0.0, float(ms) / 1000)
            except ValueError:
                pass
        value = headers.get("retry-after")
        if not value:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
            except (TypeError, ValueError):
                return None
    return None


def backoff_wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    """Exponential backoff, but never shorter than the server's Retry-After (capped)."""
    exponential = wait_exponential(multiplier=policy.initial_wait, max=policy.max_wait)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = retry_after_seconds(exc)
        base = exponential(state)
        return base if after is None else max(base, min(after, policy.max_retry_after))
    return wait


class _Outcome:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def exception(self) -> BaseException:
        return self.exc


class _AttemptState:
    """What :func:`backoff_wait` reads of tenacity's ``RetryCallState``."""

    __slots__ = ("attempt_number", "outcome")

    def __init__(self, attempt_number: int, exc: BaseException) -> None:
        self.attempt_number, self.outcome = attempt_number, _Outcome(exc)


def call_with_retry(fn: Callable[[], Any], policy: RetryPolicy, *,
                    on_fault: Callable[[BaseException, str], None] | None = None,
                    sleep: Callable[[float], None] | None = None) -> Any:
    """``fn()``, retried on infrastructure faults; the last fault is re-raised unchanged."""
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 — classified; anything else is re-raised as is
            kind = infra_fault(exc)
            if kind is not None and on_fault is not None:
                on_fault(exc, kind)
            if kind is None or attempt >= policy.attempts:
                raise
            (sleep or time.sleep)(backoff_wait(policy)(_AttemptState(attempt, exc)))
            attempt += 1
