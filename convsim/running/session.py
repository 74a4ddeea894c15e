"""One session attempt: build its context, stream the graph, and turn the outcome into a record.

Both executors use this: the asyncio executor (in a worker thread, or natively async for graphs
with ``async def`` nodes) and the process pool (inside worker processes). Nothing here writes
files; the caller lands the outcome through the run's single writer.
"""
from __future__ import annotations

import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from convsim.errors import AgentError, ConvsimError, SimulatorError
from convsim.results.recordset import check_record
from convsim.providers import stopping
from convsim.providers.models import ChatModel, ModelUnavailable
from convsim.running.status import Status
from convsim.running.store import dumps
from convsim.traces.tracing import TraceRecorder, append_channels, ordered_calls
from convsim.providers.usage import call_tokens


@dataclass
class Unit:
    variant: str
    session_id: str
    trial: int
    seed: int
    init: dict = field(repr=False)
    # set by convsim.fork: {"checkpoint_id", "trace" (the original's trace cut at the fork), "fork"}
    resume: dict | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.variant, self.session_id, self.trial)


@dataclass
class Outcome:
    """What a session attempt produced: its record, and for infra/code errors a line for errors.jsonl."""

    unit_key: tuple[str, str, int]
    record: dict | None = None
    error_entry: dict | None = None  # written to errors.jsonl (infra_error and code_error)
    trace: TraceRecorder | None = None
    record_line: str | None = None  # the record as its results.jsonl line, encoded where the session ran
    events: list = field(default_factory=list)  # custom-stream events (for a remote progress bar)
    spent: tuple[int, int] = (0, 0)  # model calls sent and tokens spent (cache hits excluded): the run budget's view


def variant_constants(vp: Any) -> dict:
    """What every session of a variant computes alike, once per compiled graph: the State's
    ``operator.add`` channels (the trace recorder's ``append_keys``) and the params as a record
    holds them. Per session they cost ~65 us, ~1% of a hello_chat session's CPU (bench/session_cpu.py)."""
    if vp.constants is None or vp.constants[0] is not vp.compiled:
        vp.constants = (vp.compiled, {
            "append_keys": append_channels(vp.compiled.channels) if vp.compiled is not None else frozenset(),
            # n_sessions is the run's size (set from --sessions), not a setting of this session:
            # left out so that a run extended from 2 to 4 sessions records what a fresh one does
            "params": vp.params.model_dump(mode="json", exclude={"n_sessions"})})
    return vp.constants[1]


def trace_path(run_dir: Path, variant: str, session_id: str, trial: int) -> Path:
    suffix = f"__t{trial}" if trial else ""
    return Path(run_dir) / "traces" / variant / f"{session_id}{suffix}.jsonl"


