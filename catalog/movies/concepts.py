"""The concept extractor E(x) of the CRS-shift scenario: grounded (field, value) pairs found in an utterance.

The original extractor tested ``value in text.lower()`` for every catalog value, so "next" gave
genre=ex, "every" gave actor=eve and "longer" gave language=ger (crs.md §1.3, §1.10). Here:

- text is split into word tokens (Unicode ``\\w+``, accents and case folded), so a value can only
  match whole words; punctuation between words is ignored ("sci-fi" = "sci fi", "J.K." = "J K");
- every value and title of the catalog sits in one token trie; at each position the longest
  phrase wins and its tokens are consumed ("Science Fiction" never also yields "Fiction";
  "The Sound of Music" is a title, not genre=Music). Lookup cost is O(tokens x longest phrase),
  independent of catalog size;
- values made only of common words ("Flea", "You"), person names of <= 3 characters ("RZA",
  "McG") and single-word titles ("Up", "Heat") match only with the catalog's own capitalisation;
- genre aliases ("sci-fi", "romcom", "animated"), 4-digit years 1900-2029 that the catalog has,
  optional decades ("90s"), and a rapidfuzz fallback for near-miss person names on unmatched
  capitalised multi-word spans.

Speed: ASCII text is split in C (:class:`_Text`), the offsets of the few tokens a check needs are
found on demand, a trie node knows which of its entries need no check and, once met, what they
resolve to (:class:`_Ends`, :meth:`ConceptExtractor._plan`), the last role cue is one regex match,
and years and near-miss names only look at the words the matches left. Nothing is remembered per
text. The outputs are those of the plain algorithm (tests/test_concepts_equivalence.py pins them).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from itertools import accumulate

from rapidfuzz import fuzz, process

from convsim.catalog.movies.catalog import FIELDS, MovieCatalog

PERSON_FIELDS = ("actor", "director", "writer")

# Common English and film-talk words. A value or title made only of these must match with the
# catalog's capitalisation, because in lower case they are ordinary words ("flea market").
COMMON_WORDS = frozenset("""
a about above after again against all almost also am an and another any anything are around as
at away back be because been before being below best better between big both but by can cannot
could day did do does doing done down during each either else enough even ever every few film
films find first for from get give go going good got great had has have having he her here hers
him his how i if in into is it its just keep kind know last least less like little long look lot
love made make many may maybe me might more most movie movies much must my myself need never new
next no not nothing now of off old on once one only or other our out over own please pretty
quite rather really recommend right said same say see seen should show so some something still
such suggest sure take than that the their them then there these they thing things think this
those though through to too try two under until up us very want was watch we well were what
when where which while who why will with without would yes yet you your yours ex eve ger fre spa
flea open get stand inside go home alone speed drive fire ice man men woman women boy girl
mother father son king queen star world time life night light dark big up her heat rush moon
common pink sting slash tricky vanity unknown
""".split())

# Set phrases that contain a trap value: as the longer match they consume "Eve" in
# "Christmas Eve" (an actor in OpenDialKG) and ground nothing.
BLOCKED_PHRASES = ("christmas eve", "new year s eve", "new years eve", "all hallows eve")

# Spoken forms of genres, mapped to the canonical genres they ground (only those in the catalog).
GENRE_ALIASES: dict[str, tuple[str, ...]] = {
    "sci fi": ("Science Fiction",), "scifi": ("Science Fiction",),
    "science fiction": ("Science Fiction",),
    "romcom": ("Romance", "Comedy"), "rom com": ("Romance", "Comedy"),
    "romcoms": ("Romance", "Comedy"), "rom coms": ("Romance", "Comedy"),
    "romantic comedy": ("Romance", "Comedy"), "romantic comedies": ("Romance", "Comedy"),
    "romantic": ("Romance",), "romances": ("Romance",),
    "animated": ("Animation",), "cartoon": ("Animation",), "cartoons": ("Animation",),
    "anime": ("Animation",), "comedies": ("Comedy",), "dramas": ("Drama",),
    "thrillers": ("Thriller",), "westerns": ("Western",), "musicals": ("Musical",),
    "documentaries": ("Documentary",), "biopic": ("Biography",),
    "biopics": ("Biography",), "biographical": ("Biography",), "historical": ("History",),
    "mysteries": ("Mystery",), "whodunit": ("Mystery",), "sports": ("Sport",),
    "horror": ("Horror",), "horrors": ("Horror",), "scary": ("Horror",),
    "family friendly": ("Family",), "independent film": ("Indie",), "indie": ("Indie",),
}

# Genres that are also everyday nouns ("love, war and family"): they count as a genre only in
# genre context, i.e. followed (through a list of genre words) by a film noun, or after "genre".
CONTEXT_GENRES = frozenset({"action", "adventure", "crime", "family", "fantasy", "history", "music",
                            "mystery", "romance", "sport", "war"})
_FILM_NOUNS = frozenset("film films movie movies flick flicks genre genres picture pictures "
                        "one ones story stories drama dramas".split())
_LIST_WORDS = frozenset("and or".split())
# Role cues that say which field a person's name fills ("directed by X", "X's directing").
_ROLE_BEFORE = (("director", re.compile(r"\b(directed by|director|directors|direction of|by director)\b", re.I)),
                ("writer", re.compile(r"\b(written by|writer|writers|screenplay by|script by)\b", re.I)),
                ("actor", re.compile(r"\b(starring|stars|star|with|actor|actress|actors|featuring|cast)\b", re.I)))
_ROLE_AFTER = (("director", re.compile(r"^'s\s+(directing|direction)", re.I)),
               ("writer", re.compile(r"^'s\s+(writing|script)", re.I)),
               ("actor", re.compile(r"^'s\s+(acting|performance)", re.I)))
_ROLE_ANY = re.compile("|".join(f"(?P<{field}>{cue.pattern})" for field, cue in _ROLE_BEFORE), re.I)
# The last cue of _ROLE_ANY in the last clause of a text, in one match: "(?s:.*)" runs to the end
# and gives back one character at a time until a cue matches that no clause end follows (a cue
# holds none), so the match is the cue that starts last in the last clause. That is the last match
# of _ROLE_ANY.finditer in that clause, or a cue inside it (non-overlapping matches skip those);
# the only cue a cue can hold is "director" (in "by director"), of the same field. The lookahead
# (the letters cues start with) only skips positions where no cue starts, faster.
_ROLE_LAST = re.compile("(?s:.*)(?=[dbwsafc])(?:" + _ROLE_ANY.pattern + ")(?=[^.;!?]*\\Z)", re.I)
_CLAUSE_END = re.compile(r"[.;!?]")
_ROLE_WINDOW = 60  # characters before a name in which a role cue still applies ("starring A, B and C")
_TOKEN = re.compile(r"\w+")
_SPLIT = re.compile(r"(\w+)")  # splits into separator, token, separator, ..., token, separator
_ASCII_WORD = frozenset(c for c in map(chr, range(128)) if _TOKEN.fullmatch(c))  # [A-Za-z0-9_]
# A bytes.translate table that makes every byte but [A-Za-z0-9_] a space: the whitespace-split of
# ASCII text so translated is _TOKEN.findall(text), in one C pass each.
_ASCII_SPACED = bytes(ord(c) if c in _ASCII_WORD else 32 for c in map(chr, range(256)))
_DIGIT = re.compile(r"\d")
_YEAR = re.compile(r"(19\d\d|20[0-2]\d)")
_DECADE = re.compile(r"(?:(19|20)?(\d)0)s")
_QUOTES = "\"'“”‘’«»`"
_CONNECTORS = frozenset("of the a an and in on at to for with from by de la le du des del".split())
_END = None  # trie key under which a node keeps the phrases ending there


@functools.lru_cache(maxsize=65536)
def strip_accents(token: str) -> str:
    decomposed = unicodedata.normalize("NFKD", token)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@functools.lru_cache(maxsize=65536)
def fold(token: str) -> str:
    """Case- and accent-insensitive form of a token ("Amélie" -> "amelie")."""
    return strip_accents(token.casefold())


def _tokens(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]


def _initial(text: str, start: int) -> bool:
    """Whether what precedes ``start``, quotes and blanks aside, is nothing or a sentence's end."""
    before = text[:start].rstrip(" \t" + _QUOTES)
    return not before or before[-1] in ".!?\n:;"


