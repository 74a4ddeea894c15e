"""Concept extractor E(x): the original system's noise, aliases, longest match, years, fuzzy."""

from pathlib import Path

import pytest

from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.catalog.movies.catalog import Movie, MovieCatalog, load_movie_catalog

KB_PATH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opendialkg" / \
    "opendialkg_movie_data.json"
needs_kb = pytest.mark.skipif(not KB_PATH.exists(),
                              reason=f"OpenDialKG movie KB not found at {KB_PATH}")


def movie(mid, *, year=2000, genres=(), actors=(), directors=(), writers=(), languages=()):
    return Movie(mid, mid, year, tuple(genres), tuple(actors), tuple(directors), tuple(writers),
                 tuple(languages), "plot")


# The trap values of the OpenDialKG KB (crs.md §1.10), kept raw so that only the extractor's
# word-boundary and case rules (not the loader's whitelist) stand between them and the noise.
TRAPS = MovieCatalog([
    movie("Trap One", year=2008, genres=["ex", "film", "Fiction", "Science Fiction", "Comedy"],
          actors=["Eve", "RZA", "Flea", "T.I.", "Tom Hanks", "Common"],
          languages=["ger", "fre", "spa"]),
    movie("Trap Two", year=1994, genres=["Romance", "Animation", "Drama"], directors=["McG"],
          actors=["Leonardo DiCaprio"], writers=["Christopher Nolan"], languages=["English"]),
    movie("The Sound of Music", year=1965, genres=["Music"], actors=["Julie Andrews"]),
    movie("Up", year=2009, genres=["Animation"]),
    movie("Heat", year=1995, genres=["Crime"]),
])


@pytest.fixture(scope="module")
def traps():
    return ConceptExtractor(TRAPS)


@pytest.fixture(scope="module")
def kb_extractor():
    return ConceptExtractor(load_movie_catalog(KB_PATH))


@pytest.fixture(scope="module")
def project_extractor():
    return ConceptExtractor(MovieCatalog.load())


@pytest.mark.parametrize("text, banned", [
    ("What's next on your list?", ("genre", "ex")),
    ("I really liked this film", ("genre", "film")),
    ("Every time I watch it", ("actor", "Eve")),
    ("every single one", ("actor", "Eve")),
    ("no longer than two hours", ("language", "ger")),
    ("something fresh and free", ("language", "fre")),
    ("a space adventure", ("language", "spa")),
    ("a flea market scene", ("actor", "Flea")),
    ("the rza thing", ("actor", "RZA")),
    ("mcg burgers", ("director", "McG")),
    ("this is it", ("actor", "T.I.")),
])
def test_original_noise_does_not_appear(traps, text, banned):
    assert banned not in traps.extract(text)


def test_set_phrases_and_sentence_initial_words(traps):
    assert traps.extract("On Christmas Eve or New Year's Eve") == frozenset()
    assert traps.extract("Common sense says so.") == frozenset()
    assert traps.extract("A film with Eve and Common.") == {("actor", "Eve"), ("actor", "Common")}


def test_noise_free_sentence_gives_nothing(traps):
    assert traps.extract("Next, every longer film is fine, this film or the next one") == frozenset()


def test_short_and_common_values_match_as_written(traps):
    found = traps.extract("Starring Eve, RZA, Flea and McG")
    assert {("actor", "Eve"), ("actor", "RZA"), ("actor", "Flea"), ("director", "McG")} <= found
    assert ("actor", "RZA") not in traps.extract("RZAs")  # whole words only


def test_case_insensitive_multi_word_and_longest_first(traps):
    found = traps.extract("any SCIENCE fiction with tom hanks?")
    assert found == {("genre", "Science Fiction"), ("actor", "Tom Hanks")}
    assert ("genre", "Fiction") not in found  # the span is consumed by the longer value
    assert ("genre", "Fiction") in traps.extract("some fiction")


