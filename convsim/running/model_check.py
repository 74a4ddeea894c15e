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
* an in-process model (``llamacpp:gemma3-270m``, ``llamacpp:<file.gguf>``): one tiny inference in a
  child process (convsim.running.worker_death): a llama.cpp build that dies of an illegal
  instruction (SIGILL) is one line naming the cause and the portable rebuild, exit 2.

Each OpenAI-compatible server without a ``max_in_flight`` of its own is also asked how many requests
it serves at once (:func:`server_slots`: llama.cpp's ``GET /props`` ``total_slots``; llama-cpp-python's
server, one at a time, is known by its ``/v1/models`` answer): the run then keeps at most that many
calls in flight to it (``limits.max_in_flight_by_server``), the others wait in convsim, where the
request timeout does not run, so the timeout measures the server's work and not its queue.

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


def ping(spec: Any, timeout: float, stream: Any = None) -> None:
    """One tiny chat request to the spec's server through the sessions' backend (no retries;
    ``stream``: the timeouts of streamed answers, as the sessions send them)."""
    from langchain_core.messages import HumanMessage
    backend = models._backend(spec, timeout) if stream is None else models._backend(spec, timeout, stream)
    backend.invoke([HumanMessage(PING)], **_ping_kwargs(spec))


def _get_json(url: str, timeout: float) -> Any:
    import json
    import urllib.request
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}),
                                timeout=timeout) as answer:
        return json.loads(answer.read())


def server_slots(base_url: str, timeout: float = 5.0) -> int | None:
    """How many requests the OpenAI-compatible server at ``base_url`` serves at once, as it says
    (None: it does not say). llama.cpp's server: ``total_slots`` of ``GET /props``; llama-cpp-python's
    server (``python -m llama_cpp.server``) serves one at a time and is known by its model list
    (``owned_by: "me"``)."""
    root = base_url.rstrip("/")
    root = root[:-3] if root.endswith("/v1") else root
    try:
        props = _get_json(root + "/props", timeout)
        if isinstance(props, dict) and isinstance(props.get("total_slots"), int) and props["total_slots"] > 0:
            return props["total_slots"]
    except Exception:  # noqa: BLE001 — a server without /props
        pass
    try:
        listed = _get_json(base_url.rstrip("/") + "/models", timeout)
        data = listed.get("data") if isinstance(listed, dict) else None
        if isinstance(data, list) and data and all(isinstance(m, dict) and m.get("owned_by") == "me" for m in data):
            return 1
    except Exception:  # noqa: BLE001
        pass
    return None


def cap_in_flight(plan: Any) -> None:
    """Set ``limits.max_in_flight_by_server`` of the plan's config from what each OpenAI-compatible
    server without a cap reports (:func:`server_slots`)."""
    cfg = plan.config
    if cfg.limits.max_in_flight is not None:
        return
    found = dict(cfg.limits.max_in_flight_by_server)
    for vp in plan.variants.values():
        for spec in vp.models.values():
            if spec.provider == "openai" and spec.base_url and spec.base_url not in found:
                slots = server_slots(spec.base_url, min(5.0, cfg.retry.timeout))
                if slots is not None:
                    found[spec.base_url] = slots
    if found != cfg.limits.max_in_flight_by_server:
        limits = cfg.limits.model_copy(update={"max_in_flight_by_server": found})
        plan.config = cfg.model_copy(update={"limits": limits})


def check_model_servers(plan: Any) -> list[str]:
    """Ask each distinct model server of the plan once; raise ConvsimError for a missing model or an
    unreachable server, return warnings for a busy or failing one. Then cap the calls in flight to
    each server at what it reports (:func:`cap_in_flight`)."""
    warnings = _ping_all(plan)
    cap_in_flight(plan)
    return warnings


def _ping_all(plan: Any) -> list[str]:
    cfg = plan.config
    warnings: list[str] = []
    seen: set[tuple] = set()
    for vp in plan.variants.values():
        for role, spec in vp.models.items():
            if spec.provider == "llamacpp" and ("llamacpp", spec.model) not in seen:
                # in process: one tiny inference in a child process, so that a llama.cpp built for
                # instructions this CPU lacks is one line (SIGILL), not the death of the command
                seen.add(("llamacpp", spec.model))
                from convsim.running.worker_death import probe_llamacpp
                why = probe_llamacpp(spec.spec)
                if why is not None:
                    raise ConvsimError(f"variant {vp.name}, role {role}: {spec.spec}: a test inference was "
                                       f"{why}", field=f"models.{role}")
                continue
            if spec.provider not in ("openai", "ollama"):
                continue  # none, or an in-process model (llamacpp: its file is checked)
            key = (spec.provider, _server(spec), spec.model)
            if key in seen:
                continue
            seen.add(key)
            try:
                ping(spec, cfg.retry.timeout, cfg.retry.stream_timeouts())
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
