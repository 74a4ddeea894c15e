"""One validity check for every model answer that becomes a turn (an agent's, a simulated user's)
or a verdict (a judge's).

A model server may answer HTTP 200 with text that is no answer at all: random bytes, a NUL inside,
nothing, the prompt sent back, or pages of text. That is the *model's* failure, not infrastructure
(docs/ENGINE_API.md, "How a session ends"): the answer is re-asked as configured
(``retry.answer_attempts``), then recorded as a failure with its raw text. It is never scored as a
turn: the graph flags the session (``agent_checks`` for the system under test, ``simulator_checks``
for a user or a judge).

:func:`answer_defect` says why a text is no answer (None: it passes); :func:`checked_invoke` asks a
chat model, checks and re-asks. The check is deliberately about form, not content: a poor but
well-formed recommendation passes and is scored as what it is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from convsim.providers.answer_text import MAX_ANSWER_CHARS, text_defect, value_defect
from convsim.providers.models import echoed_prompt

__all__ = ["MAX_ANSWER_CHARS", "answer_defect", "value_defect", "CheckedAnswer", "answer_attempts",
           "checked_invoke"]


def answer_defect(text: Any, *, prompt_texts: Iterable[str] = (), max_chars: int = MAX_ANSWER_CHARS,
                  min_words: int = 1) -> str | None:
    """Why ``text`` is no answer, or None when it passes: not a string, empty, undecodable
    (U+FFFD), a character outside text (a control other than tab/newline/CR, a surrogate, a
    private-use character), longer than ``max_chars``
    (``convsim.providers.answer_text``), fewer than ``min_words`` words, or a repeat of a line of
    ``prompt_texts`` (>= 20 characters, ``echoed_prompt``)."""
    why = text_defect(text, max_chars=max_chars)
    if why is not None:
        return why
    stripped = text.strip()
    if min_words > 1 and len(stripped.split()) < min_words:
        return f"answer shorter than {min_words} words"
    echoed = echoed_prompt(stripped, prompt_texts)
    if echoed is not None:
        return f"the answer repeats its prompt: {echoed[:80]!r}"
    return None


@dataclass
class CheckedAnswer:
    """What :func:`checked_invoke` returns: the answer that passed (``ok``), or the last raw answer
    and why it failed; ``raws`` keeps every answer that failed the check, in order."""

    ok: bool
    text: str
    raw: Any
    reason: str | None
    attempts: int
    raws: list = field(default_factory=list)

    def as_record(self) -> dict:
        return {"ok": self.ok, "raw": self.raw, "reason": self.reason, "attempts": self.attempts,
                **({"failed_raws": list(self.raws)} if self.raws else {})}


def answer_attempts(model: Any, default: int = 2) -> int:
    """How often a model answer that fails the check is asked for, the first included: the run's
    ``retry.answer_attempts`` (convsim.providers.retry.RetryPolicy), else ``default``."""
    policy = getattr(model, "retry", None)
    n = getattr(policy, "answer_attempts", None)
    return int(n) if isinstance(n, int) and n >= 1 else default


def checked_invoke(model: Any, messages: Any, *, purpose: str, prompt_texts: Iterable[str] = (),
                   max_chars: int = MAX_ANSWER_CHARS, min_words: int = 1, attempts: int | None = None,
                   strip: str | None = None, **kwargs: Any) -> CheckedAnswer:
    """``model.invoke(messages)``, checked with :func:`answer_defect` and asked again (the same
    request: a sampled model, a cache scope and a fault server each give a fresh answer) until one
    passes or ``attempts`` (default: :func:`answer_attempts`) are spent. Infrastructure errors
    (``ModelUnavailable``) propagate as they are. ``strip``: characters stripped from the answer's
    ends before it is checked and returned (whitespace always)."""
    prompt_texts = list(prompt_texts)
    n = attempts if attempts is not None else answer_attempts(model)
    raws: list = []
    raw, reason = None, None
    for attempt in range(1, max(1, n) + 1):
        raw = model.invoke(messages, purpose=purpose, **kwargs)
        text = raw.strip() if isinstance(raw, str) else raw
        if strip and isinstance(text, str):
            text = text.strip(strip).strip()
        reason = answer_defect(text, prompt_texts=prompt_texts, max_chars=max_chars, min_words=min_words)
        if reason is None:
            return CheckedAnswer(ok=True, text=text, raw=raw, reason=None, attempts=attempt, raws=raws)
        raws.append(raw)
    return CheckedAnswer(ok=False, text=raw if isinstance(raw, str) else "", raw=raw, reason=reason,
                         attempts=max(1, n), raws=raws)