class _Text:
    """A text as the scan reads it: its word tokens as written (``words``) and folded
    (``folded``, what the trie is keyed by), and the tokens' offsets, found on demand.

    ASCII text (most of it) is split without a Python-level loop over its tokens: its bytes with
    every non-word byte made a space, split at the spaces, give the words, and lowered, the folded
    words (for ASCII ``lower()`` is the fold). Only a few tokens' offsets are ever needed (to
    check a quote or a sentence start before a word, a genre word's clause, a name's role cue):
    token k starts at the (c+1)-th occurrence of ``words[k]`` in the text that is a whole token,
    c being how often ``words[k]`` occurs among the tokens before it. Other text is split with
    :data:`_SPLIT` (separators and tokens, from which the offsets are summed when needed)."""
    __slots__ = ("text", "ascii", "words", "folded", "_parts", "_cum")

    def __init__(self, text: str):
        self.text, self._cum = text, None
        if text.isascii():
            spaced = text.encode().translate(_ASCII_SPACED).decode()
            self.ascii, self._parts = True, None
            self.words = spaced.split()
            self.folded = spaced.lower().split()
        else:
            parts = self._parts = _SPLIT.split(text)  # separator, token, separator, ..., token, separator
            self.ascii = False
            self.words = parts[1::2]
            self.folded = [fold(t) for t in self.words]

    def start(self, k: int) -> int:
        """Offset of token k in the text."""
        if self.ascii:
            text, words = self.text, self.words
            word = words[k]
            skip, size = 0 if words.index(word) == k else words[:k].count(word), len(word)
            at = text.find(word)
            while True:  # at: an occurrence of word; a token when no word character borders it
                end = at + size
                if (at == 0 or text[at - 1] not in _ASCII_WORD) and \
                        (end == len(text) or text[end] not in _ASCII_WORD):
                    if not skip:
                        return at
                    skip -= 1
                at = text.find(word, at + 1)
        cum = self._cum
        if cum is None:  # cum[2k]: the length of parts[:2k+1], i.e. where token k starts
            cum = self._cum = list(accumulate(map(len, self._parts)))
        return cum[2 * k]

    def end(self, k: int) -> int:
        """Offset just after token k."""
        return self.start(k) + len(self.words[k])

    def between(self, k: int) -> str:
        """The text between tokens k - 1 and k (k >= 1)."""
        if self.ascii:
            end = self.end(k - 1)  # token k is the next occurrence of its word: no word character is between
            return self.text[end:self.text.find(self.words[k], end)]
        return self._parts[2 * k]

    def exact(self, i: int, j: int) -> tuple[str, ...]:
        """Tokens i..j-1 as written, accents stripped (what an entry's ``exact`` is compared with)."""
        if self.ascii:  # ASCII has no accents
            return tuple(self.words[i:j])
        return tuple(strip_accents(t) for t in self.words[i:j])