@pytest.mark.parametrize("text, expected", [
    ("anything sci-fi", {("genre", "Science Fiction")}),
    ("scifi please", {("genre", "Science Fiction")}),
    ("Sci Fi", {("genre", "Science Fiction")}),
    ("a romcom", {("genre", "Romance"), ("genre", "Comedy")}),
    ("a rom-com tonight", {("genre", "Romance"), ("genre", "Comedy")}),
    ("something animated", {("genre", "Animation")}),
    ("a romantic drama", {("genre", "Romance"), ("genre", "Drama")}),
])
def test_genre_aliases(traps, text, expected):
    assert traps.extract(text) == expected


def test_alias_needs_its_genre_in_the_catalog():
    tiny = ConceptExtractor(MovieCatalog([movie("A", genres=["Drama"])]))
    assert tiny.extract("a romcom or sci-fi") == frozenset()


def test_years(traps):
    assert traps.extract("from 2008 or 1994") == {("year", "2008"), ("year", "1994")}
    assert traps.extract("from 2011") == frozenset()  # not a catalog year
    assert traps.extract("call 20089 or 12008") == frozenset()
    assert traps.extract("the 90s") == frozenset()  # decades are opt-in
    decades = ConceptExtractor(TRAPS, expand_decades=True)
    assert decades.extract("the 90s") == {("year", "1994"), ("year", "1995")}
    assert decades.extract("the 1960s") == {("year", "1965")}


def test_fuzzy_names_on_and_off(traps):
    found = traps.extract("Something with Leonardo DiCaprioo, written by Cristopher Nolan")
    assert found == {("actor", "Leonardo DiCaprio"), ("writer", "Christopher Nolan")}
    assert traps.extract("written by cristopher nolan") == frozenset()  # capitalised spans only
    off = ConceptExtractor(TRAPS, fuzzy_threshold=None)
    assert off.extract("Something with Leonardo DiCaprioo") == frozenset()
    strict = ConceptExtractor(TRAPS, fuzzy_threshold=99.5)
    assert strict.extract("Something with Leonardo DiCaprioo") == frozenset()
    assert traps.extract("Something with Leonardo Fibonacci") == frozenset()


def test_fields_restriction_and_min_len():
    e = ConceptExtractor(TRAPS, fields=("genre",))
    assert e.extract("Tom Hanks in a comedy from 2008") == {("genre", "Comedy")}
    with pytest.raises(ValueError):
        ConceptExtractor(TRAPS, fields=("mood",))
    assert ("actor", "RZA") not in ConceptExtractor(TRAPS, min_value_len=4).extract("RZA")


def test_titles_are_matched_and_consumed(traps):
    assert traps.extract("I loved The Sound of Music") == frozenset()  # not genre=Music
    assert traps.extract_titles("I loved the sound of music and Heat.") == \
        ["The Sound of Music", "Heat"]
    keep = ConceptExtractor(TRAPS, consume_titles=False)
    # without title consumption the title's words are re-read (here in genre context)
    assert keep.extract("I loved The Sound of Music film") == {("genre", "Music")}


def test_single_word_titles_are_guarded(traps):
    assert traps.extract_titles("I'm up for anything, no heat please") == []
    assert traps.extract_titles("Heat is great.") == []  # first word of a sentence
    assert traps.extract_titles("Try Heat tonight") == ["Heat"]
    assert traps.extract_titles("Up is lovely, or Up again") == []  # <= 2 letters: quoted only
    assert traps.extract_titles("watch 'Up' tonight") == ["Up"]


def test_candidate_titles_flag_off_catalog(traps):
    text = 'You might enjoy "The Lost Kingdom of Zed", The Sound of Music or Crimson Harbor Nights.'
    cands = traps.candidate_titles(text)
    assert cands == ["The Lost Kingdom of Zed", "The Sound of Music", "Crimson Harbor Nights"]
    assert [traps.resolve_title(c) for c in cands] == [None, "The Sound of Music", None]
    # field values and near-miss names are not title candidates
    assert traps.candidate_titles("Tom Hanks and Leonardo DiCaprioo in Science Fiction") == []


@needs_kb
@pytest.mark.parametrize("text, banned", [
    ("what's next", ("genre", "ex")), ("this film", ("genre", "film")),
    ("every movie", ("actor", "eve")), ("every movie", ("actor", "Eve")),
    ("longer", ("language", "ger")), ("longer", ("language", "German")),
])
def test_original_noise_on_the_opendialkg_kb(kb_extractor, text, banned):
    assert banned not in kb_extractor.extract(text)


