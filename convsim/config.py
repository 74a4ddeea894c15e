"""The experiment config: YAML validated by pydantic, overridable from the command line."""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError,
                      field_validator, model_validator)

from convsim.errors import ConvsimError
from convsim.providers.limits import Limits
from convsim.providers.models import parse_model_spec
from convsim.providers.retry import RetryPolicy
from convsim.textio import load_yaml

ModelValue = str | dict


def path_component(value: str, what: str) -> str:
    """``value`` if it can name one file or directory inside the run directory, else ValueError:
    run ids, experiment and variant names and session ids become paths (``runs/<run_id>/traces/
    <variant>/<session_id>.jsonl``), and one holding ``/`` or ``..`` would write outside it."""
    text = str(value)
    if not text.strip() or text in (".", "..") or any(c in text for c in "/\\\0"):
        raise ValueError(f"{what} {text!r} cannot name a file: it must be one path component "
                         "(no '/', '\\', NUL; not empty, '.' or '..')")
    return value


# run-analysis modules that moved into convsim.evaluation.reporting when the systems moved under convsim
_REPORTING_MODULES = ("analysis", "compare", "compare_text", "fidelity", "headline", "plots", "records", "report",
                      "run_stats", "stats", "trace_html", "transcripts")


def current_hook_name(hook: str) -> str:
    """``evaluation.analysis:analyze_run`` -> ``convsim.evaluation.reporting.analysis:analyze_run``;
    ``agents.x``, ``evaluation.x``, ``catalog.x``, ``graphs.x`` -> ``convsim.<...>``; others unchanged."""
    module, sep, fn = hook.partition(":")
    top, _, rest = module.partition(".")
    if top not in ("agents", "evaluation", "catalog", "graphs") or not rest:
        return hook
    if top == "evaluation" and rest.split(".")[0] in _REPORTING_MODULES:
        rest = f"reporting.{rest}"
    return f"convsim.{top}.{rest}{sep}{fn}"


class Variant(BaseModel):
    """One arm of the experiment: overrides of the base params and models."""

    model_config = ConfigDict(extra="forbid")
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, ModelValue] = Field(default_factory=dict)
    agents: dict[str, str] = Field(default_factory=dict)  # role -> agent spec (convsim.slots), over the base's
    # shown in the report beside the others, never compared with them (no difference, no test)
    reference: StrictBool = False

    @field_validator("name")
    @classmethod
    def _check_name(cls, v):
        return path_component(v, "variant name")


class ToolServerConfig(BaseModel):
    """Where the process's tool server for remote agents (convsim.slots.toolserver) listens and what
    URL the agent is told (config ``tool_server:``, ``convsim run --tool-host/--tool-port/--tool-url``).

    * ``host``: the IP address to bind (default ``127.0.0.1``: this machine only; ``0.0.0.0`` or
      ``::`` every interface, or one of the machine's addresses). An IP address, not a host name.
    * ``port``: the port (default 0: a free one, chosen when the server starts). A fixed port is for
      one process only: the process and Ray executors start a server in each worker.
    * ``url``: the base URL the agent is told, ``http(s)://host[:port][/path]`` (a turn's URL is
      ``<url>/tools/<token>``); without a port in it, the server's port is added. Default
      ``http://<host>:<port>``; a wildcard ``host`` needs it (the agent cannot call 0.0.0.0). A port
      or a path in it are for a proxy or port forward in front of the server.
    """

    model_config = ConfigDict(extra="forbid")
    host: StrictStr = "127.0.0.1"
    port: StrictInt = Field(default=0, ge=0, le=65535)
    url: StrictStr | None = None

    @field_validator("host")
    @classmethod
    def _check_host(cls, v):
        try:
            return str(ipaddress.ip_address(v.strip().strip("[]")))
        except ValueError:
            raise ValueError(f"{v!r} is not an IP address to listen on (e.g. 127.0.0.1, 0.0.0.0, ::, or one of "
                             "this machine's addresses)") from None

    @field_validator("url")
    @classmethod
    def _check_url(cls, v):
        if v is None:
            return v
        try:
            parts = urlsplit(v.strip())
            parts.port  # noqa: B018 — raises ValueError on a port that is not a number in 0..65535
        except ValueError as exc:
            raise ValueError(f"{v!r} is not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{v!r} is not an http:// or https:// URL with a host (e.g. http://10.0.0.5)")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"{v!r}: the URL may have a path, not a query, fragment or user")
        return v.strip().rstrip("/")

    @model_validator(mode="after")
    def _check_reachable(self):
        if self.url is None and self.wildcard:
            raise ConvsimError(f"listening on {self.host} (every interface) needs the URL the agent reaches the "
                               "server at: set tool_server.url (--tool-url), e.g. http://<this machine's address>",
                               field="tool_server.url")
        return self

    @property
    def wildcard(self) -> bool:
        return ipaddress.ip_address(self.host).is_unspecified

    @property
    def beyond_loopback(self) -> bool:
        return not ipaddress.ip_address(self.host).is_loopback

    def base_url(self, port: int) -> str:
        """The base URL the agent is told, the server listening on ``port``."""
        if self.url is None:
            host = f"[{self.host}]" if ":" in self.host else self.host
            return f"http://{host}:{port}"
        parts = urlsplit(self.url)
        if parts.port is not None:
            return self.url
        netloc = parts.netloc + f":{port}"
        return parts._replace(netloc=netloc).geturl()

    def warning(self) -> str | None:
        """The one-line warning a run prints when the server would listen beyond loopback."""
        if not self.beyond_loopback:
            return None
        return (f"the tool server listens on {self.host} (tool_server.host), beyond this machine: the random "
                f"token in each turn's tool URL is the only credential, sent in plain HTTP unless "
                f"tool_server.url is https behind a proxy")


