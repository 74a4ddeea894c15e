"""Scripted then simulated: a session that starts from the first k turns of a given dialogue.

A *prefix* is the first ``k`` user turns of a recorded or hand-written dialogue, each with the
system reply that followed it. It reaches a session in its initial state as ``state["prefix"]``::

    {"source": file, "dialogue_id": id, "turns": k,
     "pairs": [{"user": text, "system": text | None, "annotation": {...}}, ...]}

either from the graph's sessions (a session dict may carry ``"prefix"``) or from the command line
(``convsim run CONFIG --prefix FILE --prefix-turns k``, or the config's ``prefix: {file, turns}``),
which gives session i the i-th dialogue of the file (cycling) unless a dialogue has the session's
id. A graph's user node asks :func:`scripted_pair` for the current turn: while it returns a pair,
the user says the scripted text (and the agent's reply is replaced by the scripted one); after
the k-th turn the simulator takes over from the state the scripted turns left.

Accepted files: a JSON list or JSONL of dialogues (ids unique), each with ``turns`` (or ``transcript``)
whose items have ``speaker`` (a user: user/customer/usr; a system: system/sys/agent/assistant) and
``text`` or ``utterance``, starting with a user turn, each user turn followed by at most one system
turn; ConvLab-3 unified MultiWOZ dialogues
(``dialogue_id``, ``turns`` with ``speaker``/``utterance``) are read as they are.
"""
from __future__ import annotations

from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Any, Callable

from convsim import textio
from convsim.errors import ConvsimError

USER_SPEAKERS = ("user", "customer", "usr")
SYSTEM_SPEAKERS = ("system", "sys", "agent", "assistant")


def _dialogues(path: Path) -> list[dict]:
    # through convsim.textio like every loader (UTF-8 only, bounded nesting); JSON, else JSONL
    text = textio.read_text(path, what="prefix file")
    try:
        data = textio.parse_json(text, file=path)
    except ConvsimError:
        data = textio.read_jsonl(path, what="prefix file")
    if isinstance(data, dict):  # one dialogue, {"dialogues": [...]}, or {id: dialogue}
        data = [data] if ("turns" in data or "transcript" in data) else (data.get("dialogues") or list(data.values()))
    if not isinstance(data, list) or not data:
        raise ConvsimError("a prefix file holds a non-empty list of dialogues", file=path)
    return data


def dialogue_pairs(dialogue: dict, *, file: Any = None, record: Any = None) -> list[dict]:
    """The dialogue as (user, following system reply) pairs, in order."""
    turns = dialogue.get("turns") or dialogue.get("transcript")
    if not isinstance(turns, list):
        raise ConvsimError("a dialogue needs a list of turns", file=file, record=record, field="turns")
    pairs: list[dict] = []
    for i, t in enumerate(turns):
        if not isinstance(t, dict) or "speaker" not in t:
            raise ConvsimError("a turn needs a speaker", file=file, record=record, field=f"turns[{i}].speaker")
        text = t.get("text", t.get("utterance"))
        if not isinstance(text, str):
            raise ConvsimError("a turn needs its text", file=file, record=record, field=f"turns[{i}].text")
        speaker = str(t["speaker"]).lower()
        if speaker in USER_SPEAKERS:
            annotation = {k: t[k] for k in ("state", "dialogue_acts") if k in t}
            pairs.append({"user": text, "system": None, "annotation": annotation})
            continue
        # before, any other speaker was taken as the system, and a system turn with no user turn
        # before it (a greeting that opens the dialogue, a second reply in a row) was dropped
        if speaker not in SYSTEM_SPEAKERS:
            raise ConvsimError(f"unknown speaker {t['speaker']!r} (user: {', '.join(USER_SPEAKERS)}; system: "
                               f"{', '.join(SYSTEM_SPEAKERS)})", file=file, record=record, field=f"turns[{i}].speaker")
        if not pairs:
            raise ConvsimError("the dialogue opens with a system turn: a prefix is user turns, each with the "
                               "system reply that followed (drop the opening system turn)", file=file, record=record,
                               field=f"turns[{i}].speaker")
        if pairs[-1]["system"] is not None:
            raise ConvsimError("two system turns in a row: each user turn has one system reply", file=file,
                               record=record, field=f"turns[{i}].speaker")
        pairs[-1]["system"] = text
    return pairs


