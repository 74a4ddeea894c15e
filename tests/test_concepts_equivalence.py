"""The concept extractor's fast paths give what the plain algorithm gives.

catalog/movies/concepts.py reads ASCII text without building per-token offsets, finds the few
offsets a check needs by searching the text, resolves a trie node's entries once, finds the last
role cue with one regex match and reads years and near-miss names only where the matches left
words. Each test below puts a fast path where it must fall back or where a shortcut could slip.

tests/data/concepts/expected_outputs.json pins the outputs of the extractor as it was before those
fast paths (commit 5ea1bac, catalog/movies/concepts.py at that commit) on generated texts over the
catalog below: see ``test_pinned_outputs``.
"""

import json
import random
import re
from pathlib import Path

import pytest

from convsim.catalog.movies import concepts as C
from convsim.catalog.movies.catalog import Movie, MovieCatalog
from convsim.catalog.movies.concepts import ConceptExtractor

EXPECTED = Path(__file__).resolve().parent / "data" / "concepts" / "expected_outputs.json"


def movie(mid, *, year=2000, genres=(), actors=(), directors=(), writers=(), languages=()):
    return Movie(mid, mid, year, tuple(genres), tuple(actors), tuple(directors), tuple(writers),
                 tuple(languages), "plot")


# Traps of every kind: common-word values and titles, short names, accents, people in several
# roles (with different film counts), titles that are field values, years that are titles.
CATALOG = MovieCatalog([
    movie("Trap One", year=2008, genres=["ex", "film", "Fiction", "Science Fiction", "Comedy"],
          actors=["Eve", "RZA", "Flea", "T.I.", "Tom Hanks", "Common"], languages=["ger", "fre", "spa"]),
    movie("Trap Two", year=1994, genres=["Romance", "Animation", "Drama"], directors=["McG"],
          actors=["Leonardo DiCaprio"], writers=["Christopher Nolan"], languages=["English"]),
    movie("The Sound of Music", year=1965, genres=["Music"], actors=["Julie Andrews"]),
    movie("Up", year=2009, genres=["Animation"]),
    movie("Heat", year=1995, genres=["Crime"], actors=["Al Pacino", "Robert De Niro"], directors=["Michael Mann"]),
    movie("You", year=2018, genres=["Thriller"]),
    movie("Yes", year=2004, genres=["Drama"]),
    movie("Amélie", year=2001, genres=["Romance", "Comedy"], directors=["Jean-Pierre Jeunet"],
          actors=["Audrey Tautou"], languages=["French"]),
    movie("1917", year=2019, genres=["War"], directors=["Sam Mendes"], writers=["Sam Mendes"]),
    movie("2012", year=2009, genres=["Action"], directors=["Roland Emmerich"]),
    movie("M", year=1931, genres=["Crime"], directors=["Fritz Lang"], writers=["Fritz Lang"], languages=["German"]),
    movie("Zulu", year=1964, genres=["War", "History"], languages=["Zulu"], actors=["Michael Caine"]),
    movie("War", year=2007, genres=["Action"], actors=["Jet Li", "Jason Statham"]),
    movie("Inception", year=2010, genres=["Science Fiction"], directors=["Christopher Nolan"],
          writers=["Christopher Nolan"], actors=["Leonardo DiCaprio", "Michael Caine"]),
    movie("Interstellar", year=2014, genres=["Science Fiction"], directors=["Christopher Nolan"],
          writers=["Christopher Nolan", "Jonathan Nolan"], actors=["Michael Caine"]),
    movie("Unforgiven", year=1992, genres=["Western"], directors=["Clint Eastwood"], actors=["Clint Eastwood"]),
    movie("Gran Torino", year=2008, genres=["Drama"], directors=["Clint Eastwood"], actors=["Clint Eastwood"]),
    movie("Escape from Alcatraz", year=1979, genres=["Crime"], actors=["Clint Eastwood"]),
    movie("Family", year=2012, genres=["Family", "Drama"], actors=["Zoë Kravitz", "Penélope Cruz", "Björk"]),
    movie("The Good German", year=2006, genres=["War", "Drama"], actors=["George Clooney"], languages=["German"]),
    movie("2001 A Space Odyssey", year=1968, genres=["Science Fiction"], directors=["Stanley Kubrick"],
          writers=["Stanley Kubrick", "Arthur C. Clarke"]),
    movie("Christmas Eve Story", year=1999, genres=["Family"], actors=["Eve"]),
    movie("Music", year=2021, genres=["Music", "Drama"], directors=["Sia"], languages=["English"]),
    # titles that are also a person's name (in two roles) and a genre
    movie("Se7en", year=1995, genres=["Crime"], actors=["Morgan Freeman"], writers=["Andrew Kevin Walker"]),
    movie("Invictus", year=2009, genres=["Sport"], actors=["Morgan Freeman"], directors=["Clint Eastwood"]),
    movie("Morgan Freeman", year=2015, genres=["Documentary"], directors=["Morgan Freeman"]),
    movie("Science Fiction", year=2003, genres=["Comedy"]),
    # a genre that is an everyday noun and also a person
    movie("Who Did It", year=1990, genres=["Mystery"], actors=["Mystery"]),
])

