"""Concurrency that reaches the server: hello_chat sessions against a latency-bound model server.

Every model call takes ``--latency`` seconds at a stdlib OpenAI-compatible server on 127.0.0.1
(bench/latency_server.py, in its own process), so with ``n`` sessions in flight and ``t`` calls per session the ideal
is ``n / (t * latency)`` sessions/s. Printed, side by side in one run:

* convsim's runner (async executor, trace on) at 1, 8 and 32 sessions in flight, efficiency =
  measured / ideal over the whole run ("eff.") and in its steady part ("steady": the sessions landed
  between the first and the last ``n`` landings, without ramp-up, worker start-up and tail), and
  the CPU ms spent per model call (this process and the workers); the same with the sessions
  spread over two worker processes (``--executor process --workers 2``); with ``--steps`` also the
  runner with every fix undone ("before") and with each fix undone alone ("only: ..."): the
  runner's thread pool, fsync, stream mode, and the model-call path (ChatOpenAI, the SDK's httpx
  client, a tenacity ``Retrying`` per call, and with ``--judge`` the JSON schema per structured call);
  with ``--limits`` also with run limits that never bind, in one process and over two workers
  (what asking the run's limits costs per call);
* the same work through openevals' ``run_multiturn_simulation`` (one session after another, as its
  users run it), and the ratio convsim / openevals;
* LangGraph's bare ``stream`` (values only) of the same sessions, same model client and server, in
  1, 8 and 32 threads: what LangGraph reaches with that many sessions in flight and nothing of the
  runner around it (no trace, record, file or summary), and the runner's rate as a share of it;
* the one-process ceiling: the user CPU per session of that bare stream. One GIL runs at most 1 /
  that many sessions/s, so no executor in one process can pass that share of the ideal, whatever
  the runner does around the graph. Printed twice: one session after another in one thread against
  a server that answers at once (warm caches: the least a session needs), and in the 32 threads
  against the bench's server, where each session waits for the model between its steps and shares
  the core (what a session costs there: on the 2-core machines here ~1.2-1.6x the warm figure).

With ``--llamacpp`` it also runs a few sessions against llama-cpp-python's real server and prints the
platform's share of wall time (everything but waiting for the model). With ``--judge`` every turn
also calls hello_chat's judge (structured output; the server answers JSON mode with a fixed valid
verdict) and the openevals comparison is left out. Usage:
    python bench/concurrency.py [--steps] [--judge] [--latency 0.05] [--turns 6] [--seconds 1.0]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from unittest import mock
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency_server import LatencyServerProcess  # noqa: E402
from planned import compiled_plan  # noqa: E402
from convsim.providers import models, openai_client, retry  # noqa: E402
from convsim.running import runner, session, store  # noqa: E402
from convsim.config import config_from_dict  # noqa: E402
from convsim.running.plan import plan_run  # noqa: E402
from convsim.running.store import RunStore  # noqa: E402

IN_FLIGHT = (1, 8, 32)


ROLES = ["agent"]  # --judge adds hello_chat's judge (a structured JSON verdict each turn)


def convsim_rate(spec: str, turns: int, in_flight: int, sessions: int, out: str,
                 extra: dict | None = None) -> tuple[float, int, float, float]:
    """sessions/s, model calls, CPU ms per model call (this process and its finished children: the
    runner, the client, and process workers), and the steady sessions/s: those landed between the
    first and the last ``in_flight`` landings (no ramp-up, worker start-up or tail).
    ``extra``: config keys, e.g. ``{"executor": "process", "workers": 2}``."""
    cfg = config_from_dict({"name": "conc", "graph": "hello_chat", "sessions": sessions, "seed": 0,
                            "params": {"n_turns": turns, "n_sessions": sessions}, "concurrency": in_flight,
                            "analysis": [], "out_dir": out, "run_id": f"c{in_flight}-{time.time_ns()}",
                            "models": {role: spec for role in ROLES}, **(extra or {})})
    plan = plan_run(cfg)
    landed: list[float] = []

    def land(*args, **kwargs):
        real_land(*args, **kwargs)
        landed.append(time.perf_counter())
    real_land = runner.land
    started, cpu = time.perf_counter(), _cpu_with_children()
    with mock.patch.object(runner, "land", land):
        run_dir = asyncio.run(runner.execute(plan, show_progress=False))
    wall, cpu = time.perf_counter() - started, _cpu_with_children() - cpu
    recs = RunStore(run_dir).records()
    assert len(recs) == sessions and all(r["status"] == "ok" for r in recs), recs[0].get("error")
    calls = sum(len(r["llm_calls"]) for r in recs)
    n = in_flight
    steady = ((sessions - 2 * n) / (landed[-n - 1] - landed[n - 1]) if sessions > 2 * n
              else sessions / wall)
    return sessions / wall, calls, 1000 * cpu / max(calls, 1), steady


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its children that ended (the process executor's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def openevals_rate(base_url: str, turns: int, sessions: int) -> float:
    """The same sessions (same questions, same agent call) through openevals, one after another."""
    from langchain_openai import ChatOpenAI
    from openevals.simulators import run_multiturn_simulation
    sys.path.insert(0, str(ROOT / "graphs"))
    from hello_chat import FACTS
    model = ChatOpenAI(model="fake", base_url=base_url, api_key="none", temperature=0.0, max_retries=0)
    topics = sorted(FACTS)[:turns]

    def app(inputs, **kwargs):
        text = model.invoke([("system", "Answer in one short sentence."), ("user", inputs["content"])]).content
        return {"role": "assistant", "content": text}
    started = time.perf_counter()
    for i in range(sessions):
        run_multiturn_simulation(app=app, user=[f"What is the {t}?" for t in topics], max_turns=turns,
                                 thread_id=f"oe-{i}")
    return sessions / (time.perf_counter() - started)


def openevals_side_by_side(base_url: str, args, per_session: float, best: dict[int, float]) -> None:
    k = sessions_for(1, 1 / per_session, args.seconds * 2)
    oe = openevals_rate(base_url, args.turns, k)
    print(f"{'openevals, sequential':36s} {1:9d} {k:8d} {oe:8.2f} "
          f"{1 / per_session:8.2f} {oe * per_session:6.0%}")
    for n in IN_FLIGHT:
        print(f"convsim at {n:2d} in flight / openevals sequential: {best[n] / oe:5.2f}x")


# ----------------------------------------------------------------------------- the steps

class _Step:
    """A way the runner ran before a fix, switched on for one measurement (then restored):
    ``patches()`` lists the ``(owner, attribute, value)`` set while the step is on;
    ``config(n)`` the run's config keys at ``n`` sessions in flight."""
    name = "after: every fix"
    rebuild_backends = False  # model clients are cached: drop them on entry and exit

    def patches(self) -> list[tuple]:
        return []

    def config(self, in_flight: int) -> dict:
        return {}

    def __enter__(self):
        self._stack = ExitStack()
        for owner, attribute, value in self.patches():
            self._stack.enter_context(mock.patch.object(owner, attribute, value))
        if self.rebuild_backends:
            models._BACKENDS.clear()
        return self

    def __exit__(self, *exc):
        self._stack.close()
        if self.rebuild_backends:
            models._BACKENDS.clear()
        return False