class _Session:
    """The mutable pieces of one streaming session."""

    def __init__(self, plan: Any, unit: Unit, observe: Callable[[Any], None]) -> None:
        cfg, self.vp = plan.config, plan.variants[unit.variant]
        self.plan, self.unit, self.observe = plan, unit, observe
        self.calls: list[dict] = []
        self.call_marks: list[int] = []  # len(self.calls) as each superstep ended (see ordered_calls)
        self.unavailable: list[str] = []  # each ModelUnavailable a handle raised, caught or not
        scope, seen = f"{unit.variant}/{unit.session_id}/t{unit.trial}", {}
        tasks = {} if cfg.trace else None  # which task made each call: the trace's steps of a Send fan-out
        models = {role: ChatModel(spec=spec, role=role, calls=self.calls, cache=plan.cache, retry=cfg.retry,
                                  unavailable=self.unavailable, cache_scope=scope, cache_seen=seen,
                                  call_tasks=tasks)
                  for role, spec in self.vp.models.items()}
        self.ctx = plan.module.Context(params=self.vp.params, models=models, embedder_spec=cfg.embedder,
                                       seed=unit.seed, session_id=unit.session_id, trial=unit.trial,
                                       run_dir=str(plan.run_dir))
        self.init = {"session_id": unit.session_id, "transcript": [], "turn_metrics": [],
                     "dialogue_metrics": {}, **unit.init}
        resume = unit.resume
        self.recorder = (TraceRecorder(resume["trace"]["initial"] if resume else self.init, self.calls,
                                       prefix=resume and resume["trace"], fork=resume and resume["fork"],
                                       append_keys=variant_constants(self.vp)["append_keys"], call_tasks=tasks)
                         if cfg.trace else None)
        self.config: dict = {"recursion_limit": 100_000}
        if self.vp.compiled.checkpointer is not None or resume:
            # a thread id only means something to a checkpointer; without one, LangGraph would
            # still merge it into every task's metadata
            thread = f"{unit.variant}/{unit.session_id}/t{unit.trial}"
            self.config["configurable"] = {"thread_id": thread}
        self.input: dict | None = self.init
        if resume:  # time travel: continue the copied checkpoint instead of starting from init
            self.config["configurable"]["checkpoint_id"] = resume["checkpoint_id"]
            self.input = None
        self.modes = ["values"] + (["updates", "tasks"] if self.recorder else [])
        self.ctx.event_sink = lambda event: self.handle("custom", event)  # see context.emit_metrics
        # what an agent slot's adapter (convsim.slots) records its calls in and keys its per-session state by
        self.ctx.agent_session = {"key": scope, "calls": self.calls, "unavailable": self.unavailable,
                                  "retry": cfg.retry, "call_tasks": tasks}
        if resume and (resume["fork"] or {}).get("inner"):
            # a fork inside a graph agent: its adapter resumes the agent's graph from that checkpoint
            # (once: the session's later turns run it as usual; see GraphAgent)
            self.ctx.agent_session["resume_inner"] = dict(resume["fork"]["inner"])
        # a graph agent runs inside a node: its inner steps come on the subgraph stream (traced runs only)
        self.subgraphs = bool(getattr(self.vp, "subgraphs", False)) and self.recorder is not None
        self.final: dict = self.init
        self.started = time.perf_counter()

    def end(self) -> None:
        """The attempt ended (finished, failed, stopped): the agent slots' adapters forget its state
        (convsim.slots.nodes.end_session), so a long run holds no finished session's graph state or
        endpoint conversation. Nothing to do when no adapter was ever made in this process (the
        module is not imported then)."""
        nodes = sys.modules.get("convsim.slots.nodes")
        if nodes is not None:
            nodes.end_session(self.ctx.agent_session["key"])

    def earlier_thread(self) -> str | None:
        """The checkpointer thread of a session that starts from its initial state, whose checkpoints
        must go first: an earlier attempt of it (cut by an outage or the run budget, or a killed run)
        left some, and LangGraph would continue that thread, adding the initial input to the state
        it reached (the transcript of the cut attempt, then the new one). None without a
        checkpointer, and for a fork, which continues its checkpoint on purpose."""
        if self.unit.resume or self.vp.compiled.checkpointer is None:
            return None
        return self.config["configurable"]["thread_id"]

    def handle_sub(self, item: tuple) -> None:
        """A ``subgraphs=True`` stream item ``(namespace, mode, chunk)``: the session graph's own go to
        :meth:`handle`; a subgraph's updates become inner trace steps, the rest is its own business."""
        namespace, mode, chunk = item
        if not namespace:
            self.handle(mode, chunk)
        elif mode == "updates":
            self.recorder.on_inner_updates(namespace, chunk)
        elif mode == "tasks":
            self.recorder.on_inner_task(namespace, chunk)

    def handle(self, mode: str, chunk: Any) -> None:
        if mode == "values":
            self.final = chunk
            self.call_marks.append(len(self.calls))  # a superstep ended: its calls are all in
            if self.recorder:
                self.recorder.on_values(chunk)
        elif mode == "updates":
            self.recorder.on_updates(chunk)
        elif mode == "tasks":
            self.recorder.on_task(chunk)
        elif mode == "custom":
            if self.recorder:
                self.recorder.on_custom(chunk)
            self.observe(chunk)

    def outcome(self, exc: BaseException | None) -> Outcome:
        if isinstance(exc, ConvsimError):
            raise exc  # bad input (a malformed catalog...) stops the run with one clear line
        if self.recorder and (exc is not None or self.unavailable):  # the trace ends with what ended it
            self.recorder.on_failure(f"{type(exc).__name__}: {exc}" if exc is not None else
                                     f"ModelUnavailable (caught by graph code): {self.unavailable[0]}")
        if isinstance(exc, ModelUnavailable):
            # infrastructure, not the agent: never scored, run again on resume
            return self._failed(Status.INFRA_ERROR, f"ModelUnavailable: {exc}")
        if self.unavailable:
            # graph code caught a server fault and went on (a rule-based fallback, a recorded agent
            # failure...): what it produced is not the model's, so the session is not scored either
            return self._failed(Status.INFRA_ERROR, f"ModelUnavailable (caught by graph code, which went "
                                f"on without the model): {self.unavailable[0]}")
        status, error = Status.OK, None
        if exc is not None:
            # AgentError: the system under test failed (scored); SimulatorError: the simulator or a
            # judge failed (counted, not scored); anything else is a bug in graph code (re-run on resume)
            status = (Status.AGENT_FAILURE if isinstance(exc, AgentError) else
                      Status.SIMULATOR_FAILURE if isinstance(exc, SimulatorError) else Status.CODE_ERROR)
            error = error_text(exc)
        if status == Status.CODE_ERROR:
            return self._failed(status, error)
        flags = graph_checks(self.plan.module, "simulator_checks", self.final) if status == Status.OK else []
        if flags:
            status = Status.SIMULATOR_FAILURE
        # a failure the graph caught and recorded in its state (it ended the dialogue gracefully):
        # still the agent's failure, scored as such, never a silent "ok"
        agent_flags = graph_checks(self.plan.module, "agent_checks", self.final) if status == Status.OK else []
        if agent_flags:
            status = Status.AGENT_FAILURE
        record = self._record(status, error, flags, agent_flags)
        try:  # what every reader of results.jsonl checks (resume, the summary, report, compare)
            check_record(record, file="the session's final state")
        except ConvsimError as exc:
            # a bug in graph code (dialogue_metrics a list, a turn metric that is no object): a code
            # error, re-run on resume, never a record the summary and resume would then refuse
            return self._failed(Status.CODE_ERROR, f"the graph's final state is no result record: {exc.message}")
        return self._outcome(record)

    def _record(self, status: Status, error: str | None, flags: list[dict], agent_flags: list[dict]) -> dict:
        unit, cfg = self.unit, self.plan.config
        record = {**self.final, "run_id": cfg.run_id, "variant": unit.variant,
                  "session_id": unit.session_id, "trial": unit.trial, "seed": unit.seed,
                  "status": status.value, "error": error, "simulator_flags": flags, "agent_flags": agent_flags,
                  "models": {r: s.settings for r, s in self.vp.models.items()},
                  # the agent spec filling each of the graph's slots (convsim.slots), when it declares any
                  **({"agents": {r: a.text for r, a in self.vp.agents.items()}} if self.vp.agents else {}),
                  # n_sessions is the run's size (set from --sessions), not a setting of this session:
                  # left out so that a run extended from 2 to 4 sessions records what a fresh one does
                  "params": dict(variant_constants(self.vp)["params"]),  # (its nested values shared, read only)
                  "llm_calls": ordered_calls(self.calls, self.call_marks),
                  "elapsed_s": round(time.perf_counter() - self.started, 4)}
        if unit.resume:
            record["forked_from"] = unit.resume["fork"]
        return record

    def _failed(self, status: Status, error: str) -> Outcome:
        """An attempt that must run again: its record (partial state kept for debugging, never
        scored: readers score ok/agent_failure only; a state key of the wrong shape for a result
        record is recorded as null) and an errors.jsonl line."""
        unit = self.unit
        entry = {"variant": unit.variant, "session_id": unit.session_id, "trial": unit.trial,
                 "status": status.value, "kind": "infrastructure" if status == Status.INFRA_ERROR else "code",
                 "error": error}
        record = self._record(status, error, [], [])
        for _ in range(len(record)):  # null each key check_record refuses, so every reader can read the run
            try:
                check_record(record, file="the session's final state")
                break
            except ConvsimError as exc:
                record[str(exc.field or "").split("[")[0].split(".")[0]] = None
        return self._outcome(record, entry)

    def _outcome(self, record: dict, error_entry: dict | None = None) -> Outcome:
        # the record and the trace are encoded here, in the session's thread or worker process:
        # the run's single writer (on the event loop, or the driver of a pool) only writes text
        return Outcome(self.unit.key, record=record, error_entry=error_entry, record_line=dumps(record),
                       trace=self.recorder.close() if self.recorder else None, spent=spent_by(self.calls))


