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

**Rejected attributes (E(U) only).** A user that turns down a recommended film names the film's
attributes as the reason: "Not Airplane!: that one is a comedy film and I asked for drama." The
user does not want comedy; it wants drama. :func:`rejected` reads such a value as no user concept,
and :func:`user_concepts` leaves it out of E(U) beside the retracted ones. A value is rejected when
its last mention, within its clause (as above), is

* a description of "the film": after a subject that points at it and a describing verb ("that
  one / that / this (one) / it / which" + "is", "'s", "was", "stars", "features", "has"), with at
  most three words between the verb and the value ("that one is a comedy film", "it's directed by
  X", "that one is from 1999", "it's in French", "it's more of a comedy", "it stars X"),
* not a cleft naming the wish ("it's drama I want", "it's exactly the comedy that I asked for":
  the value followed by "(films) (that) I"),
* in a sentence (the text since the last ``.!?``) that turns something down: "no", "not", a "n't"
  form ("won't do", "isn't"), "asked for", "instead", "rather", "pass on", "skip", "turn down", or
  "but I want / need / meant".
  "I loved Up, it's an animation film." describes a liked film and keeps Animation.

These are the forms of the rule user's reasons (agents/crs/user.py ``rejection_reason``, with the
templates of ``REACTIONS["reject"]``) and of the goal-driven LLM user's instruction
(agents/crs/user_goal.py ``_misfit_phrase``: "it is a comedy film", "it is from 1999", "it is
directed by X", "it is in French"). The value the user says it asked for ("... and I asked for
drama") is in its own clause and stays; so does a wanted person the film lacks ("Tom Hanks isn't in
it", "X didn't direct it": the value comes before the verb, not after a pointing subject). A reply
is not read this way: a reply that says "it's a comedy film" offers comedy.
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


_DESCRIBES = re.compile(
    r"\b(?:that(?:\s+one)?|this(?:\s+one)?|it|which)\s*(?:'s|’s|\s+is|\s+was|\s+stars|\s+features|\s+has)"
    r"(?:\s+[\w'’-]+){0,3}\s+$", re.IGNORECASE)
_CLEFT = re.compile(r"^\s*(?:films?|movies?)?\s*(?:that\s+|which\s+)?(?:i|i'm|i’m|i\s+am)\b", re.IGNORECASE)
_TURNS_DOWN = re.compile(
    r"\b(?:no|not|asked\s+for|instead|rather|pass(?:ing)?\s+on|skip|turn(?:ing)?\s+down|but\s+i\s+(?:really\s+)?(?:want|wanted|need|meant|asked))\b|n't\b|n’t\b",
    re.IGNORECASE)
_SENTENCE_BREAK = re.compile(r"[.!?]")


def rejected(text: str, value: str) -> bool:
    """Whether the last mention of ``value`` in ``text`` names an attribute of a film the user turns
    down ("that one is a comedy film and I asked for drama": Comedy; module docstring); False when
    the value is not spelt in the text."""
    matches = list(_mention(str(value)).finditer(text or ""))
    if not matches:
        return False
    last = matches[-1]
    before, after = text[:last.start()], text[last.end():]
    clause = _CLAUSE_BREAK.split(before)[-1]
    if not _DESCRIBES.search(" " + clause) or _CLEFT.match(after):
        return False
    sentence = _SENTENCE_BREAK.split(before)[-1] + _SENTENCE_BREAK.split(text[last.start():])[0]
    return bool(_TURNS_DOWN.search(sentence))


def user_concepts(text: str, concepts: Iterable) -> list[list[str]]:
    """E(U) of a user turn: ``concepts`` without the values it retracts (:func:`affirmed_concepts`)
    nor the attributes of a film it turns down (:func:`rejected`)."""
    return [c for c in affirmed_concepts(text, concepts) if not rejected(text, c[1])]


def affirmed_concepts(text: str, concepts: Iterable) -> list[list[str]]:
    """``concepts`` ((field, value) pairs found in ``text``) without the values ``text`` retracts,
    as a sorted list of [field, value]."""
    return sorted([str(f), str(v)] for f, v in concepts if not retracted(text, str(v)))