class _OldThreadPool(_Step):
    """asyncio's default pool: min(32, cores + 4) threads, whatever --concurrency asks."""
    name = "only: default thread pool"

    def patches(self):
        return [(runner, "session_pool", lambda concurrency: ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4)))]


class _FsyncEveryRecord(_Step):
    name = "only: fsync every record"

    def patches(self):
        return [(store, "FSYNC_EVERY", 1), (store, "FSYNC_SECONDS", 0.0)]


class _CustomStream(_Step):
    """Live metrics through LangGraph's ``custom`` stream mode (turns off its fast path)."""
    name = "only: metrics on the custom stream"

    def patches(self):
        real = session._Session.__init__

        def init(s, *a, **k):
            real(s, *a, **k)
            s.modes = ["values", "custom"] + s.modes[1:]
            s.ctx.event_sink = None
        return [(session._Session, "__init__", init)]


def _chat_openai(spec, timeout: float = 120.0):
    """How an ``openai:`` model was built before: langchain-openai's ChatOpenAI (over the SDK, httpx)."""
    from convsim.providers.openai_client import langchain_equivalent
    return langchain_equivalent(spec, timeout)


class _ChatOpenAI(_Step):
    """Model calls through ChatOpenAI (LangChain callbacks, the SDK's param transform and parsing)."""
    name = "only: ChatOpenAI per model call"
    rebuild_backends = True

    def patches(self):
        real = models._make_backend
        return [(models, "_make_backend",
                 lambda spec, *a: _chat_openai(spec, *a) if spec.provider == "openai" else real(spec, *a))]


