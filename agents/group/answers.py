"""Checks of a model's free text that validated as JSON but says nothing (a weak model's echo).

A small model often fills a schema with the prompt's own words: the answer template's placeholder
("a short text for the group", "<one or two sentences you say to the group>"), a line of the
instructions, or the schema field's name or title (``"Utterance"``). The JSON validates, so
``ChatModel.structured`` returns ``ok``; these checks make such an answer a failed one, to record
with its raw text like any other (the graph then falls back to its rules and flags the session).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from convsim.providers.models import echoed_prompt

_QUOTED = re.compile(r'"([^"\n]+)"')
_NOT_WORD = re.compile(r"[\W_]+")


def prompt_pieces(prompt: str, template: str) -> list[str]:
    """What :func:`convsim.providers.models.echoed_prompt` looks for: the lines of the prompt as sent, then
    every quoted string of its template file (the answer template's placeholders, also without
    the ``<...>`` around them). Quoted strings are taken from the template, not from the inputs
    filled into it: a place name in the candidate list is something an answer may repeat, and a
    quoted ``"{option}"`` is what the answer is asked to say."""
    pieces = list(prompt.splitlines())
    for quoted in _QUOTED.findall(template):
        if "{" not in quoted:
            pieces += [quoted, quoted.strip().strip("<>").strip()]
    return pieces


def _schema_words(schema: type[BaseModel]) -> set[str]:
    words = {schema.__name__}
    for name, info in schema.model_fields.items():
        words |= {name, info.title or name.replace("_", " ").title()}
    return {_NOT_WORD.sub("", w).lower() for w in words}


def empty_or_echo(text: str, prompt: str, template: str, schema: type[BaseModel]) -> str | None:
    """Why ``text`` (a free-text field of a validated answer) is no answer, or None: it is empty,
    only a field name or title of ``schema`` (``"Utterance"``), or repeats a line of ``prompt`` or
    a placeholder of ``template`` (the prompt file) of >= 20 characters verbatim (``echoed_prompt``)."""
    stripped = (text or "").strip()
    if not _NOT_WORD.sub("", stripped):
        return "empty answer text"
    if _NOT_WORD.sub("", stripped).lower() in _schema_words(schema):
        return f"the answer text {stripped!r} is the schema's field name"
    echoed = echoed_prompt(stripped, prompt_pieces(prompt, template))
    if echoed is not None:
        return f"the answer text repeats the prompt: {echoed!r}"
    return None
