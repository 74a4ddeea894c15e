"""One validity check for every model answer that becomes a turn (an agent's, a simulated user's)
or a verdict (a judge's).

A model server may answer HTTP 200 with text that is no answer at all: random bytes, a NUL inside,
nothing, the prompt sent back, or pages of text. That is the *model's* failure, not infrastructure
(docs/ENGINE_API.md, "How a session ends"): the answer is re-asked as configured
(``retry.answer_attempts``), then recorded as a failure with its raw text. It is never scored as a
turn: the graph flags the session (``agent_checks`` for the system under test, ``simulator_checks``
for a user or a judge).

Well-formed text can still be no answer: lorem ipsum, a salad of words, a reply in another
language. Where the node knows what it expects it says so: ``language`` (``"en"`` by default in
:func:`checked_invoke`: every shipped prompt is English; see convsim.providers.answer_language) with
the ``vocabulary`` it knows (its catalog's words; the prompt's words are added), and ``expect``, a
format check of its own (a score in range, a plan, ranked ids) returning why the answer is not
what it asked for. Structured answers check their format with their pydantic schema
(``ChatModel.structured``).

:func:`answer_defect` says why a text is no answer (None: it passes); :func:`checked_invoke` asks a
chat model, checks and re-asks. The check is deliberately about form, not content: a poor but
well-formed recommendation passes and is scored as what it is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from convsim.providers.answer_language import english_words, language_defect
from convsim.providers.answer_text import MAX_ANSWER_CHARS, text_defect, value_defect
from convsim.providers.models import echoed_prompt

__all__ = ["MAX_ANSWER_CHARS", "answer_defect", "value_defect", "CheckedAnswer", "answer_attempts",
           "checked_invoke", "message_texts"]

Expect = Callable[[str], "str | None"]


def answer_defect(text: Any, *, prompt_texts: Iterable[str] = (), max_chars: int = MAX_ANSWER_CHARS,
                  min_words: int = 1, language: str | None = None,
                  vocabulary: Iterable[str] | frozenset[str] = frozenset(),
                  extra_words: Iterable[str] | frozenset[str] = frozenset(),
                  expect: Expect | None = None) -> str | None:
    """Why ``text`` is no answer, or None when it passes: not a string, empty, undecodable
    (U+FFFD), a character outside text (a control other than tab/newline/CR, a surrogate, a
    private-use character), longer than ``max_chars``
    (``convsim.providers.answer_text``), fewer than ``min_words`` words, a repeat of a line of
    ``prompt_texts`` (>= 20 characters, ``echoed_prompt``), not in ``language`` (None: not
    checked) with ``vocabulary``, ``extra_words`` and the words of ``prompt_texts`` known
    (``convsim.providers.answer_language``), or not what ``expect`` (the node's format check) wants."""
    why = text_defect(text, max_chars=max_chars)
    if why is not None:
        return why
    stripped = text.strip()
    if min_words > 1 and len(stripped.split()) < min_words:
        return f"answer shorter than {min_words} words"
    prompt_texts = prompt_texts if isinstance(prompt_texts, (list, tuple)) else list(prompt_texts)
    echoed = echoed_prompt(stripped, prompt_texts)
    if echoed is not None:
        return f"the answer repeats its prompt: {echoed[:80]!r}"
    if language is not None:
        extra = english_words(prompt_texts)
        if extra_words:
            extra |= extra_words if isinstance(extra_words, (set, frozenset)) else frozenset(extra_words)
        why = language_defect(stripped, language=language, vocabulary=vocabulary, extra=extra)
        if why is not None:
            return why
    if expect is not None:
        why = expect(stripped)
        if why is not None:
            return f"not the expected format: {why}"
    return None


def message_texts(messages: Any) -> list[str]:
    """The texts of a chat request (``[(role, text)]``, LangChain messages or a string): the words
    a model was given, which its answer may use."""
    if isinstance(messages, str):
        return [messages]
    out = []
    for m in messages or ():
        if isinstance(m, (tuple, list)) and len(m) == 2 and isinstance(m[1], str):
            out.append(m[1])
        elif isinstance(getattr(m, "content", None), str):
            out.append(m.content)
        elif isinstance(m, dict) and isinstance(m.get("content"), str):
            out.append(m["content"])
    return out


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
                   strip: str | None = None, language: str | None = "en",
                   vocabulary: Iterable[str] | frozenset[str] = frozenset(), expect: Expect | None = None,
                   **kwargs: Any) -> CheckedAnswer:
    """``model.invoke(messages)``, checked with :func:`answer_defect` and asked again (the same
    request: a sampled model, a cache scope and a fault server each give a fresh answer) until one
    passes or ``attempts`` (default: :func:`answer_attempts`) are spent. Infrastructure errors
    (``ModelUnavailable``) propagate as they are. ``strip``: characters stripped from the answer's
    ends before it is checked and returned (whitespace always).

    What the node expects: ``language`` (English by default, every shipped prompt being English;
    None: any language) with the ``vocabulary`` it knows besides English stop words (the words of
    ``messages`` are added: an answer may use what it was given), and ``expect``, its own format
    check (``text -> why not, or None``)."""
    prompt_texts = list(prompt_texts)
    given = english_words(message_texts(messages)) if language is not None else frozenset()
    n = attempts if attempts is not None else answer_attempts(model)
    raws: list = []
    raw, reason = None, None
    for attempt in range(1, max(1, n) + 1):
        raw = model.invoke(messages, purpose=purpose, **kwargs)
        text = raw.strip() if isinstance(raw, str) else raw
        if strip and isinstance(text, str):
            text = text.strip(strip).strip()
        reason = answer_defect(text, prompt_texts=prompt_texts, max_chars=max_chars, min_words=min_words,
                               language=language, vocabulary=vocabulary, extra_words=given, expect=expect)
        if reason is None:
            return CheckedAnswer(ok=True, text=text, raw=raw, reason=None, attempts=attempt, raws=raws)
        raws.append(raw)
    return CheckedAnswer(ok=False, text=raw if isinstance(raw, str) else "", raw=raw, reason=reason,
                         attempts=max(1, n), raws=raws)
