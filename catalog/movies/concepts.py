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
"""

from __future__ import annotations

import functools
import re
import unicodedata

from rapidfuzz import fuzz, process

from catalog.movies.catalog import FIELDS, MovieCatalog

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
_CLAUSE_END = re.compile(r"[.;!?]")
_ROLE_WINDOW = 60  # characters before a name in which a role cue still applies ("starring A, B and C")
_TOKEN = re.compile(r"\w+")
_DIGIT = re.compile(r"\d")
# two tokens (\w runs) in a row that start with an ASCII capital: what a fuzzy name needs
_TWO_CAPITALISED = re.compile(r"(?<!\w)[A-Z]\w*\W+[A-Z]")
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


class _Entry:
    """One phrase in the trie: a field value (kind "value") or a catalog title (kind "title")."""
    __slots__ = ("kind", "field", "value", "exact", "case_exact", "not_initial", "quoted", "free")

    def __init__(self, kind, field, value, exact, case_exact, not_initial=False, quoted=False):
        self.kind, self.field, self.value, self.exact = kind, field, value, exact
        self.case_exact, self.not_initial, self.quoted = case_exact, not_initial, quoted
        self.free = not (case_exact or not_initial or quoted)  # matches wherever its words occur


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
        node.setdefault(_END, []).append(entry)

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
    @staticmethod
    def _initial(text: str, start: int) -> bool:
        before = text[:start].rstrip(" \t" + _QUOTES)
        return not before or before[-1] in ".!?\n:;"

    def _accept(self, entry: _Entry, text: str, toks, i: int, j: int) -> bool:
        if entry.case_exact and tuple(strip_accents(t) for _, _, t in toks[i:j]) != entry.exact:
            return False
        quoted = toks[i][0] > 0 and text[toks[i][0] - 1] in _QUOTES
        if entry.quoted and not quoted:
            return False
        if entry.not_initial and not quoted and self._initial(text, toks[i][0]):
            return False
        return True

    def _scan(self, text: str, *, titles: bool = True):
        """Longest-first matches: (start_token, end_token, [accepted entries]); plus tokens.
        With ``titles=False`` catalog titles are ignored (they neither match nor consume).

        The tokens with their offsets (``toks``) are built only when a check needs them; for ASCII
        text they are often not, and ``toks`` is then None (:func:`_tokens` builds them)."""
        if text.isascii():  # lower() is the fold and keeps token boundaries (one C-level pass)
            toks, folded = None, _TOKEN.findall(text.lower())
        else:
            toks = _tokens(text)
            folded = [fold(t) for _, _, t in toks]
        trie = self._trie
        matches, n, resume = [], len(folded), 0
        for i in [k for k, word in enumerate(folded) if word in trie]:  # most words start no phrase
            if i < resume:
                continue  # inside the previous match
            node, best = trie, None
            for j in range(i, n):
                node = node.get(folded[j])
                if node is None:
                    break
                ends = node.get(_END)
                if ends:
                    ok = []
                    for e in ends:
                        if titles or e.kind != "title":
                            if e.free:
                                ok.append(e)
                            else:
                                if toks is None:
                                    toks = _tokens(text)
                                if self._accept(e, text, toks, i, j + 1):
                                    ok.append(e)
                    if ok:
                        best = (i, j + 1, ok)
            if best is not None:
                matches.append(best)
                resume = best[1]
        return toks, folded, matches

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
        toks, folded, matches = self._scan(text, titles=self.consume_titles)
        concepts: set[tuple[str, str]] = set()
        consumed = [False] * len(folded)
        for i, j, entries in matches:
            consumed[i:j] = [True] * (j - i)
            if len(entries) == 1:  # the common case: one value or one title, nothing to resolve
                e = entries[0]
                if e.kind == "value":
                    if e.field != "genre" or j - i > 1 or folded[i] not in CONTEXT_GENRES:
                        concepts.add((e.field, e.value))
                    else:
                        toks = toks or _tokens(text)
                        if self._genre_context(text, toks, folded, i, j):
                            concepts.add((e.field, e.value))
                continue
            toks = toks or _tokens(text)
            values = [e for e in entries if e.kind == "value"]
            if len(values) < len(entries) and any(e.kind == "title" for e in entries):
                values = [e for e in values if self._field_context(e.field, text, toks, folded, i, j)]
            values = [e for e in values if e.field != "genre" or " ".join(folded[i:j]) not in CONTEXT_GENRES
                      or self._genre_context(text, toks, folded, i, j)]
            concepts.update(self._one_person(values, text, toks, i, j))
        if self._years:
            concepts.update(self._years_in(text, folded, consumed))
        if self.fuzzy_threshold is not None and self._names_by_len:
            concepts.update(self._fuzzy_names(text, toks, folded, consumed))
        return frozenset(concepts)

    def _genre_context(self, text, toks, folded, i: int, j: int) -> bool:
        """A genre word followed, through a list of genre words ("war and family"), by a film
        noun in the same clause, or preceded by "genre"."""
        if i > 0 and folded[i - 1] in ("genre", "genres"):
            return True
        k = j
        while k < len(toks) and not _CLAUSE_END.search(text[toks[k - 1][1]:toks[k][0]]):
            word = folded[k]
            if word in _FILM_NOUNS:
                return True
            if word not in _LIST_WORDS and word not in CONTEXT_GENRES and word not in self._genre_words:
                return False
            k += 1
        return False

    def _field_context(self, field: str, text, toks, folded, i: int, j: int) -> bool:
        """Whether a span that is also a title is meant as a value of ``field``."""
        before = folded[i - 1] if i > 0 else ""
        if field == "language":
            return before in ("in", "spoken") or (j < len(toks) and folded[j] in ("language", "dubbed"))
        if field == "genre":
            return self._genre_context(text, toks, folded, i, j)
        if field == "year":
            return before in ("from", "in", "of")
        return False  # a person whose name is a title: the title wins

    def _one_person(self, values, text, toks, i: int, j: int):
        persons = [e for e in values if e.field in PERSON_FIELDS]
        if len(persons) <= 1:
            return [(e.field, e.value) for e in values]
        others = [(e.field, e.value) for e in values if e.field not in PERSON_FIELDS]
        fields = {e.field: e for e in persons}
        cued = self._role_cue(text, toks[i][0], toks[j - 1][1])
        if cued in fields:
            return others + [(cued, fields[cued].value)]
        best = max(persons, key=lambda e: (self.catalog.doc_freq(e.field, e.value),
                                           -PERSON_FIELDS.index(e.field)))
        return others + [(best.field, best.value)]

    @staticmethod
    def _role_cue(text: str, start: int, end: int) -> str | None:
        if text[end:end + 2].lower() == "'s":  # what every _ROLE_AFTER cue starts with
            for field, cue in _ROLE_AFTER:
                if cue.match(text[end:]):
                    return field
        window = _CLAUSE_END.split(text[max(0, start - _ROLE_WINDOW):start])[-1]
        found = None
        for m in _ROLE_ANY.finditer(window):  # the last cue in the window wins
            found = m.lastgroup
        return found

    def _years_in(self, text, folded, consumed):
        if not _DIGIT.search(text):
            return
        for k, word in enumerate(folded):
            if consumed[k] or not word[0].isdigit():
                continue
            if len(word) == 4 and word in self._years and _YEAR.fullmatch(word):
                yield ("year", word)
            elif self.expand_decades and (m := _DECADE.fullmatch(word)):
                century = m.group(1) or ("20" if m.group(2) in "012" else "19")
                prefix = century + m.group(2)
                yield from (("year", y) for y in self._years if y.startswith(prefix))

    def _fuzzy_names(self, text, toks, folded, consumed):
        """Near-miss person names ("Cristopher Nolan") in unmatched capitalised runs."""
        if text.isascii() and not _TWO_CAPITALISED.search(text):
            return  # no two capitalised words in a row anywhere (a name is at least two)
        toks = toks or _tokens(text)
        k, n = 0, len(toks)
        while k < n:
            if consumed[k] or not toks[k][2][:1].isupper():
                k += 1
                continue
            end = k
            while end < n and not consumed[end] and toks[end][2][:1].isupper():
                end += 1
            k = yield from self._fuzzy_run(folded, k, end)
        return

    def _fuzzy_run(self, folded, start: int, end: int):
        k, name_words = start, self._name_words
        while k < end - 1:
            if not any(w in name_words for w in folded[k:min(k + 4, end)]):
                k += 1  # no span from here shares a word with a name: no block to search
                continue
            hit = None
            for size in range(min(4, end - k), 1, -1):
                found = self._closest_name(folded[k:k + size])
                if found is not None:
                    hit = (size, found)
                    break
            if hit is None:
                k += 1
                continue
            yield from self._name_fields[hit[1]]
            k += hit[0]
        return end

    def _closest_name(self, words: list[str]) -> str | None:
        query, best, n = " ".join(words), None, len(words)
        for block in sorted({(n, w) for w in words if w in self._name_words}):
            choices = self._blocks.get(block)
            if choices:
                found = process.extractOne(query, choices, scorer=fuzz.ratio,
                                           score_cutoff=self.fuzzy_threshold)
                if found is not None and (best is None or found[1] > best[1]):
                    best = found
        return None if best is None else best[0]

    # ----- titles -----------------------------------------------------------------------------
    def extract_titles(self, text: str) -> list[str]:
        """Catalog movie ids whose titles appear in ``text``, in order of appearance."""
        _, _, matches = self._scan(text)
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
        toks, _, matches = self._scan(text)
        toks = toks or _tokens(text)
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
