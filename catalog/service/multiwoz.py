"""Replay readers: real MultiWOZ dialogues as user/system turn pairs with gold annotations.

Two formats are read into one shape:

* ConvLab-3 unified (``dialogues_unified_sample.json``): a list of dialogues
  ``{dialogue_id, domains, goal, turns}``; user turns carry the accumulated belief ``state``
  and ``dialogue_acts{categorical, non-categorical, binary}``.
* MultiWOZ 2.2: ``dialogues_*.json`` (lists of ``{dialogue_id, services, turns}``, user turns
  with ``frames[].state{active_intent, requested_slots, slot_values}``) plus
  ``dialog_acts.json`` (``{dialogue_id: {turn_id: {dialog_act: {"Hotel-Inform": [[slot,
  value]]}}}}``) found next to the dialogue file or in its parent folder.

Each dialogue becomes ``{dialogue_id, format, file, domains, goal, turns}`` where a turn is
``{user, system, user_acts, gold_domain, gold_intent, gold_state, gold_requested,
gold_act_types}``: ``gold_state`` maps ``domain-slot`` to the list of acceptable normalised
values (2.2 lists several; unified gives one); ``gold_act_types`` are the next system turn's
act types as ``Domain-Intent`` (see :func:`act_type`).

The unified format has no ``active_intent``; there the gold domain and intent are derived
(documented in docs/customer_service.md): the domain with most non-general user acts, else
the domain whose state changed, else ``general``; the intent is ``book_<domain>`` when the
user informs a ``book*`` slot of a bookable domain in that turn, else ``find_<domain>``.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from convsim.catalog.service.db import MULTIWOZ_DOMAINS
from convsim.catalog.service.normalize import normalize_slot_name, normalize_value
from convsim import ConvsimError
from convsim.textio import load_json

BOOKABLE = ("restaurant", "hotel", "train", "taxi")
# MultiWOZ act names that our agents express with a more general act of the same meaning.
ACT_SYNONYMS = {"recommend": "inform", "select": "inform", "offerbook": "inform",
                "offerbooked": "book"}


def act_type(domain: str, intent: str) -> str:
    """``('hotel', 'recommend')`` -> ``'Hotel-Inform'``; ``('general', 'bye')`` -> ``'General-Bye'``."""
    intent = ACT_SYNONYMS.get(intent.lower(), intent.lower())
    return f"{domain.strip().lower().capitalize()}-{intent.capitalize()}"


def _check_domain(domain: str, file: Path, record: str, where: str) -> str:
    d = str(domain).strip().lower()
    if d not in MULTIWOZ_DOMAINS:
        raise ConvsimError(f"unknown domain '{domain}' (known: {sorted(MULTIWOZ_DOMAINS)})",
                           file=file, record=record, field=where)
    return d


def _intent_name(intent: str) -> str:
    return "find_police" if intent == "police" else ("find_hospital" if intent == "hospital" else intent)


@contextmanager
def _malformed(file: Path, record: object):
    """A dialogue whose fields have the wrong types (a null category, slots given as a string...):
    one line naming the file and the dialogue, not the TypeError deep in the reader."""
    try:
        yield
    except ConvsimError:
        raise
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
        raise ConvsimError(f"malformed dialogue ({type(exc).__name__}: {exc})", file=file, record=record) from None


def _read(path: Path) -> object:
    return load_json(path, what="dialogue file")  # UTF-8, bounded nesting, one-line errors


def _pairs(turns: list, file: Path, did: str, speaker_key, user_value: str) -> list[tuple]:
    if not isinstance(turns, list) or not turns:
        raise ConvsimError("dialogue has no turns", file=file, record=did, field="turns")
    pairs = []
    for i in range(0, len(turns), 2):
        user = turns[i]
        system = turns[i + 1] if i + 1 < len(turns) else None
        for j, t in ((i, user), (i + 1, system)):
            if t is None:
                continue
            if not isinstance(t, dict) or not isinstance(t.get("utterance"), str):
                raise ConvsimError("turn without a string 'utterance'", file=file, record=did,
                                   field=f"turns[{j}].utterance")
        if str(speaker_key(user)).lower() != user_value:
            raise ConvsimError(f"turn {i} should be spoken by the user", file=file, record=did,
                               field=f"turns[{i}].speaker")
        if system is not None and str(speaker_key(system)).lower() != "system":  # was not checked: 5, "martian"
            raise ConvsimError(f"turn {i + 1} should be spoken by the system, not {speaker_key(system)!r}",
                               file=file, record=did, field=f"turns[{i + 1}].speaker")
        pairs.append((i, user, system))
    return pairs


def _derive_domain_intent(user_acts: list[dict], prev_state: dict,
                          state: dict) -> tuple[str | None, str | None]:
    counts: dict[str, int] = {}
    for a in user_acts:
        if a["domain"] != "general":
            counts[a["domain"]] = counts.get(a["domain"], 0) + 1
    if counts:
        domain = max(counts, key=lambda d: (counts[d], -list(counts).index(d)))
    else:
        changed = [k.split("-", 1)[0] for k in state if state.get(k) != prev_state.get(k)]
        if not changed and user_acts:
            return "general", "general"
        if not changed:
            return None, None  # an unannotated turn: its gold is unknown, metrics skip it
        domain = changed[0]
    if domain in ("police", "hospital"):
        return domain, f"find_{domain}"
    informs_book = any(a["domain"] == domain and a["intent"] == "inform"
                       and a.get("slot", "").startswith("book") for a in user_acts)
    if domain in BOOKABLE and (informs_book or domain == "taxi"):
        return domain, f"book_{domain}"
    return domain, f"find_{domain}"


def load_unified(path: str | Path) -> list[dict]:
    """Dialogues of a ConvLab-3 unified-format JSON file (a list, or a dict id -> dialogue)."""
    file = Path(path)
    raw = _read(file)
    items = list(raw.values()) if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ConvsimError("expected a list of dialogues", file=file)
    out = []
    for n, dialogue in enumerate(items):
        with _malformed(file, n):
            if not isinstance(dialogue, dict) or "turns" not in dialogue:
                raise ConvsimError("dialogue without 'turns'", file=file, record=n, field="turns")
            did = str(dialogue.get("dialogue_id", n))
            domains = [_check_domain(d, file, did, "domains") for d in dialogue.get("domains", [])]
            turns, prev_state = [], {}
            for i, user, system in _pairs(dialogue["turns"], file, did, lambda t: t.get("speaker"), "user"):
                user_acts = _acts_unified(user, file, did, i)
                if not isinstance(user.get("state", {}), dict):
                    raise ConvsimError("user turn state is not an object", file=file, record=did,
                                       field=f"turns[{i}].state")
                for d in user.get("state", {}):
                    _check_domain(d, file, did, f"turns[{i}].state")
                # an annotation the turn does not carry is unknown (None: not scored, counted),
                # never an empty gold set scored as a miss (WOZ 2.0 system turns carry no acts)
                state = ({f"{d}-{normalize_slot_name(s)}": [normalize_value(s, v)]
                          for d, slots in user["state"].items() for s, v in slots.items()
                          if normalize_value(s, v) is not None} if "state" in user else None)
                if state is None and "dialogue_acts" not in user:
                    domain, intent = None, None
                else:
                    domain, intent = _derive_domain_intent(user_acts, prev_state, state or {})
                system_acts = (_acts_unified(system, file, did, i + 1)
                               if system is not None and "dialogue_acts" in system else None)
                turns.append({
                    "user": user["utterance"], "system": system["utterance"] if system else "",
                    "user_acts": user_acts, "gold_domain": domain, "gold_intent": intent,
                    "gold_intent_source": "rule", "gold_state": state,
                    "gold_requested": [f"{a['domain']}-{a['slot']}" for a in user_acts
                                       if a["intent"] == "request"],
                    "gold_act_types": (None if system_acts is None else
                                       sorted({act_type(a["domain"], a["intent"]) for a in system_acts})),
                })
                prev_state = state if state is not None else prev_state
            out.append({"dialogue_id": did, "format": "unified", "file": str(file),
                        "domains": domains, "goal": dialogue.get("goal", {}), "turns": turns})
    return out


def _acts_unified(turn: dict, file: Path, did: str, index: int) -> list[dict]:
    acts = turn.get("dialogue_acts", {})
    if not isinstance(acts, dict):
        raise ConvsimError("dialogue_acts is not an object", file=file, record=did,
                           field=f"turns[{index}].dialogue_acts")
    out = []
    for kind in ("categorical", "non-categorical", "binary"):
        for a in acts.get(kind, []):
            if not isinstance(a, dict) or "intent" not in a or "domain" not in a:
                raise ConvsimError("act without intent/domain", file=file, record=did,
                                   field=f"turns[{index}].dialogue_acts.{kind}")
            out.append({"intent": a["intent"].lower(),
                        "domain": _check_domain(a["domain"], file, did,
                                                f"turns[{index}].dialogue_acts"),
                        "slot": normalize_slot_name(a.get("slot", "")),
                        "value": a.get("value")})
    return out


def load_multiwoz22(path: str | Path, dialog_acts: str | Path | None = None) -> list[dict]:
    """Dialogues of a MultiWOZ 2.2 ``dialogues_*.json`` file with their ``dialog_acts.json``."""
    file = Path(path)
    raw = _read(file)
    if not isinstance(raw, list):
        raise ConvsimError("expected a list of dialogues", file=file)
    acts_file = Path(dialog_acts) if dialog_acts else next(
        (p for p in (file.parent / "dialog_acts.json", file.parent.parent / "dialog_acts.json")
         if p.exists()), None)
    all_acts = _read(acts_file) if acts_file else {}
    if not isinstance(all_acts, dict):  # was read as "no acts" for every dialogue, silently
        raise ConvsimError("a dialog_acts file is a JSON object keyed by dialogue id", file=acts_file)
    out = []
    for n, dialogue in enumerate(raw):
        with _malformed(file, n):
            if not isinstance(dialogue, dict) or "turns" not in dialogue:
                raise ConvsimError("dialogue without 'turns'", file=file, record=n, field="turns")
            did = str(dialogue.get("dialogue_id", n))
            domains = [_check_domain(d, file, did, "services") for d in dialogue.get("services", [])]
            acts_of = all_acts.get(did, {})
            turns, prev_state = [], {}
            for i, user, system in _pairs(dialogue["turns"], file, did, lambda t: t.get("speaker"), "user"):
                state, active, requested = {}, [], []
                framed = "frames" in user  # no frames: the turn's state and intent are unknown (None)
                for f in user.get("frames", []):
                    if not isinstance(f, dict) or "service" not in f or "state" not in f:
                        raise ConvsimError("frame without service/state", file=file, record=did,
                                           field=f"turns[{i}].frames")
                    service = _check_domain(f["service"], file, did, f"turns[{i}].frames.service")
                    st = f["state"]
                    for slot, values in st.get("slot_values", {}).items():
                        _, name = slot.split("-", 1) if "-" in slot else (service, slot)
                        vals = values if isinstance(values, list) else [values]
                        norm = [v for v in (normalize_value(name, x) for x in vals) if v is not None]
                        if norm:
                            state[f"{service}-{normalize_slot_name(name)}"] = norm
                    requested += [f"{service}-{normalize_slot_name(s.split('-', 1)[-1])}"
                                  for s in st.get("requested_slots", [])]
                    if st.get("active_intent", "NONE") != "NONE":
                        active.append((service, _intent_name(st["active_intent"])))
                user_acts = _acts_22(acts_of.get(str(user.get("turn_id", i)), {}), file, did, i)
                domain, intent = _active_domain(active, user_acts, prev_state, state) if framed else (None, None)
                sys_key = str(system.get("turn_id", i + 1)) if system else None
                # acts of a system turn that the acts file does not list (or no acts file, no system
                # turn) are unknown: None, not scored, counted; never an empty gold set
                sys_acts = (_acts_22(acts_of[sys_key], file, did, i + 1)
                            if system and isinstance(acts_of, dict) and sys_key in acts_of else None)
                turns.append({
                    "user": user["utterance"], "system": system["utterance"] if system else "",
                    "user_acts": user_acts, "gold_domain": domain, "gold_intent": intent,
                    "gold_intent_source": "annotation", "gold_state": state if framed else None,
                    "gold_requested": requested,
                    "gold_act_types": None if sys_acts is None else sorted({
                        act_type(domain if a["domain"] == "booking" else a["domain"], a["intent"])
                        for a in sys_acts}),
                })
                prev_state = state if framed else prev_state
            out.append({"dialogue_id": did, "format": "multiwoz22", "file": str(file),
                        "domains": domains, "goal": {}, "turns": turns})
    return out


def _acts_22(entry: dict, file: Path, did: str, index: int) -> list[dict]:
    table = entry.get("dialog_act", entry.get("dialogue_acts", {})) if isinstance(entry, dict) else None
    if not isinstance(table, dict):
        raise ConvsimError("dialog_act is not an object", file=file, record=did,
                           field=f"dialog_acts[{index}]")
    out = []
    for name, pairs in table.items():
        if "-" not in name:
            raise ConvsimError(f"act name '{name}' is not Domain-Act", file=file, record=did,
                               field=f"dialog_acts[{index}]")
        dom, intent = name.split("-", 1)
        dom = dom.lower()
        if dom != "booking":
            dom = _check_domain(dom, file, did, f"dialog_acts[{index}]")
        if pairs is not None and not (isinstance(pairs, list) and all(isinstance(p, list) for p in pairs)):
            # a string would be read one character at a time as slot-value pairs
            raise ConvsimError(f"act {name!r} must be a list of [slot, value] pairs", file=file, record=did,
                               field=f"dialog_acts[{index}].{name}")
        for pair in pairs or [["none", "none"]]:
            slot, value = (list(pair) + ["none", "none"])[:2]
            out.append({"intent": intent.lower(), "domain": dom,
                        "slot": normalize_slot_name(slot) if slot != "none" else "",
                        "value": None if value in ("none", "?") else value})
    return out


def _active_domain(active: list[tuple], user_acts: list[dict], prev_state: dict,
                   state: dict) -> tuple[str, str]:
    if not active:
        return "general", "general"
    if len(active) == 1:
        return active[0]
    changed = {k.split("-", 1)[0] for k in state if state.get(k) != prev_state.get(k)}
    acted = {a["domain"] for a in user_acts}
    for pool in (changed, acted):
        for d, intent in active:
            if d in pool:
                return d, intent
    return active[0]


def load_dialogues(path: str | Path, *, dialog_acts: str | Path | None = None) -> list[dict]:
    """Read either format; a folder means MultiWOZ 2.2 (every ``dialogues_*.json`` in it). Dialogue
    ids name the replayed sessions: one seen twice is an error naming its file."""
    dialogues = _load_dialogues(path, dialog_acts=dialog_acts)
    seen: set[str] = set()
    for d in dialogues:
        if d["dialogue_id"] in seen:
            raise ConvsimError("the dialogue id appears twice", file=d["file"], record=d["dialogue_id"],
                               field="dialogue_id")
        seen.add(d["dialogue_id"])
    return dialogues


def _load_dialogues(path: str | Path, *, dialog_acts: str | Path | None = None) -> list[dict]:
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("dialogues_*.json"))
        if not files:
            raise ConvsimError("folder holds no dialogues_*.json", file=p)
        return [d for f in files for d in load_multiwoz22(f, dialog_acts)]
    raw = _read(p)
    first = (raw[0] if isinstance(raw, list) and raw else
             next(iter(raw.values()), None) if isinstance(raw, dict) else None)
    turns = first.get("turns") if isinstance(first, dict) else None
    if isinstance(turns, list) and turns and isinstance(turns[0], dict) and "frames" in turns[0]:
        return load_multiwoz22(p, dialog_acts)
    if isinstance(turns, list):
        return load_unified(p)
    raise ConvsimError("neither ConvLab-3 unified nor MultiWOZ 2.2 dialogues", file=p, record=0,
                       field="turns")
