"""PEPPER-style judge: proactiveness, coherence and personalization on 1–5 (crs.md §1.7, §4.5).

Fixed relative to the original: the Personalization text describes fit to the user's preferences
(PEPPER's definition described fluency while its anchors described preference fulfilment); the
user's preferences come from the simulator's real preference path (``user_meta``: focus and
constraints per turn, shifts included), not from a regex over user turns; the answer is a
validated JSON object, retried, and a failure is recorded with the raw answer (agents/judge.py).

With model ``none`` a heuristic judge scores the same three criteria and is labelled
``method: "heuristic"``; its definitions are in :func:`heuristic_scores`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from convsim.agents.judge import Judge, format_transcript, verdict_metrics
from convsim import ChatModel

METRICS = ("proactiveness", "coherence", "personalization")


class PepperScores(BaseModel):
    proactiveness: int = Field(ge=1, le=5, description="1-5")
    coherence: int = Field(ge=1, le=5, description="1-5")
    personalization: int = Field(ge=1, le=5, description="1-5")


def user_meta(turn: Mapping) -> dict:
    """The simulator's metadata of a user turn (``meta.user_meta`` or ``meta`` itself)."""
    meta = turn.get("meta") or {}
    inner = meta.get("user_meta")
    return inner if isinstance(inner, dict) else meta


def _is_user(turn: Mapping) -> bool:
    return str(turn.get("speaker", "")).lower() in ("user", "seeker", "customer")


def preference_path(transcript: Sequence[Mapping]) -> list[dict]:
    """Segments of the user's real preferences: one entry per change of focus or constraints,
    ``{"from_turn", "focus": "field=value", "constraints": {...}, "shift": bool}``."""
    path: list[dict] = []
    for turn in transcript:
        if not _is_user(turn):
            continue
        meta = user_meta(turn)
        if "focus_field" not in meta and "constraints" not in meta:
            continue
        focus = f"{meta.get('focus_field')}={meta.get('focus_value')}" if meta.get("focus_field") else None
        constraints = dict(meta.get("constraints") or {})
        if path and path[-1]["focus"] == focus and path[-1]["constraints"] == constraints:
            continue
        path.append({"from_turn": meta.get("turn", turn.get("turn")), "focus": focus,
                     "constraints": constraints, "shift": bool(meta.get("shift_event"))})
    return path


def preference_summary(transcript: Sequence[Mapping]) -> str:
    """The judge's "user preferences": the preference path as short lines, shifts marked."""
    lines = []
    for seg in preference_path(transcript):
        wants = ", ".join(f"{k}: {v}" for k, v in seg["constraints"].items()) or "nothing specific"
        change = " (changed their mind)" if seg["shift"] else ""
        focus = f"; focus on {seg['focus'].replace('=', ' ')}" if seg["focus"] else ""
        lines.append(f"- From turn {seg['from_turn']}{change}: wants {wants}{focus}")
    if not lines:
        users = [str(t.get("text", "")) for t in transcript if _is_user(t)]
        return "(no simulator metadata; the user's own words)\n" + "\n".join(f"- {u}" for u in users)
    return "\n".join(lines)


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the a an and or of to in on for with that this what who how about like some any "
                  "more movie movies film films me i you it is are be do does something".split())


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP}


def _mentions(text: str, value) -> bool:
    return bool(value) and re.search(rf"(?<!\w){re.escape(str(value).lower())}(?!\w)", text.lower()) is not None


def _scale(share: float) -> float:
    return round(1 + 4 * share, 3)


def heuristic_scores(*, transcript: Sequence[Mapping]) -> dict[str, float]:
    """Labelled heuristic stand-in for the LLM judge (model ``none``), each 1 + 4·share:

    * proactiveness: share of system turns that recommend (name a catalog film, ``mentioned_ids``,
      or a title in quotes) or ask a question;
    * coherence: share of system turns sharing a content word with the user turn they answer;
    * personalization: share of user turns with a simulator focus value whose reply mentions that value.
    """
    pairs, pending = [], None
    for turn in transcript:
        if _is_user(turn):
            pending = turn
        elif pending is not None:
            pairs.append((pending, turn))
            pending = None
    if not pairs:
        return dict.fromkeys(METRICS, None)
    pro = coh = 0
    pers, pers_n = 0, 0
    for u, s in pairs:
        text = str(s.get("text", ""))
        smeta = s.get("meta") or {}
        names = [str(x) for x in smeta.get("rec_titles", []) or []]
        if "?" in text or '"' in text or smeta.get("mentioned_ids") or any(_mentions(text, n) for n in names):
            pro += 1
        if _content_words(str(u.get("text", ""))) & _content_words(text):
            coh += 1
        value = user_meta(u).get("focus_value")
        if value:
            pers_n += 1
            pers += _mentions(text, value)
    return {"proactiveness": _scale(pro / len(pairs)), "coherence": _scale(coh / len(pairs)),
            "personalization": _scale(pers / pers_n) if pers_n else None}


PEPPER_JUDGE = Judge(name="pepper", prompt_name="pepper_judge", schema=PepperScores, metrics=METRICS,
                     heuristic=heuristic_scores)


def judge_conversation(model: ChatModel, transcript: Sequence[Mapping], *, retries: int = 2) -> dict:
    """The verdict for one conversation (see agents/judge.py for the record's fields)."""
    variables = {"preferences": preference_summary(transcript), "dialogue": format_transcript(transcript)}
    return PEPPER_JUDGE.judge(model, variables, retries=retries, heuristic_inputs={"transcript": transcript})


def pepper_metrics(verdict: Mapping) -> dict:
    """``judge_proactiveness`` / ``judge_coherence`` / ``judge_personalization`` + failure flags."""
    return verdict_metrics(verdict, METRICS)


def labelled_judge_metrics(verdict: Mapping, *, report_heuristic: bool = False) -> dict:
    """``pepper_metrics`` with the heuristic judge named as such: its scores become
    ``judge_heuristic_<criterion>`` and are left out (only the ``judge_heuristic`` flag and
    ``judge_failed`` remain) unless ``report_heuristic``; an LLM verdict is unchanged."""
    metrics = pepper_metrics(verdict)
    if verdict.get("method") != "heuristic":
        return metrics
    out = {k: v for k, v in metrics.items() if k in ("judge_failed", "judge_heuristic")}
    if report_heuristic:
        out.update({f"judge_heuristic_{m}": metrics.get(f"judge_{m}") for m in METRICS})
    return out