MAX_SESSIONS = 1_000_000  # sessions per variant a config may ask for (a bigger count is a typo)
MAX_TRIALS = 10_000  # trials per session


class ExperimentConfig(BaseModel):
    """An experiment (``configs/*.yaml``); see docs/ENGINE_API.md for every field."""

    model_config = ConfigDict(extra="forbid")
    name: str = "experiment"
    description: str | None = None  # one plain sentence for `convsim list`
    graph: str
    params: dict[str, Any] = Field(default_factory=dict)
    # strict: pydantic would read "sessions: true" as 1 and "concurrency: '2'" as 2
    # capped: a 401-digit count was accepted and ran silently; the cap is in the message
    sessions: StrictInt | None = Field(default=None, ge=1, le=MAX_SESSIONS)
    trials: StrictInt = Field(default=1, ge=1, le=MAX_TRIALS)
    seed: StrictInt = 0
    concurrency: StrictInt = Field(default=4, ge=1)  # sessions in flight; process/Ray workers run ceil(concurrency / workers) each
    embedder: str = "tfidf"
    models: dict[str, ModelValue] = Field(default_factory=dict)
    agents: dict[str, str] = Field(default_factory=dict)  # role -> agent spec filling the graph's SLOTS (convsim.slots)
    variants: list[Variant] = Field(default_factory=list)
    baseline: str | None = None  # the variant the report's differences are taken against (default: the first)
    prefix: dict[str, Any] | None = None  # {file, turns}: scripted opening turns of every session (convsim.running.prefix)
    trace: StrictBool = True
    checkpoint: StrictBool = False
    cache: str | None = None  # SQLite response cache shared by runs (see convsim.providers.cache)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)  # model-call retries (convsim.providers.retry)
    preflight_models: StrictBool = True  # ask each model server once before the run (convsim.running.model_check)
    executor: Literal["async", "process", "ray"] = "async"  # process: a pool for CPU-bound runs; ray: a cluster
    address: str | None = None  # executor: ray: auto, ray://host:10001 or host:port (None: a private local Ray)
    workers: StrictInt | None = Field(default=None, ge=1)  # processes for executor: process (default: one per
    # 32 sessions in flight, at least one per core: process_executor.default_workers)
    limits: Limits = Field(default_factory=Limits)  # per-server caps and the run budget (convsim.providers.limits)
    # where remote agents' tools are served: bind address, port, URL told (convsim.slots.toolserver)
    tool_server: ToolServerConfig = Field(default_factory=ToolServerConfig)
    analysis: list[str] = Field(default_factory=lambda: ["convsim.evaluation.reporting.analysis:analyze_run"])
    out_dir: str = "runs"
    run_id: str | None = None
    fork: dict[str, Any] | None = None  # set by `convsim fork`: where the run forked from

    @field_validator("analysis")
    @classmethod
    def _current_hook_names(cls, v):
        """A hook saved by a run from before the systems installed under ``convsim`` (its config.yaml
        says ``evaluation.analysis:analyze_run``) names the same function by its current module."""
        return [current_hook_name(h) if isinstance(h, str) else h for h in v]

    @field_validator("embedder")
    @classmethod
    def _check_embedder(cls, v):
        if v != "tfidf" and not (v.startswith("st:") and len(v) > 3):
            raise ValueError(f"unknown embedder {v!r}: expected tfidf, st:minilm or st:<model directory>")
        return v

    @field_validator("name", "run_id")
    @classmethod
    def _check_path_component(cls, v, info):
        return v if v is None else path_component(v, info.field_name)

    @model_validator(mode="after")
    def _check_tool_port(self):
        if self.tool_server.port and self.executor != "async" and self.workers != 1:
            raise ConvsimError(f"a fixed tool_server.port ({self.tool_server.port}) is for one process: executor "
                               f"{self.executor} starts a tool server in each worker (use port 0, or workers: 1)",
                               field="tool_server.port")
        return self

    @model_validator(mode="after")
    def _check_baseline(self):
        names = [v.name for v in self.resolved_variants()]
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a variant (variants: {', '.join(names)})")
        return self

    @field_validator("models")
    @classmethod
    def _check_models(cls, v):
        for role, spec in v.items():
            parse_model_spec(spec, where=f"models.{role}")
        return v

    @field_validator("variants")
    @classmethod
    def _check_variants(cls, v):
        names = [x.name for x in v]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique, got {names}")
        for var in v:
            for role, spec in var.models.items():
                parse_model_spec(spec, where=f"variants[{var.name}].models.{role}")
        return v

    def resolved_variants(self) -> list[Variant]:
        return self.variants or [Variant(name="default")]


