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
"thriller" is not seen). The echo flag (``evaluation.crs.nodes.echo_turn``) uses it with the
threshold ``NEAR_COPY``, measured on the reference agents (docs/crs_shift.md "The echo flag").
"""
from __future__ import annotations

import functools

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from evaluation.crs.tas import tokens

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
    out = set()
    for t in tokens(text):
        base, _, clitic = t.partition("'")
        if clitic == "t" or base in STOP:
            continue
        w = stem(base if clitic != "s" else t)
        if w not in STOP:
            out.add(w)
    return out


def _match(a: str, b: str) -> bool:
    if a == b or a[:5] == b[:5] and min(len(a), len(b)) >= 5:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short)


def near_copy(user_text: str, system_text: str) -> float | None:
    """Share of the user's content words that the reply repeats (stems matched as above);
    ``None`` when either text has no content word."""
    u, s = content_words(user_text), content_words(system_text)
    if not u or not s:
        return None
    # _match against every reply word, by set lookups: a word of the reply's 5-letter prefixes
    # (both >= 5 letters), a prefix (>= 4 letters) of a reply word, or a reply word (>= 4) its prefix
    five = {x[:5] for x in s if len(x) >= 5}
    prefixes = {x[:k] for x in s for k in range(4, len(x) + 1)}
    return sum(w in s or len(w) >= 5 and w[:5] in five
               or len(w) >= 4 and (w in prefixes or any(w[:k] in s for k in range(4, len(w))))
               for w in u) / len(u)
