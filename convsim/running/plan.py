"""Planning a run: the graph module, every variant's params and models, and the session attempts.

Shared by every executor (the runner in the parent, the process-pool and Ray workers), so that
each one plans the same deterministic list of session attempts from the same config.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import ValidationError

from convsim.config import ExperimentConfig, path_component
from convsim.errors import ConvsimError
from convsim.contract.graphfile import load_graph_module
from convsim.providers.models import ChatModel, parse_model_spec
from convsim.running.prefix import attach_prefixes
from convsim.results.recordset import check_record
from convsim.contract.seeding import session_seed
from convsim.running.session import Unit
from convsim.running.sqlitewal import connect, switch_to_wal


#: a variant's session ids are checked for duplicates up to this many (the set stays bounded)
DUPLICATE_CHECK_LIMIT = 1_000_000


@dataclass
class VariantPlan:
    name: str
    params: Any
    models: dict[str, Any]  # role -> ModelSpec
    compiled: Any = None
    sync_nodes: bool = False  # every node has a sync implementation (see session.all_sync)
    channels: dict | None = None  # the State's channels, which every initial state is checked against
    agents: dict[str, Any] = field(default_factory=dict)  # role -> AgentSpec filling the graph's SLOTS
    subgraphs: bool = False  # a graph agent runs inside a node: its inner steps are traced (subgraph stream)
    # what every session of the variant would compute alike (convsim.running.session.variant_constants),
    # made once per compiled graph
    constants: tuple | None = field(default=None, repr=False)


@dataclass
class Plan:
    """What a run does. Session attempts are produced lazily by :meth:`iter_units` (from each
    variant's ``sessions()``), so planning 10,000,000 sessions allocates nothing per session."""

    config: ExperimentConfig
    module: Any
    variants: dict[str, VariantPlan]
    run_dir: Path
    cache: Any = None
    units: list[Unit] | None = None  # an explicit list (convsim fork); None: from sessions()
    warnings: list[str] = field(default_factory=list)  # e.g. a graph that yields fewer than --sessions
    source: str = "config"  # the config file (or "command line", "fork"): what bad-input lines name

    def base_context(self, vp: VariantPlan):
        """The variant's context with the base seed, as ``sessions()`` and ``preflight()`` see it."""
        cfg = self.config
        models = {role: ChatModel(spec=spec, role=role, retry=cfg.retry) for role, spec in vp.models.items()}
        return self.module.Context(params=vp.params, models=models, seed=cfg.seed,
                                   embedder_spec=cfg.embedder, run_dir=str(self.run_dir))

    def state_channels(self, vp: VariantPlan) -> dict:
        """The channels of the variant's State (from its compiled graph; compiled here for preflight)."""
        if vp.channels is None:
            graph = vp.compiled if vp.compiled is not None else self.module.build(vp.params).compile()
            vp.channels = {k: graph.channels[k] for k in graph.builder.channels if k in graph.channels}
        return vp.channels

    def session_inits(self, vp: VariantPlan) -> Iterator[dict]:
        """The variant's initial states, at most ``sessions`` of them, each checked (:func:`check_init`)."""
        cfg, limit = self.config, self.config.sessions
        seen: set[str] = set()
        count = 0
        channels = self.state_channels(vp)
        sessions = attach_prefixes(self.module.sessions(vp.params, self.base_context(vp)), cfg.prefix)
        for i, init in enumerate(_checked(sessions, cfg.graph)):
            if limit is not None and i >= limit:
                return
            sid = check_init(init, i, channels, cfg.graph)
            if i < DUPLICATE_CHECK_LIMIT:
                if sid in seen:
                    raise ConvsimError(f"sessions() yielded the session_id {sid!r} twice (again as its {nth(i)} "
                                       "session)", file=cfg.graph, record=sid, field="session_id")
                seen.add(sid)
            count += 1
            yield init
        if limit is not None and count < limit:
            msg = (f"variant {vp.name}: the graph yields {count} sessions, fewer than the {limit} "
                   f"asked (--sessions); it ran {count}")
            if msg not in self.warnings:
                self.warnings.append(msg)

    def iter_units(self) -> Iterator[Unit]:
        """Every session attempt ``(variant, session_id, trial)``, in a deterministic order."""
        if self.units is not None:
            yield from self.units
            return
        cfg = self.config
        for vp in self.variants.values():
            for trial in range(cfg.trials):
                for init in self.session_inits(vp):
                    sid = str(init["session_id"])
                    yield Unit(vp.name, sid, trial, session_seed(cfg.seed, sid, trial), init)

    def expected_total(self) -> int | None:
        """Session attempts the run plans, when known without iterating (``None`` otherwise)."""
        if self.units is not None:
            return len(self.units)
        per_variant = []
        for vp in self.variants.values():
            n = getattr(vp.params, "n_sessions", None) if "n_sessions" in _fields(self.module) else None
            if self.config.sessions is not None:
                n = self.config.sessions if n is None else min(n, self.config.sessions)
            if n is None:
                return None
            per_variant.append(n)
        return sum(per_variant) * self.config.trials


def _fields(module) -> dict:
    return getattr(module.Params, "model_fields", {})


def _numeric_only(annotation) -> bool:
    """Whether a field takes numbers (int, float, optionally None) and no booleans."""
    import typing
    args = [a for a in (typing.get_args(annotation) or (annotation,)) if a is not type(None)]
    return bool(args) and bool not in args and all(a in (int, float) for a in args)


def graph_params(module, overrides: dict, where: str):
    """The graph's ``Params`` from ``overrides``; an unknown key or a bad value is one ConvsimError
    naming ``where`` (a file, "command line"...) and the param."""
    fields = _fields(module)
    unknown = sorted(set(overrides) - set(fields))
    if fields and unknown:
        # Params forbid unknown keys: a typo must not silently run the defaults
        raise ConvsimError(f"unknown param {unknown[0]!r}; valid params: {', '.join(sorted(fields))}",
                           file=where, field=f"params.{unknown[0]}")
    for key, value in overrides.items():
        if isinstance(value, bool) and _numeric_only(fields[key].annotation if key in fields else None):
            # pydantic reads true as 1: "n_turns: true" would run one turn and record "true"
            raise ConvsimError(f"param {key} is a number, got {str(value).lower()}", file=where, field=f"params.{key}")
    try:
        return module.Params(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        raise ConvsimError(err.get("msg", "invalid value"), file=where, field=f"params.{loc}") from None


def check_roles(module, models: dict, where: str, variant: str) -> None:
    """A model role the graph does not ask for (``MODEL_ROLES``) is a ConvsimError naming it."""
    roles = getattr(module, "MODEL_ROLES", None)
    if roles is None:
        return
    for role in models:
        if role not in roles:
            raise ConvsimError(f"unknown model role {role!r} (variant {variant}); the graph's roles: "
                               f"{', '.join(roles) or 'none'}", file=where, field=f"models.{role}")


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def nth(i: int) -> str:
    """``0`` -> "1st", ``1`` -> "2nd", ``10`` -> "11th": the position of a zero-based index, in words."""
    n = i + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check_init(init: Any, i: int, channels: dict, graph: str) -> str:
    """The session id of ``init``, the ``i``-th initial state ``sessions()`` yielded, once it is one
    that can run: a dict with a session id that can name a file, every key a key of the State
    (LangGraph would drop any other without a word), every value one the key's reducer takes as
    LangGraph's input would apply it (a string for an ``operator.add`` list fails there), and
    ``transcript``, ``turn_metrics`` and ``dialogue_metrics`` of the shapes a result record needs.
    Else one ConvsimError naming the graph file, the session and the key. A few microseconds a key."""
    if not isinstance(init, dict) or not init.get("session_id"):
        raise ConvsimError(f"sessions() must yield dicts with a session_id; its {nth(i)} session is "
                           f"{'a dict without one' if isinstance(init, dict) else type(init).__name__}",
                           file=graph, field="session_id")
    sid = str(init["session_id"])
    where = f"session {sid} (the {nth(i)} of sessions())"
    try:  # it names the session's trace file
        path_component(sid, "session id")
    except ValueError as exc:
        raise ConvsimError(f"{where}: {exc}", file=graph, record=sid, field="session_id") from None
    for key, value in init.items():
        channel = channels.get(key)
        if channel is None:
            raise ConvsimError(f"{where}: {key!r} is not a key of the graph's State (LangGraph would drop it)",
                               file=graph, record=sid, field=key)
        try:
            channel.copy().update([value])
        except Exception as exc:  # noqa: BLE001 — whatever the reducer raises: LangGraph would raise it mid-run
            raise ConvsimError(f"{where}: the State's reducer of {key!r} refuses its value ({type(exc).__name__}: "
                               f"{exc})", file=graph, record=sid, field=key) from None
    try:
        check_record({"variant": "", **init}, file=graph, record=sid)
    except ConvsimError as exc:
        raise ConvsimError(f"{where}: {exc.message}", file=graph, record=sid, field=exc.field) from None
    return sid


def _checked(sessions: Iterable[dict], graph: str) -> Iterator[dict]:
    """The graph's ``sessions()``, its failures as one input-error line naming the graph and the
    position (a data file that breaks the 50th session: an empty domain to draw a goal from)."""
    sessions, i = iter(sessions), 0
    while True:
        try:
            init = next(sessions)
        except StopIteration:
            return
        except ConvsimError:
            raise
        except Exception as exc:  # noqa: BLE001 — bad data reached through the graph's generator
            raise ConvsimError(f"sessions() failed at its {nth(i)} session: {type(exc).__name__}: {exc}",
                               file=graph, field="sessions") from None
        yield init
        i += 1


def new_run_id(prefix: str, out_dir: str | Path) -> str:
    """A run id no run under ``out_dir`` has: ``<prefix>-<UTC date>-<time to the millisecond>``, with
    ``-2``, ``-3`` ... appended when that directory exists (two calls in the same millisecond, or a
    clock set back). A default id is never an existing run, so a second call never resumes the first;
    an id given explicitly is the way to resume."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")[:-3]
    run_id, k = f"{prefix}-{stamp}", 1
    while (Path(out_dir) / run_id).exists():
        k += 1
        run_id = f"{prefix}-{stamp}-{k}"
    return run_id


def plan_run(cfg: ExperimentConfig, *, source: str = "config") -> Plan:
    """Resolve the graph, the params and models of every variant; sessions come later, lazily.

    ``sessions: N`` is the one source of truth for how many sessions a variant runs: a graph whose
    Params has ``n_sessions`` gets ``n_sessions = N`` (over any value in the params); a graph that
    yields fewer (a fixed test set) runs what it has and the run warns, naming the cap.
    """
    if cfg.fork and source not in ("fork", "worker"):
        f = cfg.fork
        raise ConvsimError(f"this run is a fork of run {f.get('run_id')!r} (session {f.get('session_id')}, step "
                           f"{f.get('step')}): resume it with convsim fork {f.get('run_dir')} {f.get('session_id')} "
                           f"--step {f.get('step')} --run-id {cfg.run_id}"
                           f"{' --variant ' + str(f.get('variant')) if f.get('variant') else ''}"
                           f"{' --trial ' + str(f.get('trial')) if f.get('trial') else ''}"
                           + "".join(f" --model {m}" for m in f.get("models") or [])
                           + "".join(f" --set {x}" for x in f.get("set") or []), field="fork")
    module = load_graph_module(cfg.graph)
    if cfg.prefix and "prefix" not in getattr(module.State, "__annotations__", {}):
        # LangGraph would drop the key without a word: every session would run unscripted
        raise ConvsimError(f"graph {cfg.graph!r} cannot open sessions with scripted turns (its State has no "
                           "'prefix' key; see docs/ENGINE_API.md, 'Scripted then simulated')", field="prefix")
    run_id = cfg.run_id or new_run_id(cfg.name, cfg.out_dir)
    cfg = cfg.model_copy(update={"run_id": run_id})
    run_dir = Path(cfg.out_dir) / run_id
    variants: dict[str, VariantPlan] = {}
    for var in cfg.resolved_variants():
        where = f"{source} (variant {var.name})"
        overrides = _merge(cfg.params, var.params)
        if cfg.sessions is not None and "n_sessions" in _fields(module):
            overrides["n_sessions"] = cfg.sessions
        given = {**cfg.agents, **var.agents}
        if given or isinstance(getattr(module, "SLOTS", None), dict):
            from convsim.slots.planning import agents_from_params, agents_into_params, resolve_agents
            params_agents = overrides.get("agents") if isinstance(overrides.get("agents"), dict) else {}
            agents = resolve_agents(module, {**params_agents, **given}, where=source, variant=var.name)
            overrides = agents_into_params(module, overrides, agents, {**params_agents, **given})
        else:
            agents = {}
        params = graph_params(module, overrides, where)
        if agents:
            agents = agents_from_params(agents, params, where=source)
        merged_models = {**cfg.models, **var.models}
        check_roles(module, merged_models, source, var.name)
        models = {role: parse_model_spec(spec, where=f"models.{role}") for role, spec in merged_models.items()}
        variants[var.name] = VariantPlan(var.name, params, models, agents=agents,
                                         subgraphs=any(a.kind == "graph" for a in agents.values()))
    _serve_tools(cfg, variants, source)
    cache = None
    if cfg.cache:
        from convsim.providers.cache import ResponseCache
        try:
            cache = ResponseCache(cfg.cache)
        except sqlite3.Error as exc:
            raise ConvsimError(f"not a usable SQLite response cache ({exc})", file=cfg.cache,
                               field="cache") from None
    return Plan(cfg, module, variants, run_dir, cache, source=source)


def _serve_tools(cfg: ExperimentConfig, variants: dict, source: str) -> None:
    """The run's ``tool_server:`` for this process's tool server (convsim.slots.toolserver), in the
    driver and in every worker. In the driver of a run with remote agents (which the server serves):
    the one-line warning when it binds beyond loopback, and, when the sessions run here, the server
    started now, so an address or port it cannot listen on is one line before anything is written."""
    from convsim.slots import toolserver
    toolserver.configure(cfg.tool_server)
    remote = any(a.kind in ("langgraph", "a2a") for vp in variants.values() for a in vp.agents.values())
    if source == "worker" or not remote or cfg.tool_server == toolserver.ToolServerConfig():
        return
    toolserver.announce(cfg.tool_server)
    if cfg.executor == "async":
        toolserver.server()


def prepare_checkpoint_db(path: Path) -> None:
    """Create the checkpoint tables and switch the file to WAL, once, before any saver opens it.

    WAL with a busy timeout lets several processes write one file. Switching to WAL needs a moment
    with no other writer, and SQLite may answer "locked" at once instead of waiting (or leave the
    mode unchanged inside a transaction), so it is done here on a fresh connection and retried; the
    mode is stored in the file, so later connections only set their busy timeout.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with usable_checkpoint_db(path):
        _switch_to_wal(path)


@contextmanager
def usable_checkpoint_db(path: Path):
    """A damaged or foreign checkpoint file met in the block: one line naming it, not a traceback."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise ConvsimError(f"not a usable SQLite checkpoint database ({exc})", file=path) from None


def _switch_to_wal(path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    conn = connect(path, check_same_thread=False)
    try:
        switch_to_wal(conn, path, what="checkpoint database")
        SqliteSaver(conn).setup()
    finally:
        conn.close()