def _gaps(n: int, matches) -> list[tuple[int, int]]:
    """The spans of tokens (of n) that no match covers, as (start, end) pairs."""
    gaps, at = [], 0
    for i, j, _ in matches:
        if i > at:
            gaps.append((at, i))
        at = j
    if at < n:
        gaps.append((at, n))
    return gaps


def _index(words: list[str], word: str, start: int) -> int:
    """``words.index(word, start)``, or -1."""
    try:
        return words.index(word, start)
    except ValueError:
        return -1


def _consumed(n: int, matches) -> list[bool]:
    """For each of n tokens whether a match covers it."""
    consumed = [False] * n
    for i, j, _ in matches:
        consumed[i:j] = [True] * (j - i)
    return consumed


class _Entry:
    """One phrase in the trie: a field value (kind "value") or a catalog title (kind "title")."""
    __slots__ = ("kind", "field", "value", "exact", "case_exact", "not_initial", "quoted", "free",
                 "pair")

    def __init__(self, kind, field, value, exact, case_exact, not_initial=False, quoted=False):
        self.kind, self.field, self.value, self.exact = kind, field, value, exact
        self.case_exact, self.not_initial, self.quoted = case_exact, not_initial, quoted
        self.free = not (case_exact or not_initial or quoted)  # matches wherever its words occur
        self.pair = (field, value)


