"""The character-level part of the answer check (no imports of the model handle): whether a text
is text at all. ``convsim.providers.models.ChatModel.structured`` and
``convsim.providers.answer_check`` both use it."""
from __future__ import annotations

import unicodedata
from typing import Any

MAX_ANSWER_CHARS = 8000  # an answer longer than this is no turn (a runaway generation)
ALLOWED_CONTROLS = frozenset("\t\n\r")
# Unicode categories that no answer text holds: controls (NUL, ESC, C1 bytes decoded as Latin-1),
# lone surrogates and private-use code points. U+FFFD is what an undecodable byte sequence became
# (convsim.providers.models.valid_text): the answer was not text. Code points unassigned in this
# Python's Unicode tables are *not* refused: a newer emoji is text.
_BAD_CATEGORIES = {"Cc": "control character", "Cs": "lone surrogate", "Co": "private-use character"}


def text_defect(text: Any, *, max_chars: int = MAX_ANSWER_CHARS) -> str | None:
    """Why ``text`` is not answer text, or None: not a string, empty, undecodable (U+FFFD), a
    control character other than tab/newline/CR, a lone surrogate or a private-use character, or
    longer than ``max_chars``."""
    if not isinstance(text, str):
        return f"the answer is not text ({type(text).__name__})"
    if not text.strip():
        return "empty answer"
    if "\ufffd" in text:
        return f"undecodable text (U+FFFD at offset {text.index(chr(0xfffd))})"
    for i, ch in enumerate(text):
        if ch in ALLOWED_CONTROLS:
            continue
        kind = _BAD_CATEGORIES.get(unicodedata.category(ch))
        if kind is not None:
            return f"{kind} U+{ord(ch):04X} at offset {i}"
    if len(text) > max_chars:
        return f"answer of {len(text)} characters, over the bound of {max_chars}"
    return None


def value_defect(value: Any, *, max_chars: int = MAX_ANSWER_CHARS) -> str | None:
    """The first defect of a string inside a parsed (JSON) answer: :func:`text_defect` on every
    string, key or value, at any depth (an escaped ``\\u0000`` in a JSON answer is a NUL once
    parsed). Empty strings pass here: a schema says which may be empty."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, str) and v.strip():
            why = text_defect(v, max_chars=max_chars)
            if why is not None:
                return why
    return None