def load_prefixes(path: str | Path, turns: int) -> list[dict]:
    """Every dialogue of the file cut to its first ``turns`` user turns (an error names the
    dialogue that has fewer)."""
    path = Path(path)
    if not path.exists():
        raise ConvsimError("prefix file not found", file=path)
    if turns < 1:
        raise ConvsimError("the number of scripted turns must be at least 1", file=path, field="prefix_turns")
    out, seen = [], set()
    for i, d in enumerate(_dialogues(path)):
        if not isinstance(d, dict):
            raise ConvsimError("a dialogue is a JSON object", file=path, record=i)
        did = str(d.get("dialogue_id") or d.get("session_id") or i)
        if did in seen:  # sessions find their dialogue by id: a second one would never be used
            raise ConvsimError(f"dialogue id {did!r} appears twice", file=path, record=f"#{i}", field="dialogue_id")
        seen.add(did)
        pairs = dialogue_pairs(d, file=path, record=did)
        if len(pairs) < turns:
            raise ConvsimError(f"the dialogue has {len(pairs)} user turn(s), fewer than the {turns} scripted",
                               file=path, record=did, field="prefix_turns")
        out.append({"source": str(path), "dialogue_id": did, "turns": turns, "pairs": pairs[:turns]})
    return out


def attach_prefixes(inits: Iterable[dict], spec: dict | None) -> Iterator[dict]:
    """Give every session its prefix (``spec`` = ``{"file", "turns"}``), lazily: the dialogue with
    the session's id if the file has one, else the i-th (cycling). Sessions that already carry a
    ``prefix`` (from the graph's sessions) keep it."""
    if not spec:
        yield from inits
        return
    prefixes = load_prefixes(spec["file"], int(spec.get("turns", 1)))
    by_id = {p["dialogue_id"]: p for p in prefixes}
    for i, init in enumerate(inits):
        if not isinstance(init, dict) or init.get("prefix"):
            yield init  # a malformed init is reported by the planner, which names the record
            continue
        yield {**init, "prefix": by_id.get(str(init.get("session_id"))) or prefixes[i % len(prefixes)]}


def scripted_pair(state: dict, turn: int) -> dict | None:
    """The scripted (user, system) pair of 1-based ``turn``, or None once the simulator has taken over."""
    prefix = state.get("prefix") or {}
    pairs = prefix.get("pairs") or []
    return pairs[turn - 1] if 1 <= turn <= len(pairs) else None


# --- openevals callables --------------------------------------------------------------------

def prefixed_user(user: Callable | list, pairs: list[dict]) -> Callable:
    """An openevals ``user`` that says the scripted user turns first, then hands over to ``user``
    (a callable, called with the whole trajectory and ``turn_counter`` counting from the first
    simulated turn, or a static list of responses)."""
    def scripted(trajectory, *, thread_id, turn_counter, **kwargs):
        if turn_counter < len(pairs):
            return {"role": "user", "content": pairs[turn_counter]["user"]}
        if isinstance(user, list):
            message = user[turn_counter - len(pairs)]
            return {"role": "user", "content": message} if isinstance(message, str) else message
        return user(trajectory, thread_id=thread_id, turn_counter=turn_counter - len(pairs), **kwargs)
    return scripted


def prefixed_app(app: Callable, pairs: list[dict]) -> Callable:
    """An openevals ``app`` whose replies to the scripted turns are the scripted system replies.
    The app still receives every scripted user message (so its own state follows the dialogue);
    only its answer is replaced while the prefix lasts."""
    seen: dict[str, int] = {}

    def scripted(inputs, *, thread_id, **kwargs):
        answer = app(inputs, thread_id=thread_id, **kwargs)
        n = seen.get(thread_id, 0)
        seen[thread_id] = n + 1
        if n < len(pairs) and pairs[n].get("system") is not None:
            return {"role": "assistant", "content": pairs[n]["system"]}
        return answer
    scripted.__name__ = f"prefixed_{getattr(app, '__name__', 'app')}"
    return scripted
