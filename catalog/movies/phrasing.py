"""How a restating reply words the user's concepts ("drama films, Tom Hanks, 1999").

The echo reference recommender says it, and the CRS evaluation scores every reply against it (the
echo share), so it lives below both.
"""
from __future__ import annotations

from convsim.catalog.movies.catalog import FIELDS


def concepts_phrase(concepts) -> str:
    """The user's concepts as one phrase: "drama films, Tom Hanks, 1999"."""
    parts = []
    for field, value in sorted(concepts, key=_phrase_order):
        parts.append(f"{value.lower()} films" if field == "genre" else str(value))
    return ", ".join(parts)


_FIELD_ORDER = {f: k for k, f in enumerate(FIELDS)}


def _phrase_order(concept) -> tuple:
    """:func:`concepts_phrase`'s order: by field (FIELDS' order, any other field last), then value."""
    return _FIELD_ORDER.get(concept[0], 99), concept[1]


def echo_reply(user_concepts) -> str:
    """What the echo reference says: the user's concepts restated, no film."""
    if not user_concepts:
        return "Noted. Tell me more about what you would like."
    return f"Noted: you want {concepts_phrase(user_concepts)}. Anything else?"