@needs_kb
def test_opendialkg_extraction(kb_extractor):
    found = kb_extractor.extract("A sci-fi movie from 2008 with Leonardo DiCaprio in English")
    assert {("genre", "Science Fiction"), ("year", "2008"), ("actor", "Leonardo DiCaprio"),
            ("language", "English")} <= found
    assert kb_extractor.extract("I love movies in the English Language") == {("language", "English")}
    assert "Slumdog Millionaire" in kb_extractor.extract_titles("Have you seen slumdog millionaire?")


def test_project_catalog_extraction(project_extractor):
    found = project_extractor.extract("Something Korean by Bong Joon-ho, maybe a thriller from 2019")
    assert found >= {("language", "Korean"), ("director", "Bong Joon-ho"),
                     ("genre", "Thriller"), ("year", "2019")}
    assert project_extractor.extract("amelie by jean-pierre jeunet") >= \
        {("director", "Jean-Pierre Jeunet")}
    assert project_extractor.extract_titles("Amelie or Parasite?") == ["Amélie", "Parasite"]


# --- titles first, one concept per person, genre words only in genre context -------------------

@needs_kb
@pytest.mark.parametrize("text, title, not_read_as", [
    ("Have you seen Zulu? It is great.", "Zulu", ("language", "Zulu")),
    ("I loved War, the Jet Li film.", "War", ("genre", "War")),
    ('Try "2012", a disaster film.', "2012", ("year", "2012")),
    ("Try The Good German with George Clooney.", "The Good German", ("language", "German")),
])
def test_a_title_is_the_film_not_a_field_value(kb_extractor, text, title, not_read_as):
    assert title in kb_extractor.extract_titles(text)
    assert not_read_as not in kb_extractor.extract(text)


@needs_kb
def test_a_title_word_in_its_fields_context_is_the_value(kb_extractor):
    assert ("language", "Zulu") in kb_extractor.extract("Any films in Zulu?")
    assert ("genre", "War") in kb_extractor.extract("War films are what I want.")
    assert ("year", "2012") in kb_extractor.extract("Something from 2012, please.")


@needs_kb
def test_a_person_mentioned_once_counts_once(kb_extractor):
    e = kb_extractor
    assert e.extract("Anything starring Bruce Willis?") == {("actor", "Bruce Willis")}
    assert e.extract("Films directed by Clint Eastwood") == {("director", "Clint Eastwood")}
    assert e.extract("I like Clint Eastwood's directing") == {("director", "Clint Eastwood")}
    assert e.extract("Something written by Quentin Tarantino") == {("writer", "Quentin Tarantino")}
    # no cue: one person concept, the field where the catalog has most of their films
    plain = e.extract("Clint Eastwood is great")
    assert len(plain) == 1 and next(iter(plain))[1] == "Clint Eastwood"
    # a list after one cue keeps that cue's role; a later cue takes over
    assert e.extract("directed by Christopher Nolan, starring Christian Bale and Michael Caine") == {
        ("director", "Christopher Nolan"), ("actor", "Christian Bale"), ("actor", "Michael Caine")}


def test_genre_words_count_only_in_genre_context(project_extractor):
    e = project_extractor
    assert e.extract("I like stories about love, war and family.") == frozenset()
    assert e.extract("I like war and family films.") == {("genre", "War"), ("genre", "Family")}
    assert ("genre", "War") in e.extract("I'm in the mood for a war movie.")
    assert ("genre", "Music") in e.extract("Maybe something in the music genre")
    assert e.extract("The war ended. Films came later.") == frozenset()


def test_extract_recurring_is_extract_and_stays_bounded(monkeypatch):
    extractor = ConceptExtractor(TRAPS)
    monkeypatch.setattr(ConceptExtractor, "RECURRING_KEPT", 3)
    texts = ["Noted: you want drama films. Anything else?", "a comedy from 1999 please", "Heat", "x", "y"]
    for text in texts + texts:
        assert extractor.extract_recurring(text) == extractor.extract(text)
        assert len(extractor._recurring) <= 3
