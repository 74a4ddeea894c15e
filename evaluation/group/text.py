"""Text matching shared by the group-planning vote round and the group metrics.

Pure functions over strings: tokenising, the "informative tokens" of a preference (M8, M10), and
the deterministic window-based polarity scorer of the vote round (reference
``group_and_retrieval.md`` §1b): full phrase match +2; a negation cue within the 4 words before a
match -4; otherwise a positive cue within those 4 words +2; without a full phrase match, +1 per
option word present (each negated word -4); strong rejection when the net score <= -2.
"""

from __future__ import annotations

import re

NEGATION_CUES = frozenset({"no", "not", "don't", "dont", "without", "avoid", "skip", "exclude",
                           "hate", "dislike", "never", "nothing"})
POSITIVE_CUES = frozenset({"want", "prefer", "love", "enjoy", "like", "need", "adore", "fan"})
WINDOW = 4
STRONG_REJECTION = -2

# Function words plus the dialogue's own vocabulary (slot names, politeness, travel fillers): they
# occur in every preference and would make every pair "match".
STOPWORDS = frozenset("""
a an the and or but if of to in on at for with by from as is are was were be been being am it its
this that these those i me my we our us you your he she they them their his her i'd i'm we'd we're
let's lets so very really just also too some any all more most much many can could would should
will shall may might must do does did have has had having please ok okay yes well maybe perhaps
about into than then there here what which who whom how when where why while both each either
one two get got go going think feel sure thing things something kind sort lot lots quite rather
prefer preference want wants love like likes enjoy need needs trip travel traveler travelling
traveling for our day days time stay place places food cuisine attraction attractions event
events lodging room_type house_rule spending purpose type option options choice choose
group family everyone together great nice good best idea honestly personally definitely
""".split())

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words: "don't")."""
    return _TOKEN.findall(str(text).lower().replace("’", "'"))


def negated_positions(tokens: list[str]) -> set[int]:
    """Indices of tokens that have a negation cue within the WINDOW tokens before them."""
    out = set()
    for i in range(len(tokens)):
        if any(t in NEGATION_CUES for t in tokens[max(0, i - WINDOW):i]):
            out.add(i)
    return out


def informative_tokens(text: str, *, k: int = 6, positive_only: bool = False) -> list[str]:
    """The first ``k`` distinct tokens of ``text`` that are not stopwords or cues (len >= 3).

    With ``positive_only`` the tokens under a negation window are skipped, so "no seafood"
    does not make "seafood" something the member asked for.
    """
    toks = tokenize(text)
    neg = negated_positions(toks) if positive_only else set()
    out: list[str] = []
    for i, t in enumerate(toks):
        if (len(t) < 3 or t in STOPWORDS or t in NEGATION_CUES or t in POSITIVE_CUES
                or i in neg or t in out):
            continue
        out.append(t)
        if len(out) == k:
            break
    return out


def _find_phrase(tokens: list[str], phrase: list[str]) -> list[int]:
    n = len(phrase)
    return [i for i in range(len(tokens) - n + 1) if tokens[i:i + n] == phrase]


def cue_score(tokens: list[str], start: int) -> int:
    """The cue part of a match at ``start``: -4 after a negation cue, +2 after a positive one, else 0."""
    before = tokens[max(0, start - WINDOW):start]
    if any(t in NEGATION_CUES for t in before):
        return -4
    if any(t in POSITIVE_CUES for t in before):
        return 2
    return 0


def polarity_score(preference: str, option: str) -> int:
    """Window-based polarity of ``preference`` towards ``option`` (see module docstring).

    Examples: ("I love Italian food", "Italian") -> 2 + 2 = 4;
    ("no Italian please", "Italian") -> 2 - 4 = -2 (a strong rejection);
    ("Italian or Mexican", "Thai") -> 0.
    """
    toks = tokenize(preference)
    opt = tokenize(option)
    if not opt:
        return 0
    hits = _find_phrase(toks, opt)
    if hits:
        return sum(2 + cue_score(toks, i) for i in hits)
    score = 0
    for word in dict.fromkeys(opt):
        if len(word) < 3 or word in STOPWORDS:
            continue
        idx = [i for i, t in enumerate(toks) if t == word]
        if idx:
            score += -4 if any(cue_score(toks, i) < 0 for i in idx) else 1
    return score


def is_strong_rejection(score: int) -> bool:
    return score <= STRONG_REJECTION


def normalize_text(text: str) -> str:
    return " ".join(tokenize(text))
