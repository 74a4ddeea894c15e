"""Preflight of the model servers: each configured server is asked once, with a tiny request,
before anything is written (called by convsim.running.preflight).

For each distinct (provider, server, model) of the run's variants, one chat request ("Reply with
OK.", at most one answer token where the protocol takes a bound) goes through the same backend the
sessions use, without retries:

* the server unreachable (connection refused, no such host) or a missing model (HTTP 404: Ollama's
  and OpenAI's ``model ... not found``), or a refused key (HTTP 401 / 403): one line naming the
  variant, the role, the spec and what the server said; exit 2, nothing written;
* a busy or failing server (a timeout, HTTP 5xx / 429, any other error): a warning in the run's
  summary (the sessions retry it as infrastructure: it may recover);
* an in-process model (``llamacpp:<file.gguf>``) is not loaded here (its file is checked).

``preflight_models: false`` in a config skips it (docs/real_models.md).
"""
from __future__ import annotations

from typing import Any

from convsim.errors import ConvsimError
from convsim.providers import models
from convsim.providers.retry import _status_code, infra_fault

PING = "Reply with OK."
REFUSED = {401: "the server refused the key (HTTP 401)", 403: "the server refused the key (HTTP 403)",
           404: "model not found (HTTP 404)"}


def _server(spec: Any) -> str:
    if spec.provider == "ollama":
        import os
        return spec.base_url or os.environ.get("OLLAMA_HOST") or "http://localhost:11434"
    return spec.base_url or "(default)"


def _ping_kwargs(spec: Any) -> dict:
    if spec.provider == "openai":
        return {"max_tokens": 1}
    if spec.provider == "ollama":
        return {"options": {"num_predict": 1}}
    return {}


def ping(spec: Any, timeout: float) -> None:
    """One tiny chat request to the spec's server through the sessions' backend (no retries)."""
    from langchain_core.messages import HumanMessage
    models._backend(spec, timeout).invoke([HumanMessage(PING)], **_ping_kwargs(spec))


def check_model_servers(plan: Any) -> list[str]:
    """Ask each distinct model server of the plan once; raise ConvsimError for a missing model or an
    unreachable server, return warnings for a busy or failing one."""
    cfg = plan.config
    warnings: list[str] = []
    seen: set[tuple] = set()
    for vp in plan.variants.values():
        for role, spec in vp.models.items():
            if spec.provider not in ("openai", "ollama"):
                continue  # none, or an in-process model (llamacpp: its file is checked)
            key = (spec.provider, _server(spec), spec.model)
            if key in seen:
                continue
            seen.add(key)
            try:
                ping(spec, cfg.retry.timeout)
            except Exception as exc:  # noqa: BLE001 — classified below
                what = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                code = _status_code(exc)
                where = f"variant {vp.name}, role {role}: {spec.spec} at {_server(spec)}"
                if code in REFUSED:
                    raise ConvsimError(f"{where}: {REFUSED[code]}: {what}", field=f"models.{role}") from None
                if infra_fault(exc) == "unreachable":
                    raise ConvsimError(f"{where}: the model server is unreachable ({what}); start it or fix "
                                       "the spec", field=f"models.{role}") from None
                warnings.append(f"model check: {where} did not answer a test request ({what}); the sessions "
                                "retry it as infrastructure")
    return warnings
