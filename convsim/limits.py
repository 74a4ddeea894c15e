"""Provider limits and the run budget, shared by every session and role of a run.

* ``max_in_flight``: at most this many calls in flight per model server (base URL; one slot
  pool per Ollama host, per OpenAI-compatible ``base_url``, per in-process llama.cpp file);
* ``rpm``: calls started at least 60/rpm seconds apart, per server (paced, no bursts);
* ``max_calls`` / ``max_tokens``: a budget for the run attempt. A call is made only while the budget
  is not spent: the first call past it raises :class:`BudgetExhausted` (a ``ModelUnavailable``, so
  the session becomes an infrastructure outcome, kept out of the results and run again on resume,
  even when graph code catches it), the runner starts no new session, and the command ends with
  exit code 3. Finished sessions are kept. ``max_calls`` is exact in one process. Tokens are known
  only when an answer arrives, so the calls already in flight when ``max_tokens`` is reached add
  theirs (the stop line gives what the attempt spent); an answer cut at the model's own
  ``max_tokens`` counts its tokens too (a usage with only ``total_tokens`` counts that), and under
  ``max_tokens`` an answer with no token count at all stops the run: the budget can no longer be kept.

The limits are process-wide (threads and asyncio tasks alike take the same locks; async model
calls reach the server through the same sync path in a worker thread). Process and Ray workers
each get an equal share (see :func:`worker_share`), which docs/cluster.md describes.
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import models
from .models import ModelUnavailable  # models never imports this module: activate() sets its hook


class Limits(BaseModel):
    """The ``limits:`` section of an experiment config."""

    model_config = ConfigDict(extra="forbid")
    max_in_flight: int | None = Field(default=None, ge=1, description="calls in flight per server")
    rpm: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                              description="calls started per minute per server")
    max_calls: int | None = Field(default=None, ge=1, description="model calls for the run attempt")
    max_tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens")

    def any(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


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


class BudgetReached(Exception):
    """Raised by the runner after landing everything, when the budget stopped the run (exit code 3);
    ``run_dir``: the run, whose summary is written."""

    def __init__(self, message: str, run_dir: Any = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def server_key(spec: Any) -> str:
    return spec.base_url or f"{spec.provider}:{spec.model if spec.provider == 'llamacpp' else 'default'}"


class _Pacer:
    """Starts calls at least 60/rpm seconds apart (no burst), for a requests-per-minute limit."""

    def __init__(self, rpm: float, clock=time.monotonic, sleep=time.sleep) -> None:
        self.interval = 60.0 / rpm
        self.next_start = 0.0
        self.lock = threading.Lock()
        self.clock, self.sleep = clock, sleep  # injectable: a test checks the schedule, not wall time

    def wait_turn(self) -> None:
        with self.lock:
            now = self.clock()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        if start > now:
            self.sleep(start - now)


class RunLimits:
    """The live state of the limits for one run attempt in this process."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._pacers: dict[str, _Pacer] = {}
        self.calls = 0
        self.tokens = 0
        self.exhausted: str | None = None  # why the budget stopped the run

    def _for(self, key: str):
        with self._lock:
            if self.limits.max_in_flight and key not in self._slots:
                self._slots[key] = threading.BoundedSemaphore(self.limits.max_in_flight)
            if self.limits.rpm and key not in self._pacers:
                self._pacers[key] = _Pacer(self.limits.rpm)
            return self._slots.get(key), self._pacers.get(key)

    def _reserve(self) -> None:
        lim = self.limits
        with self._lock:
            if self.exhausted is None:
                if lim.max_calls is not None and self.calls >= lim.max_calls:
                    self.exhausted = f"max_calls={lim.max_calls} reached"
                elif lim.max_tokens is not None and self.tokens >= lim.max_tokens:
                    self.exhausted = f"max_tokens={lim.max_tokens} reached"
            if self.exhausted is not None:
                raise BudgetExhausted(f"{BUDGET_PREFIX}{self.exhausted}")
            self.calls += 1

    def charge(self, message: Any, spec: Any = None) -> None:
        """Count a served answer's tokens (prompt + completion, else the total). Under a token budget,
        an answer with no count at all spends the budget: it cannot be kept, so no further call is
        made (one line says why)."""
        usage = getattr(message, "usage_metadata", None) or {}
        prompt, completion, total = usage.get("input_tokens"), usage.get("output_tokens"), usage.get("total_tokens")
        counted = prompt is not None or completion is not None
        used = (prompt or 0) + (completion or 0) if counted else (total or 0)
        with self._lock:
            self.tokens += used
            if not counted and total is None and self.limits.max_tokens is not None and self.exhausted is None:
                server = server_key(spec) if spec is not None else "the server"
                self.exhausted = (f"max_tokens={self.limits.max_tokens} cannot be kept: {server} answered "
                                  "without token usage (set max_calls instead)")

    @contextmanager
    def call(self, spec: Any):
        """Around one request to a server: budget, then a slot (held while in flight), then pacing."""
        self._reserve()
        slot, pacer = self._for(server_key(spec))
        with slot if slot is not None else nullcontext():
            if pacer is not None:
                pacer.wait_turn()
            yield self


_ACTIVE: RunLimits | None = None


def activate(limits: Limits | None) -> RunLimits | None:
    """Make ``limits`` the process's limits for the run attempt now starting (None: unlimited)."""
    global _ACTIVE
    _ACTIVE = RunLimits(limits) if limits is not None and limits.any() else None
    models.call_guard = model_call if _ACTIVE is not None else None
    return _ACTIVE


@contextmanager
def model_call(spec: Any):
    """What ChatModel wraps each server request in; yields a ``charge(message)`` callable."""
    run_limits = _ACTIVE
    if run_limits is None:
        yield None
        return
    with run_limits.call(spec):
        yield lambda message: run_limits.charge(message, spec)


def worker_share(limits: Limits | None, workers: int) -> Limits | None:
    """Each of ``workers`` processes or Ray actors gets 1/workers of every limit (rounded up).

    A worker holds its own counters, so the run as a whole stays within ``max_in_flight`` and
    ``rpm`` exactly when they divide by the workers, and within the budget up to ``workers - 1``
    calls (or tokens of one call) of rounding.
    """
    if limits is None or not limits.any() or workers <= 1:
        return limits
    share = {k: (None if v is None else max(1, math.ceil(v / workers)) if k != "rpm" else v / workers)
             for k, v in limits.model_dump().items()}
    return Limits(**share)


def config_for_workers(config: Any, workers: int) -> Any:
    """The run config a worker process or actor plans with: its share of the limits."""
    return config.model_copy(update={"limits": worker_share(config.limits, workers)})


def with_limits(config: Any, **values: Any) -> Any:
    """The config with the given limits set (None: keep the config's value), e.g. from the CLI."""
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return config
    return config.model_copy(update={"limits": Limits(**{**config.limits.model_dump(), **given})})