def _pydantic_error(exc: ValidationError, file: object) -> ConvsimError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or None
    msg = err.get("msg", "invalid value").removeprefix("Value error, ")
    if err.get("type") in ("int_type", "bool_type", "string_type") and isinstance(err.get("input"), (bool, int, float, str)):
        msg += f", got {err['input']!r}"  # "Input should be a valid integer, got True"
    ctx = err.get("ctx", {}).get("error")
    if isinstance(ctx, ConvsimError):
        return ConvsimError(ctx.message, file=file, field=ctx.field or loc)
    return ConvsimError(msg, file=file, field=loc)


def config_from_dict(data: dict, *, file: object = None) -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise _pydantic_error(exc, file) from None
    except ConvsimError as exc:
        raise ConvsimError(exc.message, file=file, field=exc.field) from None


def shipped_configs_dir() -> Path:
    """The configs convsim ships (package data of an installed wheel, ``configs/`` of a checkout)."""
    from convsim.contract.graphfile import project_root
    return project_root() / "configs"


def resolve_config_path(path: str | Path) -> Path:
    """A config file as named: the path itself when it exists, else a shipped config of that file
    name (``crs_shift.yaml`` or ``configs/crs_shift.yaml`` from any directory)."""
    path = Path(path)
    if path.exists():
        return path
    shipped = shipped_configs_dir() / path.name
    if not path.is_absolute() and len(path.parts) <= 2 and path.parent.name in ("", "configs") and shipped.is_file():
        return shipped
    raise ConvsimError("config file not found (nor a shipped config of that name: convsim list shows them)",
                       file=path)


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a YAML experiment config; errors name the file and the field."""
    path = resolve_config_path(path)
    try:
        data = load_yaml(path, what="config file")  # UTF-8, bounded nesting, one-line errors
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise ConvsimError(f"invalid YAML{f' at line {line + 1}' if line is not None else ''}",
                           file=path) from None
    if not isinstance(data, dict):
        raise ConvsimError("a config must be a YAML mapping", file=path)
    if "graph" in data and isinstance(data["graph"], str) and data["graph"].endswith(".py"):
        gp = Path(data["graph"])
        if not gp.is_absolute() and not gp.exists() and (path.parent / gp).exists():
            data["graph"] = str(path.parent / gp)
    return config_from_dict(data, file=path)


def parse_assignment(text: str, *, what: str) -> tuple[str, Any]:
    """``key=value`` with the value read as YAML (numbers, booleans, lists)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConvsimError(f"expected {what} as KEY=VALUE, got {text!r}", field=what)
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed


