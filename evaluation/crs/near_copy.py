"""Near-copy of the user's turn: how much of what the user said a reply says again, in any order.

The copy penalty (``tas.copy_penalty``) counts shared word 3- and 4-grams, and the echo flag's
concept test (``nodes.echo_turn``) needs the reply's catalog concepts to be the user's, so a reply
that repeats the user with the words moved, inflected or padded escapes both: "Okay! any more flick
writing of Ethan Coen you could suggest, correct?" shares no 3-gram with "Any more films written by
Ethan Coen you could suggest?" and its extractor reads Ethan Coen as a director, not the writer the
user asked for. This reads the words:

* content words ``C(x)``: the lower-cased tokens of ``tas.tokens`` without English function words
  (scikit-learn's list), conversational filler ("sure", "okay", "right", "noted", ...) and the
  domain's generic words ("film", "movie", "flick", "recommend", "watch", ...), each cut to a crude
  stem (possessive, plural, -ing/-ed: "comedies" -> "comedy", "starring" -> "star");
* two stems match when equal, when one begins the other (4 letters or more: "writ"/"written") or
  when they share their first 5 letters ("drama"/"dramatic", "romance"/"romantic");
* ``near_copy(user, reply)`` = share of C(user) that some word of C(reply) matches: how much of
  the user's turn the reply repeats. ``None`` when either has no content word.

Filler, however much, does not lower it (that is what the copy penalty and a share of the reply's
own words would be fooled by); a synonym of a user's word does (a limit: "suspenseful" for
"thriller" is not seen). The echo flag (``convsim.evaluation.crs.nodes.echo_turn``) uses it with the
threshold ``NEAR_COPY``, measured on the reference agents (docs/crs_shift.md "The echo flag").
"""
from __future__ import annotations

import functools

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from convsim.evaluation.crs.tas import tokens

NEAR_COPY = 0.6  # a reply repeating this share of the user's content words, naming nothing new: an echo
FILLER = frozenset("""
    absolutely actually alright certainly definitely exactly great good nice okay ok sure right
    correct noted got understood understand totally really just maybe perhaps guess want wants
    wanted love like liked looking look let lets say said tell know think sound sounds yes yeah oh
    hmm well thing things tonight today checking check anything else choice taste kind idea ideas
    film films movie movies flick flicks picture pictures cinema watch watching see seeing
    recommend recommendation recommendations suggest suggestion suggestions pick picks option options
""".split())
STOP = ENGLISH_STOP_WORDS | FILLER


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A crude English stem: "comedies" -> "comedy", "starring" -> "star", "films" -> "film"."""
    w = word[:-2] if word.endswith("'s") else word
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    for suffix in ("ing", "ed"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[:-len(suffix)]
            return w[:-1] if len(w) > 3 and w[-1] == w[-2] else w  # "starr" -> "star"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def content_words(text: str) -> set[str]:
    """The stems of a text's content words (function words, filler and generic words dropped);
    a clitic goes with its word ("you'd" is "you"; "don't", a negation, is a function word)."""
    return content_words_of(tokens(text))


@functools.lru_cache(maxsize=65536)
def _content_stem(token: str) -> str | None:
    """The stem a token contributes to :func:`content_words`, None for a function word (a
    per-token memo: the same few hundred words make up most turns)."""
    base, _, clitic = token.partition("'")
    if clitic == "t" or base in STOP:
        return None
    w = stem(base if clitic != "s" else token)
    return None if w in STOP else w


def content_words_of(toks: list[str]) -> set[str]:
    """:func:`content_words` of a text already split by ``tas.tokens``."""
    out = set(map(_content_stem, toks))
    out.discard(None)
    return out


def _match(a: str, b: str) -> bool:
    if a == b or a[:5] == b[:5] and min(len(a), len(b)) >= 5:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short)


def near_copy(user_text: str, system_text: str) -> float | None:
    """Share of the user's content words that the reply repeats (stems matched as above);
    ``None`` when either text has no content word."""
    return near_copy_words(content_words(user_text), content_words(system_text))


def near_copy_words(u: set[str], s: set[str]) -> float | None:
    """:func:`near_copy` of the two texts' :func:`content_words`."""
    if not u or not s:
        return None
    rest = u - s  # the user's words the reply does not repeat as such
    if not rest:
        return 1.0  # every word repeated
    # _match against every reply word x, by set lookups. A word w of 5 letters or more matches
    # when some x shares its first 5 letters, or when some x of 4 letters or more begins w: an x
    # of 5 or more beginning w shares w's first 5 letters, so of these only x = w[:4] is left to
    # look up; and when w begins an x, both are 5 letters or more (or w is x[:4]). A word of 4
    # letters matches when it begins some x (an x of 4 letters beginning it is w itself).
    five = {x[:5] for x in s if len(x) >= 5}
    four = {x[:4] for x in s if len(x) >= 4}
    hits = len(u) - len(rest)
    for w in rest:
        if len(w) >= 5:
            hits += w[:5] in five or w[:4] in s
        elif len(w) == 4:
            hits += w in four
    return hits / len(u)