class _SdkClient(_Step):
    """The same request through the openai SDK's client (httpx) instead of the stdlib pooled client."""
    name = "only: openai SDK client (httpx)"
    rebuild_backends = True

    def patches(self):
        return [(openai_client, "TRANSPORT", "sdk")]


def _tenacity_call_with_retry(fn, policy, *, on_fault=None, sleep=None):
    """The retry wrapper as it was: a tenacity ``Retrying`` built and run for every call."""
    import time as _time
    from tenacity import Retrying, retry_if_exception, stop_after_attempt

    def is_fault(exc):
        kind = retry.infra_fault(exc)
        if kind is not None and on_fault is not None:
            on_fault(exc, kind)
        return kind is not None
    return Retrying(stop=stop_after_attempt(policy.attempts), wait=retry.backoff_wait(policy),
                    retry=retry_if_exception(is_fault), reraise=True,
                    sleep=sleep or (lambda s: _time.sleep(s)))(fn)


def _to_messages_importing(messages):
    """Message conversion as it was: langchain_core's classes imported on every call."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    if isinstance(messages, str):
        return [HumanMessage(messages)]
    out = []
    for m in messages:
        if isinstance(m, BaseMessage):
            out.append(m)
            continue
        role, content = (m["role"], m["content"]) if isinstance(m, dict) else m
        cls = {"system": SystemMessage, "user": HumanMessage, "human": HumanMessage,
               "assistant": AIMessage, "ai": AIMessage}[role]
        out.append(cls(content))
    return out


class _TenacityPerCall(_Step):
    """Also LangChain message objects built for every call (imports included), which the openai
    path turned back into dicts (models._to_chat_messages now builds those directly)."""
    name = "only: tenacity + imports per call"

    def patches(self):
        return [(models, "call_with_retry", _tenacity_call_with_retry),
                (models, "_to_messages", _to_messages_importing),
                (models, "_to_chat_messages", _to_messages_importing)]


class _SchemaPerCall(_Step):
    """pydantic's JSON schema of the answer type rebuilt on every structured call (~0.3 ms)."""
    name = "only: JSON schema built per call"

    def patches(self):
        return [(models, "schema_json", lambda schema: json.dumps(schema.model_json_schema()))]


STEPS = (_OldThreadPool, _FsyncEveryRecord, _CustomStream, _ChatOpenAI, _SdkClient, _TenacityPerCall)
JUDGE_STEPS = (_SchemaPerCall,)  # only with --judge: the agent makes no structured call


class _OldCallPath(_Step):
    """Every model-call fix undone at once (the runner's fixes kept): the call path as it was."""
    name = "model-call path as it was"
    rebuild_backends = True

    def patches(self):
        return [p for step in (_ChatOpenAI, _TenacityPerCall, _SchemaPerCall) for p in step().patches()]


class _Before(_Step):
    name = "before: every fix off"
    rebuild_backends = True

    def patches(self):
        # ChatOpenAI already includes the SDK client: _SdkClient adds nothing on top of it
        return [p for step in STEPS + (JUDGE_STEPS if "judge" in ROLES else ()) if step is not _SdkClient
                for p in step().patches()]


class _TwoProcesses(_Step):
    """Every fix, and the sessions spread over two worker processes (``--executor process
    --workers 2``), each running half of them in threads: two GILs instead of one."""
    name = "after, 2 worker processes"

    def config(self, in_flight: int) -> dict:
        return {"executor": "process", "workers": min(2, in_flight)}