CONFIGS = {
    "default": {},
    "no_fuzzy": {"fuzzy_threshold": None},
    "loose_fuzzy": {"fuzzy_threshold": 80.0},
    "keep_titles": {"consume_titles": False},
    "decades": {"expand_decades": True},
    "persons": {"fields": ["actor", "director", "writer"]},
}


@pytest.fixture(scope="module")
def ex():
    return ConceptExtractor(CATALOG)


def reference_tokens(text):
    """The tokens with offsets as the plain algorithm builds them."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\w+", text)]


# ----- _Text: tokens, folded tokens and offsets ---------------------------------------------------

TOKEN_TEXTS = [
    "", " ", "!!!", "a", "a a a", "an banana an a", "aa aaa aa", "x_y _z_ 9", "Up, up and UP!",
    "  leading and trailing  ", "'Heat' \"Heat\" heat", "it's Nolan's", "tab\tand\nnewline",
    "word1 word10 word1", "Amélie et Zoë", "naïve café Straße", "ﬁlm ½ ²⁰⁰⁸ ２００８",
    "Ame\u0301lie", "Москва and Up", "電影 Up 電影", "İstanbul ı ſtarring K", "🎬 Up 🎬",
]


@pytest.mark.parametrize("text", TOKEN_TEXTS)
def test_text_tokens_and_offsets(text):
    toks = reference_tokens(text)
    doc = C._Text(text)
    assert doc.words == [t for _, _, t in toks]
    folded = re.findall(r"\w+", text.lower()) if text.isascii() else [C.fold(t) for _, _, t in toks]
    assert doc.folded == folded
    for k, (start, end, token) in enumerate(toks):
        assert (doc.start(k), doc.end(k)) == (start, end)  # repeated words: the k-th, not the first
        if k:
            assert doc.between(k) == text[toks[k - 1][1]:start]
        assert doc.exact(k, k + 1) == (C.strip_accents(token),)


# ----- checks that need an offset: quotes, sentence starts ----------------------------------------

@pytest.mark.parametrize("text, titles", [
    ("Heat is great.", []),                         # sentence start
    ("Heat. Try Heat", ["Heat"]),                   # the same word again, not at a sentence start
    ("heat, or Heat", ["Heat"]),                    # the first occurrence is not as written
    ("Try Heat. Heat", ["Heat"]),
    ("I said: Heat", []),                           # after a colon
    ("“Heat” tonight", ["Heat"]),                   # a quote before a sentence start
    ("Up is lovely, or Up again", []),              # two letters: quoted only
    ("watch 'Up' tonight", ["Up"]),
    ("watch `Up` or «Up»", ["Up"]),
    ("upUp Up 'Up'", ["Up"]),                       # inside another word is no occurrence
    ("You could watch M or 'M'", ["M"]),
    ("Try \"2012\", not 2012", ["2012"]),
    ("You. You", []),
    ("Yes, You would like You", ["You"]),
])
def test_quoted_and_sentence_initial_titles(ex, text, titles):
    assert ex.extract_titles(text) == titles


# ----- a node's entries resolved once: people in several roles -------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("directed by Christopher Nolan", {("director", "Christopher Nolan")}),
    ("written by Christopher Nolan", {("writer", "Christopher Nolan")}),
    ("Christopher Nolan's writing", {("writer", "Christopher Nolan")}),
    ("Christopher Nolan's directing", {("director", "Christopher Nolan")}),
    ("Christopher Nolan's acting", {("writer", "Christopher Nolan")}),  # no actor role: the most films
    ("Christopher Nolan s directing", {("writer", "Christopher Nolan")}),  # "s" is no "'s"
    ("I like Christopher Nolan", {("writer", "Christopher Nolan")}),
    ("Clint Eastwood", {("actor", "Clint Eastwood")}),
    ("directed by Clint Eastwood", {("director", "Clint Eastwood")}),
    ("starring Tom Hanks. directed by Clint Eastwood", {("actor", "Tom Hanks"), ("director", "Clint Eastwood")}),
    ("directed by X. Clint Eastwood", {("actor", "Clint Eastwood")}),   # the cue is in another clause
    ("written by director Sam Mendes", {("director", "Sam Mendes")}),
    ("a film with Sam Mendes", {("director", "Sam Mendes")}),         # no actor role: the tie's first field
    ("directed by Fritz Lang, written by Fritz Lang", {("director", "Fritz Lang"), ("writer", "Fritz Lang")}),
])
def test_people_in_several_roles(ex, text, expected):
    assert ex.extract(text) == expected


def test_a_resolution_that_depends_on_the_text_is_not_fixed(ex):
    # a title among a node's entries: the title wins unless the field's context says otherwise
    assert ex.extract("starring Morgan Freeman") == frozenset()
    assert ex.extract_titles("starring Morgan Freeman") == ["Morgan Freeman"]
    assert ex.extract("I loved Science Fiction") == frozenset()
    assert ex.extract("some science fiction films") == {("genre", "Science Fiction")}
    # a genre that is an everyday noun among a node's values: its context decides, per text
    assert ex.extract("Mystery films") == {("genre", "Mystery"), ("actor", "Mystery")}
    assert ex.extract("a mystery to me") == {("actor", "Mystery")}
    assert ex.extract("Mystery films") == {("genre", "Mystery"), ("actor", "Mystery")}
    # "War" is a title, a genre that is an everyday noun: its node is resolved per text
    assert ("genre", "War") in ex.extract("War films are what I want.")
    assert ("genre", "War") not in ex.extract("I loved War, the Jet Li film.")
    assert ex.extract("Any films in Zulu?") >= {("language", "Zulu")}
    assert ("language", "Zulu") not in ex.extract("Have you seen Zulu? It is great.")
    # the same node met again resolves again
    assert ("genre", "War") in ex.extract("Some war films?")
    assert ("genre", "War") not in ex.extract("The war ended. Films came later.")
    keep = ConceptExtractor(CATALOG, consume_titles=False)  # titles never consume: a node's values only
    assert ("genre", "Music") in keep.extract("I loved The Sound of Music film")
    assert ("genre", "Music") not in keep.extract("I loved The Sound of Music")


# ----- the last role cue: one regex match against the finditer of the plain algorithm --------------

def reference_role_cue(text, start, end):
    if text[end:end + 2].lower() == "'s":
        for field, cue in C._ROLE_AFTER:
            if cue.match(text[end:]):
                return field
    window = C._CLAUSE_END.split(text[max(0, start - C._ROLE_WINDOW):start])[-1]
    found = None
    for m in C._ROLE_ANY.finditer(window):
        found = m.lastgroup
    return found


CUE_PIECES = ["directed by", "director", "directors", "direction of", "by director", "written by", "writer",
              "screenplay by", "script by", "starring", "stars", "star", "with", "actor", "actress", "featuring",
              "cast", "castle", "costars", "without", "by", "of", "DIRECTED BY", "ſtarring", "Nolan", "x",
              ".", ";", "!", "?", ",", "'s", "'s directing", "'s acting", "’s writing", "\n", "é"]


def test_role_cue_is_the_last_cue_of_the_last_clause():
    rng = random.Random(11)
    texts = ["".join(rng.choice(CUE_PIECES) + rng.choice([" ", "", ", ", "  ", ". "]) for _ in range(rng.randint(0, 14)))
             for _ in range(1500)]
    texts += ["directed by director ", "written by director X", "by director", "x" * 55 + " costars Nolan",
              "starring" + " " * 56 + "Nolan", "directed by Nolan's acting", "directed by; Nolan"]
    checked = 0
    for text in texts:
        cuts = sorted({0, len(text)} | {m.start() for m in re.finditer(r"\w+", text)}
                      | {m.end() for m in re.finditer(r"\w+", text)})
        for start in cuts:
            for end in cuts:
                if start <= end:
                    assert ConceptExtractor._role_cue(text, start, end) == reference_role_cue(text, start, end), \
                        (text, start, end)
                    checked += 1
    assert checked > 20_000


# ----- years and near-miss names: only the words no match covers -----------------------------------

def test_years_in_unmatched_words(ex):
    assert ex.extract("from 1994 or 2008") == {("year", "1994"), ("year", "2008")}
    assert ("year", "2001") not in ex.extract("I love 2001 A Space Odyssey")   # inside a title
    assert ("year", "1968") in ex.extract("2001 A Space Odyssey (1968)")
    assert ("year", "2012") not in ex.extract("Try \"2012\" tonight")            # the quoted title
    assert ("year", "2012") in ex.extract("Try \"2012\" from 2012")              # a second, unmatched token
    assert ex.extract("call 19940 or 11994") == frozenset()
    assert ex.extract("from ²⁰⁰⁸") == frozenset()                               # no decimal digit in the text
    assert ex.extract("from ２００８") == {("year", "2008")}                      # fullwidth digits are decimal
    assert ex.extract("the 90s") == frozenset()
    decades = ConceptExtractor(CATALOG, expand_decades=True)
    assert decades.extract("the 90s, not 1990s") == {("year", "1990"), ("year", "1992"), ("year", "1994"),
                                                     ("year", "1995"), ("year", "1999")}
    assert decades.extract("2001 A Space Odyssey or the 60s") == {("year", "1964"), ("year", "1965"),
                                                                   ("year", "1968")}


@pytest.mark.parametrize("text, expected", [
    ("Something with Leonardo DiCaprioo", {("actor", "Leonardo DiCaprio")}),
    ("written by Cristopher Nolan", {("writer", "Christopher Nolan"), ("director", "Christopher Nolan")}),
    ("written by cristopher nolan", set()),                        # not capitalised
    ("Cristopher and Nolan", set()),                               # not one run
    ("Heat Cristopher Nolan", {("writer", "Christopher Nolan"), ("director", "Christopher Nolan")}),
    ("Try Heat Leonardo DiCaprioo Michael Caine", {("actor", "Leonardo DiCaprio"), ("actor", "Michael Caine")}),
    ("Leonardo DiCaprioo.", {("actor", "Leonardo DiCaprio")}),     # punctuation does not break a run
    ("Zoe Kravitz and Penelope Cruzz", {("actor", "Zoë Kravitz"), ("actor", "Penélope Cruz")}),
    ("Zoé Kravitz", {("actor", "Zoë Kravitz")}),                   # non-ASCII text
    ("Écrit par Cristopher Nolan", {("writer", "Christopher Nolan"), ("director", "Christopher Nolan")}),
    ("Leonardo", set()),
])
def test_near_miss_names(ex, text, expected):
    assert {c for c in ex.extract(text) if c[0] != "genre"} == expected


# ----- pinned outputs of the plain algorithm ----------------------------------------------------------

def test_pinned_outputs():
    pinned = json.loads(EXPECTED.read_text(encoding="utf-8"))
    texts = pinned["texts"]
    assert len(texts) >= 300
    for name, expected in pinned["extract"].items():
        ex = ConceptExtractor(CATALOG, **CONFIGS[name])
        for text, want in zip(texts, expected):
            assert sorted(map(list, ex.extract(text))) == want, (name, text)
    ex = ConceptExtractor(CATALOG)
    for text, titles, candidates in zip(texts, pinned["extract_titles"], pinned["candidate_titles"]):
        assert ex.extract_titles(text) == titles, text
        assert ex.candidate_titles(text) == candidates, text
