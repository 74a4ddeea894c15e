"""What the shipped nodes expect of a model's answer text: English, with the words they know.

Every shipped node speaks English to English prompts. The answer check's language test
(convsim.providers.answer_language) reads the words an answer uses; :func:`node_vocabulary` is what
a shipped node knows besides English stop words: the words of the data the project ships
(convsim.catalog.vocabulary), of the prompt templates (prompts/*.txt) and of the group scenario's
preference labels ("Economical Traveler"), plus the words of any ``texts`` the node adds (its
prompt, its session's catalog).

:data:`EnglishTurn` is the same check as a pydantic type, for a turn that comes inside a structured
answer (a group member's utterance, the LLM customer's next line, the group mediator's message):
an answer that fails it is a validation error, re-asked and recorded like any other
(``ChatModel.structured``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Iterable

from pydantic import AfterValidator

from convsim.catalog.vocabulary import shipped_vocabulary
from convsim.providers.answer_language import english_words, language_defect
from convsim.lazy import cached_once

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


@cached_once(maxsize=1)
def _agents_words() -> frozenset[str]:
    from convsim.agents.group.members import OPTIONS
    texts = [p.read_text(encoding="utf-8") for p in sorted(PROMPTS_DIR.glob("*.txt"))]
    texts += [label for labels in OPTIONS.values() for label in labels]
    return shipped_vocabulary() | english_words(texts)


def node_vocabulary(texts: Iterable[str] = ()) -> frozenset[str]:
    """The words a shipped node knows: shipped data, prompt templates, group labels, and ``texts``."""
    extra = english_words(texts)
    return _agents_words() | extra if extra else _agents_words()


def english_turn(text: str) -> str:
    """``text`` if it passes the language test with :func:`node_vocabulary`, else ValueError."""
    why = language_defect(text, vocabulary=node_vocabulary()) if isinstance(text, str) and text.strip() else None
    if why is not None:
        raise ValueError(why)
    return text


EnglishTurn = Annotated[str, AfterValidator(english_turn)]