class _LimitsNeverBinding(_Step):
    """Every fix, with run limits that never bind (``max_in_flight: 1000000``): every call is admitted
    by the run's limits: in this process (async), or, with ``workers``, by asking the one RunLimits
    the driver serves from a manager process (two round trips a call: limits.LimitsClient)."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self.name = "limits on (never binding)" + (f", {workers} workers" if workers > 1 else "")

    def config(self, in_flight: int) -> dict:
        where = {"executor": "process", "workers": min(self.workers, in_flight)} if self.workers > 1 else {}
        return {**where, "limits": {"max_in_flight": 1_000_000}}


def bare_sessions(spec: str, turns: int, out: str, sessions: int):
    """``run(units) -> final states``, and the units: the bench's hello_chat sessions streamed by
    LangGraph's bare ``stream`` (values only), with the session context and model client the runner
    gives them, one after another in the calling thread, and nothing else (no trace, record, file or
    summary). Their final states are the runner's records' states (tests/test_concurrency_bench.py)."""
    plan, compiled, units = compiled_plan({
        "name": "ceiling", "graph": "hello_chat", "sessions": sessions, "seed": 0,
        "params": {"n_turns": turns, "n_sessions": sessions}, "concurrency": 1, "trace": False,
        "analysis": [], "out_dir": out, "run_id": f"ceil-{time.time_ns()}",
        "models": {role: spec for role in ROLES}}, sessions)

    def run(batch) -> list[dict]:
        finals = []
        for unit in batch:
            s = session._Session(plan, unit, lambda event: None)
            for final in compiled.stream(s.input, s.config, context=s.ctx, stream_mode="values"):
                pass
            finals.append(final)
        return finals
    return run, units


def one_process_ceiling(spec: str, turns: int, out: str, sessions: int = 60) -> tuple[float, float]:
    """The least CPU a session of the bench needs in one process, ``(user, system)`` seconds of this
    thread: the same sessions through :func:`bare_sessions`. Python runs in user time, holding the
    GIL; the kernel's part (socket reads and writes, waking the thread) runs without it. So one
    process runs at most ``1 / user`` sessions/s, whatever the runner does around them: the ceiling
    of any executor in one process. ``spec`` should answer at once (latency 0): the server's wait
    is not CPU."""
    run, units = bare_sessions(spec, turns, out, sessions)
    run(units[:4])  # warm-up: the client's connection, caches
    least = (float("inf"), 0.0)
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_THREAD)
        run(units)
        after = resource.getrusage(resource.RUSAGE_THREAD)
        least = min(least, ((after.ru_utime - before.ru_utime) / len(units),
                            (after.ru_stime - before.ru_stime) / len(units)))
    return least


def bare_stream_rate(spec: str, turns: int, in_flight: int, sessions: int, out: str) -> tuple[float, float, float]:
    """LangGraph's bare ``stream`` of the bench's sessions (:func:`bare_sessions`: no trace, record,
    file or summary) in ``in_flight`` threads, each streaming its share one session after another,
    against the same server as the runner: what LangGraph and the model client reach with that
    many sessions in flight and nothing of the runner around them. Returns sessions/s, the
    process's CPU ms per model call (as :func:`convsim_rate` counts it), and the user CPU ms per
    session of the streaming threads themselves (``RUSAGE_THREAD``, summed over the threads)."""
    run, units = bare_sessions(spec, turns, out, sessions)
    user: list[float] = []

    def stream_share(batch) -> None:
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_utime
        run(batch)
        user.append(resource.getrusage(resource.RUSAGE_THREAD).ru_utime - before)
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(stream_share, [units[i::in_flight] for i in range(in_flight)]))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return sessions / wall, 1000 * cpu / (sessions * turns * len(ROLES)), 1000 * sum(user) / sessions


def print_ceiling(spec_at_once: str, args, per_session: float, busy_user: float) -> None:
    """What one process could reach at most. First :func:`one_process_ceiling`, against a server that
    answers at once, with the model client and with model ``none``: the least CPU a session needs,
    with the caches warm. Then ``busy_user``, the user CPU per session of LangGraph's bare stream in
    as many threads as the last in-flight level, against the bench's own server
    (:func:`bare_stream_rate`): what a session costs where it waits for the model between steps and
    shares the core with other sessions. That one bounds the runner's rate at that level."""
    n = max(IN_FLIGHT)

    def bound(user_ms: float) -> str:
        return (f"at most {1000 / user_ms:.1f} sessions/s in one GIL = {1000 / user_ms / (n / per_session):.0%} "
                f"of the ideal at {n} in flight")
    with tempfile.TemporaryDirectory() as out:
        for label, spec in (("LangGraph's bare stream + the model client", spec_at_once),
                            ("LangGraph's bare stream alone (model none)", "none")):
            user, system = one_process_ceiling(spec, args.turns, out)
            print(f"one-process ceiling, warm (a server that answers at once), {label}: {1000 * user:.2f} ms "
                  f"of user CPU per session (+ {1000 * system:.2f} ms in the kernel) -> {bound(1000 * user)}")
    print(f"one-process ceiling, at {args.latency * 1000:.0f} ms a call: LangGraph's bare stream in {n} threads "
          f"(above) spends {busy_user:.2f} ms of user CPU per session in its threads -> {bound(busy_user)}")


