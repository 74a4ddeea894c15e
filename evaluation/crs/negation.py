"""Retracted values: concepts a user turn mentions only to take them back.

E(x), the concept sets the grounded metrics (CC, CR, TAS, segments, recovery, restating) compare,
is the extractor's set minus the values the turn retracts (:func:`affirmed_concepts`), for the user
turn and for the reply alike (a reply that says "no more animation films" does not offer
animation; a verbatim copy of the user still has the user's E(U)). Without this, "I want comedy films. I don't care about Animation
anymore." put (genre, Animation) in E(U), and a reply saying "animation films" shared a concept
with the user: CC rewarded repeating the value the user had just dropped (the review counted 65 of
400 user turns holding such a value). ``TASSettings.user_negation``: ``"drop"`` (default) applies
this; ``"keep"`` is the original extractor's behaviour (the paper's grounded code matched
substrings with no negation; ``configs/crs_paper001.yaml``).

A value is retracted when its **last** mention in the turn (so "maybe not X... no, actually X" is
kept) is, within its clause (the text since the last ``.;!?,:``, "but", "and" or "yes"):

* preceded by a retraction cue: forget, never mind, don't / do not care about, not, no more,
  without, rather than, instead of, except, scratch, skip, drop, enough of, no longer (want);
* or followed by one: "... but I (really) meant", "... no longer matters", "... doesn't / does not
  matter", "... isn't / is not important".

The mention is the value on word boundaries, case-insensitive, with an optional plural ending
("thrillers" for Thriller). A value the extractor found but that is not spelt in the text (a fuzzy or
alias match) is kept. The recommender's constraint tracker (agents/crs/recommender.py) has its own,
narrower list; every form it reads as negated is retracted here too (tests/test_crs_negation.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

NEGATIONS = ("drop", "keep")

_BEFORE = re.compile(
    r"\b(forget|never\s+mind|don't\s+care\s+about|do\s+not\s+care\s+about|not|no\s+more|without|"
    r"rather\s+than|instead\s+of|except|scratch|skip|drop|enough\s+of|no\s+longer(\s+want)?)\b",
    re.IGNORECASE)
_AFTER = re.compile(
    r"^\s*(films?|movies?)?\s*,?\s*(but\s+i\s+(really\s+)?meant\b|no\s+longer\s+matters?\b|"
    r"(doesn't|does\s+not|don't|do\s+not)\s+matter\b|(isn't|is\s+not|aren't|are\s+not)\s+important\b)",
    re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[.;!?,:]|\bbut\b|\band\b|\byes\b", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _mention(value: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(value) + r"(?:e?s)?(?!\w)", re.IGNORECASE)


def retracted(text: str, value: str) -> bool:
    """Whether the last mention of ``value`` in ``text`` retracts it (module docstring); False when
    the value is not spelt in the text."""
    matches = list(_mention(str(value)).finditer(text or ""))
    if not matches:
        return False
    m = matches[-1]
    clause = _CLAUSE_BREAK.split(text[:m.start()])[-1]
    return bool(_BEFORE.search(clause) or _AFTER.match(text[m.end():]))


def affirmed_concepts(text: str, concepts: Iterable) -> list[list[str]]:
    """``concepts`` ((field, value) pairs found in ``text``) without the values ``text`` retracts,
    as a sorted list of [field, value]."""
    return sorted([str(f), str(v)] for f, v in concepts if not retracted(text, str(v)))