class _Ends(list):
    """The entries of the phrases that end at a trie node, plus what a scan accepts there without
    a check: ``all_free`` (no entry needs one) and ``free_values`` (the entries other than titles,
    in order, when none of them needs one; else None)."""
    __slots__ = ("all_free", "free_values", "plan")

    def __init__(self):  # (an empty list needs no list.__init__)
        self.all_free, self.free_values, self.plan = True, (), None  # plan: see ConceptExtractor._plan

    def add(self, entry: _Entry) -> None:
        self.append(entry)
        if not entry.free:
            self.all_free = False
        if entry.kind != "title" and self.free_values is not None:
            self.free_values = self.free_values + (entry,) if entry.free else None


class ConceptExtractor:
    """E(x): grounded (field, canonical value) pairs of a catalog found in a text."""

    def __init__(self, catalog: MovieCatalog, *, fields=FIELDS,
                 fuzzy_threshold: float | None = 92.0, min_value_len: int = 3,
                 consume_titles: bool = True, expand_decades: bool = False):
        unknown = [f for f in fields if f not in FIELDS]
        if unknown:
            raise ValueError(f"unknown fields {unknown}; expected a subset of {FIELDS}")
        self.catalog = catalog
        self.fields = tuple(fields)
        self.fuzzy_threshold = fuzzy_threshold
        self.min_value_len = min_value_len
        self.consume_titles = consume_titles
        self.expand_decades = expand_decades
        self._recurring: dict[str, frozenset] = {}  # see extract_recurring
        self._years = frozenset(catalog.values("year")) if "year" in self.fields else frozenset()
        # the years _years_in finds as tokens
        self._year_words = frozenset(y for y in self._years if len(y) == 4 and _YEAR.fullmatch(y))
        self._genre_words = frozenset(fold(g) for g in catalog.values("genre")) | frozenset(GENRE_ALIASES)
        self._trie: dict = {}
        for field in self.fields:
            if field != "year":
                for value in catalog.values(field):
                    self._add_value(field, value)
        if "genre" in self.fields:
            genres = set(catalog.values("genre"))
            for alias, targets in GENRE_ALIASES.items():
                for target in targets:
                    if target in genres:
                        self._insert(alias.split(), _Entry("value", "genre", target, None, False))
        for movie in catalog.movies:
            self._add_title(movie.id, movie.title)
        for phrase in BLOCKED_PHRASES:
            self._insert(phrase.split(), _Entry("blocked", "", "", None, False))
        # Fuzzy candidates grouped by token count so a 2-word span only meets 2-word names.
        # Blocking: a span is only compared with names of the same length that share one exact
        # word with it ("Cristopher Nolan" meets the "nolan" block), so spans of ordinary
        # capitalised words cost a dict lookup; a typo in every word of a name is missed.
        self._names_by_len: dict[int, list[str]] = {}
        self._blocks: dict[tuple, list[str]] = {}
        self._name_fields: dict[str, list[tuple[str, str]]] = {}
        for field in PERSON_FIELDS:
            if field in self.fields:
                for value in catalog.values(field):
                    key = " ".join(fold(t) for _, _, t in _tokens(value))
                    if len(key.split()) >= 2:
                        self._name_fields.setdefault(key, []).append((field, value))
        for key in sorted(self._name_fields):
            words = key.split()
            self._names_by_len.setdefault(len(words), []).append(key)
            for word in set(words):
                self._blocks.setdefault((len(words), word), []).append(key)
        self._name_words = frozenset(word for _, word in self._blocks)  # words of some blocked name

    # ----- building -------------------------------------------------------------------------
    def _insert(self, folded: list[str], entry: _Entry) -> None:
        node = self._trie
        for token in folded:
            node = node.setdefault(token, {})
        ends = node.get(_END)
        if ends is None:
            ends = node[_END] = _Ends()
        ends.add(entry)

    def _add_value(self, field: str, value: str) -> None:
        exact = [strip_accents(t) for _, _, t in _tokens(value)]
        folded = [fold(t) for t in exact]
        length = sum(len(t) for t in folded)
        if not folded or length < self.min_value_len:
            return  # too short to be told apart from noise
        all_common = all(t in COMMON_WORDS for t in folded)
        if all_common and value == value.lower():
            return  # a lower-case common word ("ex", "film") is a Freebase subject, not a name
        short_person = field in PERSON_FIELDS and length <= 3
        # A one-word name that is also a word ("Common", "Eve") must not start a sentence either.
        self._insert(folded, _Entry("value", field, value, tuple(exact), all_common or short_person,
                                    not_initial=all_common and len(folded) == 1))

    def _add_title(self, movie_id: str, title: str) -> None:
        exact = [strip_accents(t) for _, _, t in _tokens(title)]
        folded = [fold(t) for t in exact]
        if not folded:
            return
        if len(folded) == 1:
            word = folded[0]
            # "Up", "Heat", "1917", "M": only as written, and not as a sentence's first word.
            entry = _Entry("title", "title", movie_id, tuple(exact), True,
                           not_initial=word in COMMON_WORDS,
                           quoted=word.isdigit() or len(word) <= 2)
        else:
            entry = _Entry("title", "title", movie_id, tuple(exact),
                           all(t in COMMON_WORDS for t in folded))
        self._insert(folded, entry)

    # ----- scanning -------------------------------------------------------------------------
    _initial = staticmethod(_initial)

    @staticmethod
    def _accept(entry: _Entry, doc: _Text, i: int, j: int) -> bool:
        if entry.case_exact and doc.exact(i, j) != entry.exact:
            return False
        if entry.quoted or entry.not_initial:
            text, start = doc.text, doc.start(i)
            quoted = start > 0 and text[start - 1] in _QUOTES
            if entry.quoted and not quoted:
                return False
            if entry.not_initial and not quoted and _initial(text, start):
                return False
        return True

    def _scan(self, text: str, *, titles: bool = True):
        """Longest-first matches ``(start_token, end_token, [accepted entries])``, and the text's
        tokens (a :class:`_Text`). With ``titles=False`` catalog titles are ignored (they neither
        match nor consume). A trie node's ends that need no check (:class:`_Ends`) are taken as
        they are; the others are checked one by one (:meth:`_accept`)."""
        doc = _Text(text)
        folded, trie, accept = doc.folded, self._trie, self._accept
        matches, n, resume = [], len(folded), 0
        for i, word in enumerate(folded):
            node = trie.get(word)
            if node is None or i < resume:
                continue  # the word starts no phrase, or is inside the previous match
            best, j = None, i + 1
            while True:  # node: the phrases' trie after folded[i:j]
                ends = node.get(_END)
                if ends is not None:
                    if titles:
                        ok = ends if ends.all_free else [e for e in ends if e.free or accept(e, doc, i, j)]
                    else:
                        ok = ends.free_values
                        if ok is None:
                            ok = [e for e in ends if e.kind != "title" and (e.free or accept(e, doc, i, j))]
                    if ok:
                        best = (i, j, ok)
                if j == n:
                    break
                node = node.get(folded[j])
                if node is None:
                    break
                j += 1
            if best is not None:
                matches.append(best)
                resume = best[1]
        return doc, matches

    RECURRING_KEPT = 4096

    def extract_recurring(self, text: str) -> frozenset[tuple[str, str]]:
        """:meth:`extract`, remembered: for texts that recur, like those built from a few concepts
        (the echo reference's reply, scored every turn). At most ``RECURRING_KEPT`` are kept."""
        found = self._recurring.get(text)
        if found is None:
            if len(self._recurring) >= self.RECURRING_KEPT:
                self._recurring.clear()
            found = self._recurring[text] = self.extract(text)
        return found

    def extract(self, text: str) -> frozenset[tuple[str, str]]:
        """Grounded (field, canonical value) pairs mentioned in ``text``.

        A span that is a catalog title is the film, not a field value ("Zulu", "The Good
        German"), unless the field's context says otherwise ("films in Zulu"); a person named
        once is one concept (the role its cue names, else the field with most films); a genre
        that is an everyday noun counts only in genre context."""
        doc, matches = self._scan(text, titles=self.consume_titles)
        folded = doc.folded
        concepts: set[tuple[str, str]] = set()
        for i, j, entries in matches:
            if len(entries) == 1:  # the common case: one value or one title, nothing to resolve
                e = entries[0]
                if e.kind == "value" and (e.field != "genre" or j - i > 1 or folded[i] not in CONTEXT_GENRES
                                          or self._genre_context(doc, i, j)):
                    concepts.add(e.pair)
                continue
            if entries.__class__ is _Ends:  # all of a node's entries: their resolution is mostly known
                plan = entries.plan
                if plan is None:
                    plan = entries.plan = self._plan(entries, " ".join(folded[i:j]))
                if plan:
                    pairs, by_cue, fallback = plan
                    concepts.update(pairs)
                    if by_cue is not None:
                        concepts.add(by_cue.get(self._cue(doc, i, j), fallback))
                    continue
            values = [e for e in entries if e.kind == "value"]
            if len(values) < len(entries) and any(e.kind == "title" for e in entries):
                values = [e for e in values if self._field_context(e.field, doc, i, j)]
            values = [e for e in values if e.field != "genre" or " ".join(folded[i:j]) not in CONTEXT_GENRES
                      or self._genre_context(doc, i, j)]
            concepts.update(self._one_person(values, doc, i, j))
        # Years and near-miss names come from the words no match covers. A year is a token that is
        # a catalog year (_year_words) in a text with a decimal digit (the fold reads "²⁰⁰⁸" as
        # "2008", \d does not); a near-miss name needs a word of some name (_name_words).
        if self.expand_decades:
            if self._years:
                concepts.update(self._years_in(text, folded, _consumed(len(folded), matches)))
        elif not self._year_words.isdisjoint(folded) and (doc.ascii or _DIGIT.search(text)):
            for word in self._year_words.intersection(folded):
                k = -1
                while (k := _index(folded, word, k + 1)) >= 0:  # each of its tokens, until one is unmatched
                    if not any(i <= k < j for i, j, _ in matches):
                        concepts.add(("year", word))
                        break
        if self.fuzzy_threshold is not None and self._names_by_len and not self._name_words.isdisjoint(folded):
            self._fuzzy_names(doc, matches, concepts)
        return frozenset(concepts)

    def _genre_context(self, doc: _Text, i: int, j: int) -> bool:
        """A genre word followed, through a list of genre words ("war and family"), by a film
        noun in the same clause, or preceded by "genre"."""
        folded = doc.folded
        if i > 0 and folded[i - 1] in ("genre", "genres"):
            return True
        k, n = j, len(folded)
        while k < n and not _CLAUSE_END.search(doc.between(k)):
            word = folded[k]
            if word in _FILM_NOUNS:
                return True
            if word not in _LIST_WORDS and word not in CONTEXT_GENRES and word not in self._genre_words:
                return False
            k += 1
        return False

    def _field_context(self, field: str, doc: _Text, i: int, j: int) -> bool:
        """Whether a span that is also a title is meant as a value of ``field``."""
        folded = doc.folded
        before = folded[i - 1] if i > 0 else ""
        if field == "language":
            return before in ("in", "spoken") or (j < len(folded) and folded[j] in ("language", "dubbed"))
        if field == "genre":
            return self._genre_context(doc, i, j)
        if field == "year":
            return before in ("from", "in", "of")
        return False  # a person whose name is a title: the title wins

    def _plan(self, ends: _Ends, phrase: str):
        """What the entries of a trie node (``phrase``), all accepted, resolve to when that does not
        depend on the text: ``(pairs, by_cue, fallback)``, the person a role cue picks being
        ``by_cue.get(cue, fallback)`` (``by_cue`` None: no person to pick); or () when it does
        (a title among them: the field's context decides; a genre that is an everyday noun).
        The same as the general path of :meth:`extract` (:meth:`_one_person`)."""
        if any(e.kind == "title" for e in ends):
            return ()
        values = [e for e in ends if e.kind == "value"]
        if phrase in CONTEXT_GENRES and any(e.field == "genre" for e in values):
            return ()
        persons = [e for e in values if e.field in PERSON_FIELDS]
        if len(persons) <= 1:
            return [e.pair for e in values], None, None
        fields = {e.field: e for e in persons}
        return ([e.pair for e in values if e.field not in PERSON_FIELDS],
                {field: (field, e.value) for field, e in fields.items()}, self._best_person(persons).pair)

    def _best_person(self, persons: list[_Entry]) -> _Entry:
        """The person entry with most films in the catalog (the first field of PERSON_FIELDS on a tie)."""
        return max(persons, key=lambda e: (self.catalog.doc_freq(e.field, e.value), -PERSON_FIELDS.index(e.field)))

    def _one_person(self, values, doc: _Text, i: int, j: int):
        persons = [e for e in values if e.field in PERSON_FIELDS]
        if len(persons) <= 1:
            return [e.pair for e in values]
        others = [e.pair for e in values if e.field not in PERSON_FIELDS]
        fields = {e.field: e for e in persons}
        cued = self._cue(doc, i, j)
        if cued in fields:
            return others + [(cued, fields[cued].value)]
        return others + [self._best_person(persons).pair]

    @staticmethod
    def _role_cue(text: str, start: int, end: int) -> str | None:
        """The field a role cue gives the name at text[start:end] (after it, else before it)."""
        return ConceptExtractor._role_after(text, end) or ConceptExtractor._role_before(text, start)

    @staticmethod
    def _role_after(text: str, end: int) -> str | None:
        if text[end:end + 2].lower() == "'s":  # what every _ROLE_AFTER cue starts with
            for field, cue in _ROLE_AFTER:
                if cue.match(text[end:]):
                    return field
        return None

    @staticmethod
    def _role_before(text: str, start: int) -> str | None:
        m = _ROLE_LAST.match(text[max(0, start - _ROLE_WINDOW):start])  # the last cue wins
        return m.lastgroup if m else None

    def _cue(self, doc: _Text, i: int, j: int) -> str | None:
        """:meth:`_role_cue` of tokens i..j-1. An "'s" after them makes "s" the next token's first
        letter (casefolded): only then is their end looked for."""
        if j < len(doc.folded) and doc.folded[j][:1] == "s":
            field = self._role_after(doc.text, doc.end(j - 1))
            if field is not None:
                return field
        return self._role_before(doc.text, doc.start(i))

    def _years_in(self, text, folded, consumed):
        """Years and, with ``expand_decades``, the catalog years of decades ("90s")."""
        if not _DIGIT.search(text):
            return
        years = self._years
        for k, word in enumerate(folded):
            if consumed[k] or not word[0].isdigit():
                continue
            if len(word) == 4 and word in years and _YEAR.fullmatch(word):
                yield ("year", word)
            elif self.expand_decades and (m := _DECADE.fullmatch(word)):
                century = m.group(1) or ("20" if m.group(2) in "012" else "19")
                prefix = century + m.group(2)
                yield from (("year", y) for y in years if y.startswith(prefix))

    def _fuzzy_names(self, doc: _Text, matches, out: set) -> None:
        """Near-miss person names ("Cristopher Nolan") in unmatched capitalised runs, added to
        ``out``. A run lies in a gap between matches; only gaps with a word of some name are
        read (a span only meets the names that share a word with it)."""
        folded, words, name_words = doc.folded, doc.words, self._name_words
        for a, b in _gaps(len(folded), matches):
            if b - a < 2 or name_words.isdisjoint(folded[a:b]):
                continue  # no two words, or no block to search
            k = a
            while k < b:
                if not words[k][0].isupper():  # (a token is never empty)
                    k += 1
                    continue
                end = k + 1
                while end < b and words[end][0].isupper():
                    end += 1
                if end - k >= 2 and not name_words.isdisjoint(folded[k:end]):
                    self._fuzzy_run(folded, k, end, out)
                k = end

    def _fuzzy_run(self, folded, start: int, end: int, out: set) -> None:
        """Near-miss names in the capitalised run folded[start:end], added to ``out``: from each
        word on, the longest span (of 4 to 2 words) that has a closest name is one."""
        k, name_words = start, self._name_words
        while k < end - 1:
            if name_words.isdisjoint(folded[k:k + 4 if k + 4 < end else end]):
                k += 1  # no span from here shares a word with a name: no block to search
                continue
            for size in range(min(4, end - k), 1, -1):
                found = self._closest_name(folded[k:k + size])
                if found is not None:
                    out.update(self._name_fields[found])
                    k += size
                    break
            else:
                k += 1

    def _closest_name(self, words: list[str]) -> str | None:
        query, best, n = " ".join(words), None, len(words)
        for word in sorted(self._name_words.intersection(words)):  # the blocks (n, word) in order
            choices = self._blocks.get((n, word))
            if choices:
                found = process.extractOne(query, choices, scorer=fuzz.ratio,
                                           score_cutoff=self.fuzzy_threshold)
                if found is not None and (best is None or found[1] > best[1]):
                    best = found
        return None if best is None else best[0]

    # ----- titles -----------------------------------------------------------------------------
    def extract_titles(self, text: str) -> list[str]:
        """Catalog movie ids whose titles appear in ``text``, in order of appearance."""
        _, matches = self._scan(text)
        out: list[str] = []
        for _, _, entries in matches:
            for e in entries:
                if e.kind == "title" and e.value not in out:
                    out.append(e.value)
        return out

    def resolve_title(self, span: str) -> str | None:
        """The catalog id of a title written exactly as ``span`` (case/accent-insensitive)."""
        node = self._trie
        for _, _, token in _tokens(span):
            node = node.get(fold(token))
            if node is None:
                return None
        titles = [e.value for e in node.get(_END, ()) if e.kind == "title"] if node else []
        return titles[0] if titles else None

    def titles_and_candidates(self, text: str) -> tuple[list[str], list[str]]:
        """``(extract_titles(text), candidate_titles(text))`` from one scan of the text."""
        return self.candidate_titles(text, with_ids=True)

    def candidate_titles(self, text: str, *, with_ids: bool = False):
        """Title-like spans: quoted text, catalog titles, and Title Case runs of >= 2 words
        (connectors such as "of the" allowed inside) that are not field values or near-miss
        person names. A heuristic for counting recommended titles that are not in the catalog:
        a candidate that ``resolve_title`` cannot resolve is off-catalog."""
        spans: list[str] = []
        for m in re.finditer(r"[\"“«]([^\"”»\n]{1,80})[\"”»]", text):
            spans.append(m.group(1).strip())
        _, matches = self._scan(text)
        toks = _tokens(text)
        blocked = [False] * len(toks)
        ids: list[str] = []
        for i, j, entries in matches:
            blocked[i:j] = [True] * (j - i)  # a known value or title is never part of a run
            if any(e.kind == "title" for e in entries):
                spans.append(text[toks[i][0]:toks[j - 1][1]])
                ids += [e.value for e in entries if e.kind == "title" and e.value not in ids]
        k, n = 0, len(toks)
        while k < n:
            if blocked[k] or not toks[k][2][:1].isupper():
                k += 1
                continue
            end, last_cap = k + 1, k
            while end < n and not blocked[end] and (
                    toks[end][2][:1].isupper() or toks[end][2].isdigit()
                    or fold(toks[end][2]) in _CONNECTORS):
                if toks[end][2][:1].isupper() or toks[end][2].isdigit():
                    last_cap = end
                end += 1
            first = k
            word = fold(toks[k][2])
            if self._initial(text, toks[k][0]) and word in COMMON_WORDS and word not in ("the", "a", "an"):
                first += 1  # "Try Heat Wave" -> "Heat Wave"
            if last_cap - first >= 1:
                spans.append(text[toks[first][0]:toks[last_cap][1]])
            k = end
        out: list[str] = []
        for span in spans:
            if span and span not in out and not self._is_field_value(span) \
                    and not self._near_name(span):
                out.append(span)
        return (ids, out) if with_ids else out

    def _near_name(self, span: str) -> bool:
        if self.fuzzy_threshold is None:
            return False
        words = [fold(t) for _, _, t in _tokens(span)]
        return len(words) >= 2 and self._closest_name(words) is not None

    def _is_field_value(self, span: str) -> bool:
        node = self._trie
        for _, _, token in _tokens(span):
            node = node.get(fold(token))
            if node is None:
                return False
        return any(e.kind == "value" for e in node.get(_END, ()))
