"""User turns of human and simulated dialogues, in one shape.

A *dialogue* here is ``{"id", "source", "domains", "turns"}`` where a turn is the user's side only:
``{"text", "acts"}`` with ``acts`` a list of ``(intent, slot)`` pairs (``slot`` ``""`` for an act
without one, e.g. ``bye``). The system's turns are not compared: fidelity is about the user.

Readers:

* :func:`load_human` -- ConvLab-3 unified or MultiWOZ 2.2 (through the replay readers of
  ``convsim.catalog.service.multiwoz``, so the same files the replay mode reads), or convsim's own
  records (a run directory or a ``results.jsonl``: its user turns are taken as the "human" side, e.g.
  a run of recorded people).
* :func:`load_run` -- a convsim run: per variant, the user turns of every session that has a
  transcript (infrastructure and code errors left out; scripted opening turns are not the
  simulator's words and are dropped). Acts come from the turn's ``meta.user_acts`` (written by the
  customer-service graph); for records without them the informs are read off the turn's gold state
  (slots whose value changed) and a ``request`` move is a request of the goal's requested slots.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from convsim import ConvsimError
from convsim.catalog.service.multiwoz import load_dialogues

ERROR_STATUSES = ("infra_error", "code_error")


def _acts(raw: Iterable[Mapping] | None) -> list[tuple[str, str]]:
    out = []
    for a in raw or []:
        intent = str(a.get("intent") or "").strip().lower()
        if intent:
            out.append((intent, str(a.get("slot") or "").strip().lower()))
    return out


def _records(path: Path) -> list[dict]:
    file = path / "results.jsonl" if path.is_dir() else path
    if not file.exists():
        raise ConvsimError("no results.jsonl (not a run directory)", file=path)
    out = []
    with file.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConvsimError(f"not JSON ({exc.msg})", file=file, record=f"line {i}") from None
    return out


def _is_records(path: Path) -> bool:
    return path.is_dir() and (path / "results.jsonl").exists() or path.name.endswith(".jsonl")


def _state_informs(prev: Mapping, now: Mapping) -> list[tuple[str, str]]:
    """Slots whose gold value appeared or changed this turn (``domain-slot`` keys)."""
    return [("inform", k.split("-", 1)[-1]) for k, v in (now or {}).items() if (prev or {}).get(k) != v]


def dialogue_from_record(record: Mapping, *, source: str = "") -> dict | None:
    """The user turns of one convsim session record; None when it has none."""
    log = {int(t.get("turn", 0)): t for t in record.get("turn_log") or [] if isinstance(t, Mapping)}
    turns, prev_state = [], {}
    for entry in record.get("transcript") or []:
        if str(entry.get("speaker", "")).lower() != "user":
            continue
        meta = entry.get("meta") or {}
        text = str(entry.get("text") or "").strip()
        state = (log.get(int(entry.get("turn", 0))) or {}).get("gold_state") or {}
        if meta.get("scripted") or not text:
            prev_state = state or prev_state
            continue
        if "user_acts" in meta:
            acts = _acts(meta.get("user_acts"))
        else:
            acts = _state_informs(prev_state, state) if state else []
            if meta.get("move") == "request":
                acts += [("request", s) for g in (record.get("goal") or {}).get("domains", [])
                         if g.get("domain") == meta.get("gold_domain") for s in g.get("requests", [])]
            elif meta.get("move") in ("bye", "give_up"):
                acts.append(("bye", ""))
        prev_state = state or prev_state
        turns.append({"text": text, "acts": acts, "domain": meta.get("gold_domain")})
    if not turns:
        return None
    domains = sorted({t["domain"] for t in turns if t["domain"] not in (None, "general")})
    goal = record.get("goal") or {}
    if goal.get("domains"):
        domains = sorted({str(g.get("domain")) for g in goal["domains"]})
    return {"id": str(record.get("session_id")), "source": source, "domains": domains,
            "turns": [{"text": t["text"], "acts": t["acts"]} for t in turns]}


def load_run(run_dir: str | Path) -> dict[str, list[dict]]:
    """Per variant of the run (``variant`` or ``variant#trial`` when a run has trials), its
    simulated dialogues."""
    path = Path(run_dir)
    out: dict[str, list[dict]] = {}
    for r in _records(path):
        if r.get("status") in ERROR_STATUSES:
            continue
        d = dialogue_from_record(r, source=str(r.get("variant")))
        if d is not None:
            d["id"] = f"{d['id']}#{r.get('trial', 0)}"
            out.setdefault(str(r.get("variant", "default")), []).append(d)
    if not out:
        raise ConvsimError("the run has no session with user turns", file=path)
    return out


def load_human(path: str | Path) -> list[dict]:
    """Human dialogues from ConvLab-3 unified, MultiWOZ 2.2 or convsim records."""
    path = Path(path)
    if not path.exists():
        raise ConvsimError("no such file", file=path)
    if _is_records(path):
        dialogues = [d for r in _records(path) if r.get("status") not in ERROR_STATUSES
                     for d in [dialogue_from_record(r, source="human")] if d is not None]
    else:
        dialogues = []
        for d in load_dialogues(path):
            turns = [{"text": str(t["user"]).strip(), "acts": _acts(t.get("user_acts"))}
                     for t in d["turns"] if str(t.get("user") or "").strip()]
            if turns:
                dialogues.append({"id": str(d["dialogue_id"]), "source": "human",
                                  "domains": sorted(d.get("domains") or []), "turns": turns})
    if not dialogues:
        raise ConvsimError("no dialogue with user turns", file=path)
    return dialogues


def same_task(simulated: list[dict], domains: Iterable[str]) -> list[dict]:
    """The simulated dialogues whose goal stays within ``domains`` (the human corpus's task): a
    restaurant corpus is compared with restaurant-only goals, never with a hotel-and-train one."""
    allowed = set(domains)
    return [d for d in simulated if d["domains"] and set(d["domains"]) <= allowed]


def corpus_domains(dialogues: Iterable[Mapping]) -> set[str]:
    return {x for d in dialogues for x in d.get("domains") or []}
