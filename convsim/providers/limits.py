"""Provider limits and the run budget, shared by every session and role of a run.

* ``max_in_flight``: at most this many calls in flight per model server (base URL; one slot
  pool per Ollama host, per OpenAI-compatible ``base_url``, per in-process llama.cpp file);
* ``rpm``: calls started at least 60/rpm seconds apart, per server (paced, no bursts);
* ``max_calls`` / ``max_tokens``: a budget for the run attempt. A call is made only when the budget
  admits it: a call it refuses raises :class:`BudgetExhausted` (a ``ModelUnavailable``, so the
  session becomes an infrastructure outcome, kept out of the results and run again on resume,
  even when graph code catches it), the runner starts no new session, and the command ends with
  exit code 3. Finished sessions are kept.

``max_calls`` is exact: a call is counted when it is admitted. ``max_tokens`` reserves before each
call what it can spend at most, its *bound*: the role's ``max_tokens`` setting (llama.cpp's default
256 when unset) plus a bound on the prompt, :func:`prompt_bound` (its UTF-8 bytes, since no
tokenizer in use makes more than one token of a byte, plus ``PROMPT_TOKENS_PER_MESSAGE`` per message
and ``PROMPT_TOKENS_PER_CALL`` for the chat template). A call is admitted only when the tokens spent,
plus those reserved by the calls in flight, plus its bound fit in the budget; when they do not fit
only because of calls in flight, it waits for them to return (each releases what it reserved
beyond what it spent). So when every call has a ``max_tokens``, the run never spends more than the
budget (unless a server counts a prompt above its bound: a chat template adding more than those
allowances; summary.json would report it). A call with no ``max_tokens`` cannot be bounded: it is
admitted while spent + reserved is below the budget and reserves its prompt bound, so the run can
go over by the completions of such calls in flight when the budget is reached (at most one answer
per call in flight, each as long as the server lets it run). Whatever the attempt went over by is
reported in summary.json (``budget.over_tokens``, ``over_calls``) and as a run warning. An answer
cut at the model's own ``max_tokens`` counts its tokens too (a usage with only ``total_tokens``
counts that), and under ``max_tokens`` an answer with no token count at all stops the run: the
budget can no longer be kept.

The limits are the run's, not a process's: threads and asyncio tasks alike take the same locks (async
model calls reach the server through the same sync path in a worker thread), and process and Ray
workers ask the one :class:`RunLimits` of the run, served from a manager process
(:func:`serve_to_processes`) or a Ray actor (:func:`serve_to_ray`), through a :class:`LimitsClient`:
two round trips a call, which docs/cluster.md measures. So the budget is used to its end whichever
worker spends it, ``max_in_flight`` holds across workers for any count, and ``rpm`` paces the run's
calls one after another.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from multiprocessing.managers import BaseManager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from convsim.providers import models, stopping
from convsim.providers.models import ModelUnavailable  # models never imports this module: activate() sets its hook


class Limits(BaseModel):
    """The ``limits:`` section of an experiment config."""

    model_config = ConfigDict(extra="forbid")
    max_in_flight: int | None = Field(default=None, ge=1, description="calls in flight per server")
    # per server (its base URL, as server_key names it): over max_in_flight for that server. Preflight
    # fills in what a server reports (llama.cpp's /props total_slots; 1 for llama-cpp-python's
    # server) for each server without a cap (convsim.running.model_check)
    max_in_flight_by_server: dict[str, int] = Field(default_factory=dict, description="calls in flight, per server")
    rpm: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                              description="calls started per minute per server")
    max_calls: int | None = Field(default=None, ge=1, description="model calls for the run attempt")
    max_tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens")

    def any(self) -> bool:
        return any(v is not None and v != {} for v in self.model_dump().values())

    def slots_for(self, key: str) -> int | None:
        """Calls in flight allowed to the server ``key`` (None: no cap)."""
        return self.max_in_flight_by_server.get(key, self.max_in_flight)


class BudgetExhausted(ModelUnavailable):
    """The run's call or token budget is spent: the session stops here and is run again on resume."""


BUDGET_PREFIX = "run budget: "  # how a session cut by the budget shows in errors.jsonl


def budget_reason(outcome: Any) -> str | None:
    """What the budget cut a session by (``max_calls=5 reached``...), or None when it did not."""
    err = getattr(outcome, "error_entry", None)
    text = str((err or {}).get("error", ""))
    return text.split(BUDGET_PREFIX, 1)[1].splitlines()[0].strip() if BUDGET_PREFIX in text else None