_TASK_ID = re.compile(r" and id '[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}'")
TRACEBACK_FRAMES = 8  # the innermost: the node that raised and what it called


def error_text(exc: BaseException) -> str:
    """A failed session's error as its record and errors.jsonl keep it: the exception line, then the
    innermost frames of its traceback. The same text wherever the session ran (the executor never
    changes results): file paths relative to the import root that holds them (a cluster worker's
    unpacked working_dir, site-packages, the project), and LangGraph's note on the failed task
    without the task's random id."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES))
    # the directory holding the convsim package (an editable install's checkout, or site-packages)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    roots = sorted({os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)} | {here},
                   key=len, reverse=True)
    for root in roots:
        text = text.replace(f'File "{root}{os.sep}', 'File "')
    return f"{type(exc).__name__}: {exc}\n" + _TASK_ID.sub("", text)


def spent_by(calls: list[dict]) -> tuple[int, int]:
    """Model calls sent to a server and the tokens they spent (cache hits cost nothing)."""
    sent = [c for c in calls if not c.get("cache_hit")]
    return len(sent), sum(call_tokens(c) for c in sent)


def graph_checks(module: Any, hook: str, state: dict) -> list[dict]:
    """The flags a graph's ``hook`` finds in a finished session's state (``[]`` when it has none).

    A graph file may define ``simulator_checks(state)`` (flags mark the session
    ``simulator_failure``: the simulated user broke persona, ended early, leaked its goal...,
    which keeps it out of agent scores) and ``agent_checks(state)`` (flags mark it
    ``agent_failure``: an agent failure the graph caught and recorded in its state). Each flag is
    ``{"check": name, "detail": text}``.
    """
    checks = getattr(module, hook, None)
    if not callable(checks):
        return []
    return [dict(f) for f in (checks(state) or [])]


def run_session_blocking(plan: Any, unit: Unit, observe: Callable[[Any], None]) -> Outcome | None:
    """Stream one session with the graph's sync API (every node is a plain function)."""
    s = _Session(plan, unit, observe)
    if (thread := s.earlier_thread()) is not None:
        s.vp.compiled.checkpointer.delete_thread(thread)
    try:
        if s.subgraphs:
            for item in s.vp.compiled.stream(s.input, s.config, context=s.ctx, stream_mode=s.modes, subgraphs=True):
                s.handle_sub(item)
                stopping.check()  # a stopped run abandons the session at its next node boundary
        else:
            for mode, chunk in s.vp.compiled.stream(s.input, s.config, context=s.ctx, stream_mode=s.modes):
                s.handle(mode, chunk)
                stopping.check()
    except stopping.RunStopped:
        return None  # abandoned: nothing written, it runs again on resume
    except Exception as exc:  # noqa: BLE001 — classified in outcome()
        if stopping.requested():  # a failure the stop caused (a cancelled call graph code wrapped)
            return None
        return s.outcome(exc)
    finally:
        s.end()
    return s.outcome(None)