def _assignments(items: list[str] | dict | None, *, what: str, raw: bool = False) -> list[tuple[str, Any]]:
    """``KEY=VALUE`` strings (values read as YAML, or with ``raw`` the text after ``=`` as it is) or a
    dict (values as given), as pairs."""
    if isinstance(items, dict):
        return [(str(k), v) for k, v in items.items()]
    pairs = []
    for item in items or []:
        key, value = parse_assignment(item, what=what)
        text = str(item).partition("=")[2].strip()
        # a model spec is text (YAML would read "openai:" as {openai: null}); "{spec: ..., ...}" is YAML
        pairs.append((key, text if raw and not text.startswith("{") else value))
    return pairs


def set_dotted(target: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        target = target.setdefault(p, {})
        if not isinstance(target, dict):
            raise ConvsimError(f"cannot set {dotted!r}: {p!r} is not a mapping", field=dotted)
    target[parts[-1]] = value


def apply_overrides(cfg: ExperimentConfig, *, sessions: int | None = None, seed: int | None = None,
                    models: list[str] | dict | None = None, set_params: list[str] | dict | None = None,
                    run_id: str | None = None, out_dir: str | None = None,
                    concurrency: int | None = None, trials: int | None = None,
                    checkpoint: bool | None = None, trace: bool | None = None,
                    executor: str | None = None, workers: int | None = None,
                    prefix: dict | None = None, address: str | None = None,
                    limits: dict | None = None, agents: list[str] | dict | None = None,
                    timeout: float | None = None, retry: dict | None = None,
                    tool_server: dict | None = None) -> ExperimentConfig:
    """Command-line overrides; ``--model ROLE=SPEC`` applies to every variant.

    ``models`` and ``set_params`` are ``["ROLE=SPEC"]`` / ``["param=value"]`` strings as on the
    command line (values read as YAML), or dicts ``{"crs": "none"}`` / ``{"n_turns": 5}`` whose
    values are taken as they are (a model value may be ``{spec, temperature, ...}``).
    """
    data = cfg.model_dump()
    for key, val in (("sessions", sessions), ("seed", seed), ("run_id", run_id), ("out_dir", out_dir),
                     ("concurrency", concurrency), ("trials", trials), ("checkpoint", checkpoint),
                     ("trace", trace), ("executor", executor), ("workers", workers), ("prefix", prefix),
                     ("address", address)):
        if val is not None:
            data[key] = val
    if timeout is not None:  # --timeout: seconds one HTTP request may take (the server's work, not its queue)
        data["retry"]["timeout"] = timeout
    for key, val in (retry or {}).items():  # --stream, --first-token-timeout ...: the retry: section's keys
        if val is not None:
            data["retry"][key] = val
    for key, val in (limits or {}).items():  # provider limits and the run budget (convsim.providers.limits)
        if val is not None:
            data["limits"][key] = val
    for key, val in (tool_server or {}).items():  # --tool-host/--tool-port/--tool-url (convsim.slots.toolserver)
        if val is not None:
            data["tool_server"][key] = val
    for role, spec in _assignments(models, what="--model", raw=True):
        data["models"][role] = spec if isinstance(spec, dict) else str(spec)
        for var in data["variants"]:
            var["models"].pop(role, None)
    for role, spec in _assignments(agents, what="--agent", raw=True):  # --agent ROLE=SPEC: every variant
        data["agents"][role] = str(spec)
        for var in data["variants"]:
            var["agents"].pop(role, None)
    for key, val in _assignments(set_params, what="--set"):
        set_dotted(data["params"], key, val)
        for var in data["variants"]:  # the command line wins over every variant
            if key.split(".")[0] in var["params"]:
                set_dotted(var["params"], key, val)
    return config_from_dict(data, file="command line")