def sessions_for(in_flight: int, ideal: float, seconds: float) -> int:
    return max(in_flight, int(round(ideal * seconds / in_flight)) * in_flight)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--turns", type=int, default=6, help="agent calls per session")
    ap.add_argument("--seconds", type=float, default=1.5, help="ideal duration of each measurement")
    ap.add_argument("--repeat", type=int, default=3, help="median of this many runs per cell")
    ap.add_argument("--steps", action="store_true", help="also measure the runner before each fix")
    ap.add_argument("--llamacpp", action="store_true", help="also measure the platform share on llama.cpp")
    ap.add_argument("--limits", action="store_true",
                    help="also run with limits that never bind, in one process and over 2 workers (their cost)")
    ap.add_argument("--judge", action="store_true",
                    help="also call hello_chat's judge each turn (structured output; no openevals comparison)")
    args = ap.parse_args()
    if args.judge:
        ROLES.append("judge")
    steps = ([_Before()] + [step() for step in STEPS + (JUDGE_STEPS if args.judge else ())]
             + [_OldCallPath(), _Step()] if args.steps else [_Step()]) + [_TwoProcesses()]
    if args.limits:
        steps += [_LimitsNeverBinding(), _LimitsNeverBinding(workers=2)]
    verdict = '{"correct": true, "reason": "a fixed verdict"}'
    with LatencyServerProcess(args.latency, idle_s=60, json_answer=verdict) as base_url, \
            tempfile.TemporaryDirectory() as out:
        spec = f"openai:fake@{base_url}"
        convsim_rate(spec, args.turns, 4, 8, out)  # warm-up: imports, client, connections
        calls_per_session = args.turns * len(ROLES)
        per_session = calls_per_session * args.latency
        print(f"hello_chat, {calls_per_session} model calls per session ({', '.join(ROLES)}), "
              f"{args.latency * 1000:.0f} ms per call (ideal: n / {per_session:.2f} s sessions/s)")
        print(f"{'runner':36s} {'in flight':>9s} {'sessions':>8s} {'sess/s':>8s} {'ideal':>8s} {'eff.':>6s} "
              f"{'steady':>6s} {'CPU ms/call':>11s}")
        # Round robin: each repeat measures every step in turn, so a machine whose load drifts during
        # the run (other jobs) shifts every step alike instead of whichever step ran last.
        runs: dict[tuple[int, int], list] = {(i, n): [] for i in range(len(steps)) for n in IN_FLIGHT}
        bare: dict[int, list] = {n: [] for n in IN_FLIGHT}  # LangGraph's bare stream in n threads
        for n in IN_FLIGHT:
            k = sessions_for(n, n / per_session, args.seconds)
            for _ in range(args.repeat):
                for i, step in enumerate(steps):
                    with step:
                        extra = step.config(n)
                        if not extra:  # warm-up: a step's imports and clients (workers start afresh)
                            convsim_rate(spec, args.turns, n, n, out)
                        runs[i, n].append(convsim_rate(spec, args.turns, n, k, out, extra))
                bare[n].append(bare_stream_rate(spec, args.turns, n, k, out))
        best: dict[int, float] = {}
        goal: dict[str, tuple[float, float]] = {}
        for i, step in enumerate(steps):
            for n in IN_FLIGHT:
                ideal, k = n / per_session, sessions_for(n, n / per_session, args.seconds)
                rate, calls, cpu, _ = sorted(runs[i, n])[len(runs[i, n]) // 2]  # the median run
                steady = sorted(r[3] for r in runs[i, n])[len(runs[i, n]) // 2]
                assert calls == k * calls_per_session
                if type(step) is _Step:
                    best[n] = rate
                if n == max(IN_FLIGHT) and type(step) in (_Step, _TwoProcesses, _LimitsNeverBinding):
                    goal[step.name] = (rate / ideal, steady / ideal)
                print(f"{step.name:36s} {n:9d} {k:8d} {rate:8.2f} {ideal:8.2f} {rate / ideal:6.0%} "
                      f"{steady / ideal:6.0%} {cpu:11.2f}")
        bare_rate, bare_user = {}, {}
        for n in IN_FLIGHT:
            ideal, k = n / per_session, sessions_for(n, n / per_session, args.seconds)
            rate, cpu, user = sorted(bare[n])[len(bare[n]) // 2]  # the median run
            bare_rate[n], bare_user[n] = rate, sorted(r[2] for r in bare[n])[len(bare[n]) // 2]
            print(f"{'LangGraph bare stream, n threads':36s} {n:9d} {k:8d} {rate:8.2f} {ideal:8.2f} "
                  f"{rate / ideal:6.0%} {'':>6s} {cpu:11.2f}")
        for name, (whole, steady) in goal.items():
            print(f"goal >= 90% of ideal at {max(IN_FLIGHT)} in flight, {name}: {whole:.0%} over the run, "
                  f"{steady:.0%} steady")
        for n in IN_FLIGHT:
            print(f"runner / LangGraph's bare stream in as many threads, {n:2d} in flight: "
                  f"{best[n] / bare_rate[n]:.0%}")
        with LatencyServerProcess(0.0, idle_s=60, json_answer=verdict) as at_once:
            print_ceiling(f"openai:fake@{at_once}", args, per_session, bare_user[max(IN_FLIGHT)])
        if not args.judge:  # openevals' loop below calls the agent only
            openevals_side_by_side(base_url, args, per_session, best)
    if args.llamacpp:
        platform_share()


def platform_share(sessions: int = 4, turns: int = 2) -> None:
    """hello_chat against llama-cpp-python's server: wall time not spent waiting for the model."""
    import subprocess
    import urllib.request
    from convsim.providers.llamacpp import gemma3_270m_path
    with tempfile.TemporaryDirectory() as out:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(Path(out) / "server.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gemma3_270m_path()),
                                 "--model_alias", "gemma3-270m", "--host", "127.0.0.1", "--port", str(port),
                                 "--chat_format", "gemma", "--n_threads", "1", "--n_threads_batch", "1"],
                                stdout=log, stderr=log, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}/v1"
            for _ in range(240):
                try:
                    urllib.request.urlopen(base + "/models", timeout=1)
                    break
                except OSError:
                    time.sleep(0.5)
            spec = {"spec": f"openai:gemma3-270m@{base}", "max_tokens": 16, "temperature": 0.0, "seed": 1}

            def run(run_id: str, n: int):
                cfg = config_from_dict({"name": "share", "graph": "hello_chat", "sessions": n, "seed": 0,
                                        "params": {"n_turns": turns}, "concurrency": 1, "analysis": [],
                                        "out_dir": out, "run_id": run_id, "models": {"agent": spec}})
                started = time.perf_counter()
                run_dir = asyncio.run(runner.execute(plan_run(cfg), show_progress=False))
                return time.perf_counter() - started, RunStore(run_dir).records()
            # a cold process first pays its imports and the graph's compilation (~0.3 s): measured
            # apart, then the same work again in the warm process
            for label, run_id in (("cold process", "share-cold"), ("warm process", "share")):
                wall, recs = run(run_id, sessions)
                model = sum(c["latency_s"] for r in recs for c in r["llm_calls"])
                in_sessions = sum(r["elapsed_s"] for r in recs)
                print(f"llama.cpp server, gemma3-270m, {sessions} sessions x {turns} calls, 1 in flight, {label}: "
                      f"wall {wall:.2f} s, waiting for the model {model:.2f} s, platform share "
                      f"{(wall - model) / wall:.1%} of the run ({(in_sessions - model) / in_sessions:.1%} "
                      "within the sessions)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":  # (the server process is spawned: keep this guard)
    main()
