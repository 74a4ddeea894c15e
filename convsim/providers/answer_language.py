"""The language part of the answer check: whether a well-formed text is in the language the node
expects (English, for every shipped node), offline and in microseconds.

A model can answer HTTP 200 with clean, decodable, well-formed text that is still no answer:
lorem ipsum, a salad of words, a reply in another language. :func:`language_defect` catches those
from the words alone. An answer's *words* are its runs of letters (a token holding a digit, a
postcode or a time, is no word); it fails when

* at least ``MIN_LETTERS`` of its letters are there and under ``MIN_LATIN_SHARE`` of them are Latin
  script (a reply in Chinese, Russian, Arabic... to an English prompt), or
* it has at least ``MIN_WORDS`` words and under ``MIN_KNOWN_SHARE`` of them are known English words:
  scikit-learn's ``ENGLISH_STOP_WORDS`` (318 function words), the contraction pieces
  (``don't`` -> ``don``, ``t``), 23 chat words (``CHAT_WORDS``: hi, thanks, okay...), and the
  words of 3 letters or more of the ``vocabulary`` the node passes (its catalog's or database's
  words, its prompt's words: convsim.agents.language.node_vocabulary builds the shipped nodes' one;
  a catalog's names hold "la", "el", "y"), or
* it has at least ``MIN_WORDS_FOR_STOP`` words and under ``MIN_STOP_SHARE`` of them are stop words:
  English prose carries function words; a salad of catalog words does not. A *list* is no prose and
  is exempt: when more than ``MAX_LISTED_SHARE`` of its words stand in items of at most
  ``LIST_ITEM_WORDS`` words between separators (``,`` ``;`` ``:`` ``|`` ``/`` brackets, bullets,
  line breaks) -- "Inception, Heat, Alien, Memento, Tenet, Dunkirk, Arrival, Up", or a terse
  agent's "(plan 1), (lookup 1), ..." -- only the known-word rule above judges it.

Shorter answers pass: ``Yes.``, ``Au.``, a film title are answers, and too short to tell. The
thresholds were set on a labelled set (``python bench/answer_language.py`` prints it): 13,698
English texts (WOZ 2.0 and MultiWOZ human turns, OpenDialKG film plots, every turn of 20 sessions of
each shipped scenario, film titles and yes/no answers) fail 4 times (0.03%: address-only WOZ system
turns, one plot); 665 nonsense answers (lorem ipsum, word salads, replies in 13 other languages)
fail 634 times (95.3%). The stop-word rule from 6 words on caught 99.6% of the nonsense but failed
18 English texts (0.13%, terse lists of names): a false failure costs a session, so 8. What it cannot
see: English words in a random order that keep the usual share of function words (a shuffled real
turn) pass, as does a fluent English answer about something else. That needs a model of the
content, not a check of the form.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from convsim.lazy import cached_once

__all__ = ["language_defect", "language_measure", "words_of", "english_words", "LANGUAGES",
           "CHAT_WORDS", "MIN_WORDS", "MIN_KNOWN_SHARE", "MIN_WORDS_FOR_STOP", "MIN_STOP_SHARE",
           "LIST_ITEM_WORDS", "MAX_LISTED_SHARE", "MIN_LETTERS", "MIN_LATIN_SHARE"]

LANGUAGES = ("en",)  # the languages the check knows; None (no language check) is always accepted
MIN_WORDS = 4            # fewer words: too short to tell ("Yes.", a title)
MIN_KNOWN_SHARE = 0.4    # share of words that are English (stop words + the node's vocabulary)
MIN_WORDS_FOR_STOP = 8   # the stop-word share is judged from this many words on
MIN_STOP_SHARE = 0.08    # share of words that are English function words
LIST_ITEM_WORDS = 3      # an item of a list: at most this many words between two separators
MAX_LISTED_SHARE = 2 / 3  # more of the words than this in such items: a list, not prose
MIN_LETTERS = 4          # the script share is judged from this many letters on
MIN_LATIN_SHARE = 0.5    # share of letters in Latin script

_LIST_SEPARATORS = re.compile(r"[,;:|/()\[\]{}\n\u2022\u00b7*]|\s[-\u2013\u2014]\s")
_WORD = re.compile(r"(?<!\w)[^\W\d_]+(?!\w)")  # a whole \w run of letters only
# what an apostrophe leaves of a contraction (don't, I'll, we're, she'd, it's, can't)
_CONTRACTION_PIECES = frozenset("s t ll re ve m d don doesn didn isn aren wasn weren hasn haven hadn won "
                                "wouldn couldn shouldn mustn needn ain shan let o".split())


# what a chat turn says in any domain and scikit-learn's list leaves out: greetings, thanks, assent
CHAT_WORDS = frozenset("hi hello hey thanks thank please yes yeah ok okay sure bye goodbye sorry welcome "
                       "great good nice fine like love want need".split())


@cached_once(maxsize=1)
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words with the contraction pieces."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return frozenset(ENGLISH_STOP_WORDS) | _CONTRACTION_PIECES


def words_of(text: str) -> list[str]:
    """The casefolded words of ``text``: its runs of letters (``\\w`` runs with no digit nor ``_``),
    but single letters other than "a" and "i" (initials, a postcode's ``C.B 2, 1 U.F``)."""
    return [w for w in _WORD.findall(text.casefold()) if len(w) > 1 or w in "ai"]


def english_words(texts: Iterable[str]) -> frozenset[str]:
    """The words of ``texts`` (a catalog's, a prompt's) as a vocabulary for :func:`language_defect`."""
    vocab: set[str] = set()
    for t in texts:
        if isinstance(t, str):
            vocab.update(words_of(t))
    return frozenset(vocab)


def _latin_share(text: str) -> tuple[int, float]:
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            if ch.isascii() or unicodedata.name(ch, "").startswith("LATIN"):
                latin += 1
    return letters, (latin / letters if letters else 1.0)


def language_measure(text: str, vocabulary: Iterable[str] | frozenset[str] = frozenset(),
                     extra: Iterable[str] | frozenset[str] = frozenset()) -> dict:
    """What :func:`language_defect` judges: the number of words, the share of them known (stop
    words, or words of ``vocabulary`` or ``extra`` of 3 letters or more), the share of stop words,
    the share of words standing in list items (``listed_share``), the number of letters and their
    Latin share."""
    vocab = vocabulary if isinstance(vocabulary, (set, frozenset)) else frozenset(vocabulary)
    more = extra if isinstance(extra, (set, frozenset)) else frozenset(extra)
    words = words_of(text)
    stop = stop_words()
    n_stop = sum(w in stop for w in words)
    # a word of the vocabulary counts from 3 letters on: a catalog's names hold "la", "el", "y"
    n_known = sum(w in stop or w in CHAT_WORDS or (len(w) >= 3 and (w in vocab or w in more)) for w in words)
    letters, latin = _latin_share(text)
    n = len(words)
    listed = sum(k for k in map(len, map(words_of, _LIST_SEPARATORS.split(text))) if k <= LIST_ITEM_WORDS)
    return {"words": n, "known": n_known, "stop": n_stop, "known_share": n_known / n if n else 1.0,
            "stop_share": n_stop / n if n else 1.0, "listed_share": listed / n if n else 0.0,
            "letters": letters, "latin_share": latin}


def language_defect(text: str, *, language: str | None = "en",
                    vocabulary: Iterable[str] | frozenset[str] = frozenset(),
                    extra: Iterable[str] | frozenset[str] = frozenset()) -> str | None:
    """Why ``text`` is not in ``language``, or None when it passes (or ``language`` is None).
    ``vocabulary``, ``extra``: the words the node knows besides English stop words (casefolded; see
    :func:`english_words`), two sets so that a large fixed one and a call's own are not copied
    into one. Thresholds: the module's docstring."""
    if language is None:
        return None
    if language not in LANGUAGES:
        raise ValueError(f"no language check for {language!r}; known: {', '.join(LANGUAGES)} (or None)")
    m = language_measure(text, vocabulary, extra)
    if m["letters"] >= MIN_LETTERS and m["latin_share"] < MIN_LATIN_SHARE:
        return (f"not English: {1 - m['latin_share']:.0%} of its {m['letters']} letters are not Latin "
                f"script")
    if m["words"] >= MIN_WORDS and m["known_share"] < MIN_KNOWN_SHARE:
        return (f"not English: {m['known']} of its {m['words']} words are English words "
                f"(under {MIN_KNOWN_SHARE:.0%})")
    if (m["words"] >= MIN_WORDS_FOR_STOP and m["stop_share"] < MIN_STOP_SHARE
            and m["listed_share"] <= MAX_LISTED_SHARE):  # a list is judged by the known-word rule alone
        return (f"not English prose: {m['stop']} of its {m['words']} words are function words "
                f"(under {MIN_STOP_SHARE:.0%}): a list of words, not a sentence")
    return None