class Spent:
    """Model calls sent and tokens spent by the sessions landed in a run attempt (``Outcome.spent``,
    counted where each session ran: cache hits cost nothing)."""

    def __init__(self) -> None:
        self.calls = self.tokens = 0

    def add(self, spent: tuple[int, int]) -> None:
        self.calls += spent[0]
        self.tokens += spent[1]

    def __str__(self) -> str:
        return f"{self.calls} calls, {self.tokens} tokens"

    def report(self, limits: Limits, stopped: str | None) -> dict | None:
        """``summary.json``'s ``budget``: the attempt's budget, what it spent and went over by, and why
        it stopped (None: it did not); None when the attempt had no budget."""
        if limits.max_calls is None and limits.max_tokens is None:
            return None
        return {"max_calls": limits.max_calls, "max_tokens": limits.max_tokens, "calls": self.calls,
                "tokens": self.tokens, "over_calls": _over(self.calls, limits.max_calls),
                "over_tokens": _over(self.tokens, limits.max_tokens), "stopped": stopped}


def _over(spent: int, budget: int | None) -> int:
    return 0 if budget is None else max(0, spent - budget)


def overshoot_warning(report: dict | None) -> str | None:
    """A run warning when the attempt spent more than its budget (see the module's docstring)."""
    if not report or not report["over_tokens"] and not report["over_calls"]:
        return None
    over = ", ".join(f"{report[k]} {what} over max_{what}={report['max_' + what]}"
                     for k, what in (("over_calls", "calls"), ("over_tokens", "tokens")) if report[k])
    return (f"run budget: this attempt went {over} (the answer of a call with no max_tokens setting is not "
            "bounded, nor a prompt a server counts above its bound: give every model role a max_tokens)")