async def run_session_async(plan: Any, unit: Unit, observe: Callable[[Any], None]) -> Outcome | None:
    """Stream one session with the graph's async API (graphs with ``async def`` nodes)."""
    s = _Session(plan, unit, observe)
    if (thread := s.earlier_thread()) is not None:
        await s.vp.compiled.checkpointer.adelete_thread(thread)
    try:
        if s.subgraphs:
            async for item in s.vp.compiled.astream(s.input, s.config, context=s.ctx, stream_mode=s.modes,
                                                    subgraphs=True):
                s.handle_sub(item)
                stopping.check()  # a stopped run abandons the session at its next node boundary
        else:
            async for mode, chunk in s.vp.compiled.astream(s.input, s.config, context=s.ctx,
                                                           stream_mode=s.modes):
                s.handle(mode, chunk)
                stopping.check()
    except stopping.RunStopped:
        return None  # abandoned: nothing written, it runs again on resume
    except Exception as exc:  # noqa: BLE001 — classified in outcome()
        if stopping.requested():
            return None
        return s.outcome(exc)
    finally:
        s.end()
    return s.outcome(None)


def all_sync(graph: Any) -> bool:
    """Whether every node of a graph (compiled or not) can run synchronously (no ``async def`` node)."""
    nodes = getattr(graph, "builder", graph).nodes
    return all(getattr(spec.runnable, "func", None) is not None for spec in nodes.values())
