"""Simulator checks of the CRS user: did the simulated user stay a user with its own profile?

Run over a finished session's state by the engine (``simulator_checks`` in graphs/crs_shift.py); a
flag marks the session ``simulator_failure`` so its scores stay out of the recommender's. They read
the transcript the user actually said, so they cover both paths of the simulator: the rule-based
templates (which must never trip them, tested over many sessions) and the LLM paraphrase (the
"user" model), whose answers can break persona in ways the paraphrase guard does not catch (it only
checks that the stated values survive).

- ``_check_persona``: a user turn speaks as the recommender ("I'd recommend...", "you might enjoy",
  "how can I help", a "System:" label).
- ``_check_ending``: the user says goodbye before its last turn (ended early). Ending *never* cannot
  happen here: the session has a fixed number of turns, or ends on the user's own goodbye (a satisfied
  user, ``end_when_satisfied_prob``), which is then its last turn.
- ``_check_profile``: outside a scripted contradiction or shift, the user negates a constraint its
  own profile holds on that turn ("no comedy" while the profile wants comedy).

The LLM path (``llm_simulator_flags``, run by the graph's ``check_simulator`` node when the
"simulator_judge" model role is set) asks a model the same three questions about the whole
dialogue; its flags are named ``_llm_check_*`` and join the rule-based ones. An unreadable judge
answer flags nothing but is never read as a clean check: ``flags`` is ``None`` and the dialogue
metric ``simulator_judge_failed`` is 1.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, Field

AGENT_VOICE = re.compile(
    r"^\s*(system|assistant|recommender|crs)\s*:|"
    r"\b(i|we)\s*(would|'d|can|could)?\s*(highly\s+)?(recommend|suggest)\b(?!\s+(me|us)\b)|"
    r"\byou\s+(might|would|will|should|could|may)\s+(also\s+)?(enjoy|like|love)\b|"
    r"\bhere\s+(are|is)\s+(some|a few|my|a couple)\b|"
    r"\bhow\s+(can|may)\s+i\s+(help|assist)\b|"
    r"\bas\s+an?\s+(ai|assistant|language model|recommender)\b", re.IGNORECASE)
FAREWELL = re.compile(r"\b(good\s*bye|bye|that'?s all (i need|for now)|i'?m done|have a (good|nice) (day|night))\b",
                      re.IGNORECASE)
# stages where the simulator itself takes a preference back (its own scripted events)
SCRIPTED_REVERSALS = ("contradiction", "shift")


def _user_turns(state: Mapping) -> list[dict]:
    """What the simulator said: scripted opening turns (convsim/running/prefix.py) are not its words."""
    return [t for t in state.get("transcript") or [] if str(t.get("speaker", "")).lower() == "user"
            and not (t.get("meta") or {}).get("scripted")]


def _meta(turn: Mapping) -> dict:
    meta = turn.get("meta") or {}
    return meta.get("user_meta") if isinstance(meta.get("user_meta"), dict) else meta


def _check_persona(state: Mapping) -> list[dict]:
    for t in _user_turns(state):
        m = AGENT_VOICE.search(t.get("text") or "")
        if m:
            return [{"check": "_check_persona", "detail": f"turn {t.get('turn')}: the user speaks as the "
                                                           f"recommender ({m.group(0).strip()!r})"}]
    return []


def _without_titles(turn: Mapping) -> str:
    """The user's text without the film titles it names ("Good Bye Lenin!" is no farewell)."""
    meta, text = _meta(turn), turn.get("text") or ""
    for title in [meta.get("anchor_title"), *(meta.get("mentioned_ids") or [])]:
        if title:
            text = text.replace(str(title), " ")
    return text


def _check_ending(state: Mapping) -> list[dict]:
    turns = _user_turns(state)
    for t in turns[:-1]:
        m = FAREWELL.search(_without_titles(t))
        if m:
            return [{"check": "_check_ending", "detail": f"turn {t.get('turn')} of {turns[-1].get('turn')}: "
                                                          f"the user ends early ({m.group(0)!r})"}]
    return []


def _negates(text: str, value: str) -> bool:
    v = re.escape(value.lower())
    return bool(re.search(rf"\b(not|no|don'?t (want|like)|hate|anything but|except|without)\s+(any\s+)?{v}\b",
                          text.lower()))


def _check_profile(state: Mapping) -> list[dict]:
    for t in _user_turns(state):
        meta = _meta(t)
        if meta.get("stage") in SCRIPTED_REVERSALS:
            continue
        for field, value in (meta.get("constraints") or {}).items():
            if value and _negates(_without_titles(t), str(value)):  # "Not 2001: A Space Odyssey" is a film
                return [{"check": "_check_profile", "detail": f"turn {t.get('turn')}: the user rejects "
                                                                f"{field}={value}, which its profile wants"}]
    return []


CHECKS = (_check_persona, _check_ending, _check_profile)


def crs_simulator_checks(state: Mapping) -> list[dict]:
    """Every flag of every rule-based check, then the simulator judge's (empty: the user behaved;
    ``None``: the judge failed or did not run, nothing to add)."""
    judged = (state.get("simulator_judge") or {}).get("flags") or []
    return [flag for check in CHECKS for flag in check(state)] + list(judged)


# --- the LLM path: a model reads the transcript (model role "simulator_judge") -------------------

class SimulatorVerdict(BaseModel):
    """What the simulator judge answers about the simulated user of one dialogue."""
    broke_persona: bool = Field(description="the USER spoke as the recommender or as an assistant")
    ended_early: bool = Field(description="the USER said goodbye or ended the chat before its last turn")
    contradicted_profile: bool = Field(description="the USER contradicted a preference it stated, without saying it changed its mind")
    turn: int | None = Field(None, description="the first turn where it happened")
    reason: str = Field("", description="one sentence")


SIMULATOR_JUDGE_PROMPT = (
    "You check a SIMULATED USER, not the recommender. Below is a chat between a USER who wants movie "
    "recommendations and a SYSTEM that recommends movies. Judge only the USER's lines: did the USER speak "
    "as the recommender or an assistant, end the chat early, or contradict its own stated preferences "
    "(a stated change of mind is allowed)?\n\n{dialogue}")


def llm_simulator_flags(model, transcript: list[dict]) -> dict:
    """``{"flags": [...], "failed": bool, "raw": text}`` from the simulator judge. A judge answer
    that cannot be read is recorded (``failed``, with the parse ``error``) and flags nothing: a
    broken checker must not drop sessions. Its ``flags`` are then ``None`` (not checked), never
    ``[]``, which means "checked: no problem"; the dialogue metrics ``simulator_judge_failed`` (1)
    and ``simulator_judge_flags`` (None) say so too (evaluation/crs/nodes.py)."""
    lines = "\n".join(f"[turn {t.get('turn')}] {str(t.get('speaker', '')).upper()}: {t.get('text', '')}"
                      for t in transcript if not (t.get("meta") or {}).get("scripted"))
    res = model.structured([("user", SIMULATOR_JUDGE_PROMPT.format(dialogue=lines))], SimulatorVerdict,
                           purpose="simulator_judge")
    if not res.ok:
        return {"flags": None, "failed": True, "raw": res.raw, "error": res.error}
    v = res.value
    where = f"turn {v.turn}: " if v.turn is not None else ""
    flags = [{"check": name, "detail": f"{where}{v.reason} (simulator judge)"}
             for name, hit in (("_llm_check_persona", v.broke_persona), ("_llm_check_ending", v.ended_early),
                               ("_llm_check_profile", v.contradicted_profile)) if hit]
    return {"flags": flags, "failed": False, "raw": res.raw}