class BudgetReached(Exception):
    """Raised by the runner after landing everything, when the budget stopped the run (exit code 3);
    ``run_dir``: the run, whose summary is written."""

    def __init__(self, message: str, run_dir: Any = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


class ServersDown(BudgetReached):
    """Raised by the runner after landing everything, when ``retry.stop_after_infra_errors`` sessions
    in a row ended ``infra_error`` (a dead server): exit code 3, the rest resumable."""


def server_key(spec: Any) -> str:
    return spec.base_url or f"{spec.provider}:{spec.model if spec.provider == 'llamacpp' else 'default'}"


class _Pacer:
    """Starts calls at least 60/rpm seconds apart (no burst), for a requests-per-minute limit."""

    def __init__(self, rpm: float, clock=time.monotonic, sleep=time.sleep) -> None:
        self.interval = 60.0 / rpm
        self.next_start = 0.0
        self.lock = threading.Lock()
        self.clock, self.sleep = clock, sleep  # injectable: a test checks the schedule, not wall time

    def book(self) -> float:
        """Book the next start: the seconds to wait before it (0: start now)."""
        with self.lock:
            now = self.clock()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        return start - now

    def wait_turn(self) -> None:
        if (delay := self.book()) > 0:
            self.sleep(delay)


PROMPT_TOKENS_PER_MESSAGE = 8  # a chat template's role markers around each message (ChatML: 5, Llama 3: 5)
PROMPT_TOKENS_PER_CALL = 64  # its fixed part: the assistant header, a default system prompt (Qwen's: ~20)


def prompt_bound(messages: Any) -> int:
    """At most the tokens a prompt of these messages takes: each message's UTF-8 bytes (byte-level
    BPE and SentencePiece with byte fallback never make more than one token of a byte) plus the chat
    template's allowances. Loose (English text is ~4 bytes a token), never low for those tokenizers."""
    total = PROMPT_TOKENS_PER_CALL
    for m in messages:
        content = getattr(m, "content", m)
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        total += len(text.encode("utf-8", "surrogatepass")) + PROMPT_TOKENS_PER_MESSAGE
    return total


class RunLimits:
    """The live state of the limits for one run attempt in this process."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # notified when a call returns its reservation
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._pacers: dict[str, _Pacer] = {}
        self.calls = 0
        self.tokens = 0
        self.reserved = 0  # tokens the calls in flight may still spend (see _admit)
        self.in_flight = 0
        self.exhausted: str | None = None  # why the budget stopped the run

    def _for(self, key: str):
        with self._lock:
            if self.limits.slots_for(key) and key not in self._slots:
                self._slots[key] = threading.BoundedSemaphore(self.limits.slots_for(key))
            if self.limits.rpm and key not in self._pacers:
                self._pacers[key] = _Pacer(self.limits.rpm)
            return self._slots.get(key), self._pacers.get(key)

    def _refusal(self, completion: int | None, prompt: int) -> str | None:
        """Why the budget cannot admit a call now, or None (under the lock)."""
        lim = self.limits
        if lim.max_calls is not None and self.calls >= lim.max_calls:
            return f"max_calls={lim.max_calls} reached"
        if lim.max_tokens is None:
            return None
        committed = self.tokens + self.reserved
        if committed >= lim.max_tokens:
            return f"max_tokens={lim.max_tokens} reached"
        if completion is not None and committed + prompt + completion > lim.max_tokens:
            return (f"max_tokens={lim.max_tokens} reached: {lim.max_tokens - self.tokens} tokens left, a call "
                    f"may take up to {prompt + completion}")
        return None

    def _admit(self, completion: int | None, prompt: int) -> int:
        """Admit one call or raise BudgetExhausted; returns the tokens reserved for it. A call that does
        not fit only because of calls in flight waits for them (they release what they did not spend)."""
        with self._room:
            while self.exhausted is None and (why := self._refusal(completion, prompt)) is not None:
                if why.startswith("max_calls") or not self.in_flight:
                    self.exhausted = why
                    self._room.notify_all()  # calls waiting for room are refused too
                else:
                    self._room.wait()
            if self.exhausted is not None:
                raise BudgetExhausted(f"{BUDGET_PREFIX}{self.exhausted}")
            self.calls += 1
            self.in_flight += 1
            reserve = 0 if self.limits.max_tokens is None else prompt + (completion or 0)
            self.reserved += reserve
            return reserve

    def _release(self, reserve: int) -> None:
        with self._room:
            self.reserved -= reserve
            self.in_flight -= 1
            self._room.notify_all()

    def charge(self, message: Any, spec: Any = None) -> None:
        """Count a served answer's tokens (prompt + completion, else the total). Under a token budget,
        an answer with no count at all spends the budget: it cannot be kept, so no further call is
        made (one line says why)."""
        self._charge(usage_of(message), server_key(spec) if spec is not None else "the server")

    def _charge(self, usage: tuple, server: str) -> None:
        prompt, completion, total = usage
        counted = prompt is not None or completion is not None
        used = (prompt or 0) + (completion or 0) if counted else (total or 0)
        with self._lock:
            self.tokens += used
            if not counted and total is None and self.limits.max_tokens is not None and self.exhausted is None:
                self.exhausted = (f"max_tokens={self.limits.max_tokens} cannot be kept: {server} answered "
                                  "without token usage (set max_calls instead)")

    @contextmanager
    def call(self, spec: Any, messages: Any = ()):
        """Around one request to a server: the budget (a reservation, returned when the call does),
        then a slot (held while in flight), then pacing. Yields ``charge(message)``."""
        completion = getattr(spec, "completion_limit", None)
        reserve = self._admit(completion, prompt_bound(messages) if self.limits.max_tokens is not None else 0)
        try:
            slot, pacer = self._for(server_key(spec))
            if slot is not None:
                stopping.acquire(slot)  # a stop ends the wait for a slot (RunStopped)
            try:
                if pacer is not None:
                    pacer.wait_turn()
                yield lambda message: self.charge(message, spec)
            finally:
                if slot is not None:
                    slot.release()
        finally:
            self._release(reserve)

    # ----- the run's limits served to process and Ray workers (LimitsClient asks these) ---------
    def enter(self, key: str, completion: int | None, prompt: int) -> tuple[str | None, int, float]:
        """:meth:`call`'s entry for a call made in another process: admit it, take a slot of its
        server and book its start. Returns (why it was refused or None, tokens reserved, seconds
        the caller waits before it starts)."""
        try:
            reserve = self._admit(completion, prompt)
        except BudgetExhausted as exc:
            return str(exc), 0, 0.0
        slot, pacer = self._for(key)
        if slot is not None:
            slot.acquire()
        return None, reserve, (pacer.book() if pacer is not None else 0.0)

    def leave(self, key: str, reserve: int, usages: list) -> None:
        """:meth:`call`'s exit for a call :meth:`enter` admitted: charge its answers' ``usages``
        (:func:`usage_of`), free its slot, return its reservation."""
        try:
            for usage in usages:
                self._charge(tuple(usage), key)
            slot = self._slots.get(key)
            if slot is not None:
                slot.release()
        finally:
            self._release(reserve)


def usage_of(message: Any) -> tuple:
    """(prompt, completion, total) tokens of an answer, each None when the server did not say."""
    usage = getattr(message, "usage_metadata", None) or {}
    return usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens")


class LimitsUnreachable(ModelUnavailable):
    """A worker could not reach the run's limits (their process or actor is gone): an infrastructure
    fault, the session is run again on resume."""


class LimitsClient:
    """The run's limits as a process or Ray worker sees them: every call asks the one
    :class:`RunLimits` of the run (``broker``: a multiprocessing manager's proxy of it, or a Ray
    actor holding it), so the budget, the slots and the pacing are the run's, not a share of them.
    Two round trips a call (enter, leave); answers' tokens travel with the second."""

    def __init__(self, limits: Limits, broker: Any) -> None:
        self.limits = limits
        self._broker = broker
        self._ray = hasattr(getattr(broker, "enter", None), "remote")

    def _ask(self, method: str, *args: Any) -> Any:
        try:
            if self._ray:
                import ray
                return ray.get(getattr(self._broker, method).remote(*args))
            return getattr(self._broker, method)(*args)
        except Exception as exc:  # noqa: BLE001 — the broker is gone: the session is an infra fault
            raise LimitsUnreachable(f"the run's limits are unreachable ({type(exc).__name__}: {exc})") from exc

    @contextmanager
    def call(self, spec: Any, messages: Any = ()):
        completion = getattr(spec, "completion_limit", None)
        prompt = prompt_bound(messages) if self.limits.max_tokens is not None else 0
        key = server_key(spec)
        refused, reserve, delay = self._ask("enter", key, completion, prompt)
        if refused is not None:
            raise BudgetExhausted(refused)
        usages: list = []
        try:
            if delay > 0:
                time.sleep(delay)
            yield lambda message: usages.append(usage_of(message))
        finally:
            self._ask("leave", key, reserve, usages)


_ACTIVE: RunLimits | LimitsClient | None = None


def activate(limits: Limits | None, broker: Any = None) -> RunLimits | LimitsClient | None:
    """Make ``limits`` the process's limits for the run attempt now starting (None: unlimited).
    ``broker``: in a process or Ray worker, the run's :class:`RunLimits` served by the driver
    (:func:`serve_to_processes`, :func:`serve_to_ray`), which every call then asks."""
    global _ACTIVE
    if limits is None or not limits.any():
        _ACTIVE = None
    else:
        _ACTIVE = LimitsClient(limits, broker) if broker is not None else RunLimits(limits)
    models.call_guard = model_call if _ACTIVE is not None else None
    return _ACTIVE


@contextmanager
def model_call(spec: Any, messages: Any = ()):
    """What ChatModel wraps each server request (of ``messages``) in; yields a ``charge(message)`` callable."""
    run_limits = _ACTIVE
    if run_limits is None:
        yield None
        return
    with run_limits.call(spec, messages) as charge:
        yield charge


class _LimitsManager(BaseManager):
    """Serves one :class:`RunLimits` from its own process to the run's worker processes."""


_LimitsManager.register("RunLimits", RunLimits, exposed=("enter", "leave"))


def _ignore_sigterm() -> None:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextmanager
def serve_to_processes(limits: Limits | None, ctx: Any):
    """The run's limits for worker processes: yields the broker to hand to each worker
    (:func:`activate`), or None when the run has no limits. The manager process ends with the block."""
    if limits is None or not limits.any():
        yield None
        return
    manager = _LimitsManager(ctx=ctx)
    manager.start(_ignore_sigterm)  # the driver ends it: a SIGTERM to the job must not cut the workers' calls
    try:
        yield manager.RunLimits(limits)
    finally:
        manager.shutdown()


def serve_to_ray(limits: Limits | None, callers: int) -> Any:
    """The run's limits for Ray workers: an actor holding them (no CPU of its own; ``callers``:
    the calls that may wait in it at once, one per session thread), or None without limits."""
    if limits is None or not limits.any():
        return None
    import ray

    @ray.remote(num_cpus=0, max_restarts=0, max_concurrency=max(2, callers + 2))
    class LimitsActor:
        def __init__(self, limits_json: str) -> None:
            self.run_limits = RunLimits(Limits.model_validate_json(limits_json))

        def enter(self, *args):
            return self.run_limits.enter(*args)

        def leave(self, *args):
            return self.run_limits.leave(*args)
    return LimitsActor.remote(limits.model_dump_json())


def with_limits(config: Any, **values: Any) -> Any:
    """The config with the given limits set (None: keep the config's value), e.g. from the CLI."""
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return config
    return config.model_copy(update={"limits": Limits(**{**config.limits.model_dump(), **given})})
