"""Response-quality judge (MAS4CS §11): an agent, not a metric.

With a model, the model scores each system response 1-5 against the rubric in
``prompts/service_judge.txt`` (JSON schema ``JudgeVerdict``); an invalid answer is recorded as
a failure with its raw text and no score. With model ``none`` a heuristic judge scores the
same rubric from structured checks and is labelled ``heuristic`` (model ``none``). Every
verdict carries the judge's model, kind and prompt version (first 12 hex digits of the
SHA-256 of the prompt file), so the dataset figure can report them with the failure rate.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from pydantic import BaseModel, Field

from convsim.agents.service.response import prompt_texts as response_prompt_texts
from convsim.providers.models import echoed_prompt

PROMPT_FILE = Path(__file__).parents[2] / "prompts" / "service_judge.txt"
# a raw dict / JSON object in a reply: an opening brace or bracket, then a quoted key and a colon
# ("{'kind': 'search'", '{"score": 4'); no reply meant for a customer is written like that
DATA_DUMP = re.compile(r"""[{\[]\s*['"][^'"\n]{1,40}['"]\s*:""")


class JudgeVerdict(BaseModel):
    score: int = Field(ge=1, le=5, description="1 (useless) to 5 (correct, complete, clear)")
    rationale: str = ""


@functools.lru_cache(maxsize=1)
def prompt_version() -> str:
    return hashlib.sha256(PROMPT_FILE.read_bytes()).hexdigest()[:12]


def heuristic_judge(*, response: str, requested: list[str], informed: dict, grounded: bool,
                    compliant: bool, action_ok: bool, refusal: bool = False,
                    prompt_texts: list[str] | None = None, unstated: list[str] | None = None,
                    text_ungrounded: bool = False) -> dict:
    """Rubric as checks: start at 5; -2 ungrounded (action or response text), -1 policy breach,
    -1 wrong action, -1 a requested fact left unanswered (``informed`` holds only the facts whose
    value the reply text states), -1 the offered entity or the booking reference not in the reply
    text (``unstated``), -1 empty or over 60 words, -2 a raw dict / JSON dump in the reply
    (``{'kind': ...``), -2 a line of the response agent's prompt repeated verbatim
    (``prompt_texts``, default the response prompt and its scaffolding:
    ``convsim.providers.models.echoed_prompt``); floor 1. A reply that is its own prompt (the echo *and* the
    action's dict) scores 1, where the checks above alone gave it 5. A reply that states none of
    its action's acts (``text_ungrounded``: evaluation/service/response_grounding.py) is capped at
    2, whatever the other checks say: "Sorry, I cannot help with that." for a booking scored 5.

    A refusal (the user asked for a domain the system does not serve) is *not scored*: the checks
    say nothing about whether a refusal helped the user, so the heuristic gives no score and
    labels the turn ``refusal_unscored`` instead of a flattering 4 or 5."""
    if refusal:
        return {"score": None, "ok": True, "raw": None, "error": None, "label": "refusal_unscored"}
    score = 5
    if not grounded:
        score -= 2
    if not compliant:
        score -= 1
    if not action_ok:
        score -= 1
    if any(r not in informed for r in requested):
        score -= 1
    if unstated:
        score -= 1
    words = len(response.split())
    if words == 0 or words > 60:
        score -= 1
    if DATA_DUMP.search(response):
        score -= 2
    if echoed_prompt(response, response_prompt_texts() if prompt_texts is None else prompt_texts):
        score -= 2
    if text_ungrounded:
        score = min(score, 2)
    return {"score": max(score, 1), "ok": True, "raw": None, "error": None, "label": "heuristic_scored"}


def judge_turn(model, *, user: str, response: str, checks: dict) -> dict:
    """One verdict ``{score, ok, raw, error, judge, model, prompt_version}``."""
    version = prompt_version()
    if model.is_none:
        verdict = heuristic_judge(response=response, **checks)
        return dict(verdict, judge="heuristic", model="none", prompt_version=version)
    checks = {k: v for k, v in checks.items() if k not in ("refusal", "unstated", "text_ungrounded")}
    messages = [("system", PROMPT_FILE.read_text(encoding="utf-8")),
                ("user", f"User: {user}\nSystem: {response}")]
    answer = model.structured(messages, JudgeVerdict, purpose="judge", retries=2)
    return {"score": answer.value.score if answer.ok else None, "ok": answer.ok,
            "raw": None if answer.ok else answer.raw, "error": answer.error,
            "judge": "llm", "model": getattr(model.spec, "spec", model.spec), "prompt_version": version, "label": "llm"}
