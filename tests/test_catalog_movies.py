"""Movie catalog loader: the project catalog, the OpenDialKG KB and malformed files."""

import json
import math
from pathlib import Path

import pytest

from convsim.catalog.movies.catalog import (CANONICAL_GENRES, FIELDS, Movie, MovieCatalog, load_movie_catalog,
                            normalise_genres, normalise_language,
                            normalise_people)
from convsim import ConvsimError

KB_PATH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "opendialkg" / \
    "opendialkg_movie_data.json"
needs_kb = pytest.mark.skipif(not KB_PATH.exists(),
                              reason=f"OpenDialKG movie KB not found at {KB_PATH}")


@pytest.fixture(scope="module")
def project():
    return MovieCatalog.load()


@pytest.fixture(scope="module")
def kb():
    return load_movie_catalog(KB_PATH)


def write(tmp_path, data, name="movies.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def film(name="Alpha", year=2001, **over):
    rec = {"name": name, "year": year, "genre": ["Drama"], "actor": ["Ann Lee", "Bo Kim", "Cy Dor"],
           "director": ["Di Rector"], "writer": ["Wri Ter"], "language": ["English"],
           "plot": "A test plot."}
    rec.update(over)
    return rec


# ----- project catalog ------------------------------------------------------------------------
def test_project_catalog_is_large_typed_and_clean(project):
    assert len(project) >= 400
    assert project.source.endswith("catalog/data/movies.json")
    titles = [m.title for m in project.movies]
    assert len(set(titles)) == len(titles)
    for m in project.movies:
        assert isinstance(m.year, int) and 1900 <= m.year <= 2030, m.id
        assert m.genres and set(m.genres) <= set(CANONICAL_GENRES), m.id
        assert 3 <= len(m.actors) <= 6, m.id
        assert len(set(m.actors)) == len(m.actors), m.id
        assert m.directors and m.languages, m.id
        assert m.writers or "Documentary" in m.genres, m.id  # some documentaries credit no writer
        assert m.plot.endswith(".") and len(m.plot) > 40, m.id
        assert all(isinstance(v, str) for f in FIELDS for v in m.values(f))


def test_project_catalog_is_diverse(project):
    languages = {lang for m in project.movies for lang in m.languages}
    for lang in ("French", "Japanese", "Korean", "Hindi", "Spanish", "Italian", "German"):
        assert len(project.items_with("language", lang)) >= 5, lang
    assert len(languages) >= 20
    decades = {m.year // 10 for m in project.movies}
    assert len(decades) >= 9
    assert set(project.values("genre")) >= {"Western", "Documentary", "Animation", "Horror"}


def test_project_catalog_facts_spot_check(project):
    parasite = project.by_id["Parasite"]
    assert parasite.year == 2019 and parasite.directors == ("Bong Joon-ho",)
    assert "Korean" in parasite.languages and "Song Kang-ho" in parasite.actors
    assert project.by_id["Seven Samurai"].directors == ("Akira Kurosawa",)
    assert project.items_with("director", "christopher nolan") >= {"Inception", "Memento"}


def test_build_script_reproduces_the_json():
    from convsim.catalog.movies.build import OUT, build
    assert json.loads(OUT.read_text(encoding="utf-8")) == build()


def test_movie_values_and_year():
    m = Movie("x", "X", None, ("Drama",), (), (), (), (), "p")
    assert m.values("year") == () and m.values("genre") == ("Drama",)
    assert Movie("y", "Y", 1999, (), (), (), (), (), "p").values("year") == ("1999",)
    with pytest.raises(ConvsimError):
        m.values("plot_kw")


# ----- indices, idf, search -------------------------------------------------------------------
@pytest.fixture
def tiny(tmp_path):
    data = {"Alpha": film("Alpha", 2001, genre=["Drama", "Comedy"]),
            "Beta": film("Beta", 2001, genre=["Drama"], actor=["Ann Lee", "Zed Q", "Cy Dor"]),
            "Gamma": film("Gamma", 1999, genre=["Horror"], language=["French"],
                          actor=["Di Vo", "Ed Wu", "Fa Ro"])}
    return MovieCatalog.load(write(tmp_path, data))


def test_idf_is_hand_computed(tiny):
    # N = 3; Drama in 2 movies: ln(4/3) + 1; Horror in 1: ln(4/2) + 1; unseen: ln(4/1) + 1
    assert tiny.idf("genre", "Drama") == pytest.approx(math.log(4 / 3) + 1)
    assert tiny.idf("genre", "horror") == pytest.approx(math.log(2) + 1)
    assert tiny.idf("actor", "Nobody") == pytest.approx(math.log(4) + 1)
    assert tiny.idf("year", 2001) == pytest.approx(math.log(4 / 3) + 1)
    assert tiny.doc_freq("genre", "DRAMA") == 2


def test_idf_is_the_same_when_asked_again_and_keeps_only_catalog_values(tiny):
    first = [tiny.idf("genre", "Drama"), tiny.idf("genre", "drama"), tiny.idf("actor", "Nobody")]
    assert [tiny.idf("genre", "Drama"), tiny.idf("genre", "drama"), tiny.idf("actor", "Nobody")] == first
    assert ("actor", "Nobody") not in tiny._idf and ("genre", "Drama") in tiny._idf  # bounded by the catalog
    assert tiny.idf("genre", ["Drama"]) == pytest.approx(math.log(4) + 1)  # unhashable: weighed, not kept
    with pytest.raises(ConvsimError):
        tiny.idf("colour", "red")


def test_items_with_values_and_search(tiny):
    assert tiny.items_with("actor", "ann lee") == frozenset({"Alpha", "Beta"})
    assert tiny.items_with("actor", "nobody") == frozenset()
    assert tiny.values("year") == ["1999", "2001"]
    assert tiny.values("genre") == ["Comedy", "Drama", "Horror"]
    assert [m.id for m in tiny.search({"genre": "drama", "year": "2001"})] == ["Alpha", "Beta"]
    assert [m.id for m in tiny.search({"genre": ["Comedy", "Horror"]})] == ["Alpha", "Gamma"]
    assert [m.id for m in tiny.search({"genre": "Drama", "actor": "Zed Q"})] == ["Beta"]
    assert tiny.search({"genre": "Western"}) == []
    assert [m.id for m in tiny.search({}, limit=2)] == ["Alpha", "Beta"]
    with pytest.raises(ConvsimError, match="unknown field"):
        tiny.search({"mood": "happy"})


def test_load_movie_catalog_is_cached():
    assert load_movie_catalog() is load_movie_catalog()
    assert len(load_movie_catalog()) >= 400


# ----- OpenDialKG -----------------------------------------------------------------------------
@needs_kb
def test_opendialkg_is_normalised(kb):
    assert len(kb) == 2164
    genres = set(kb.values("genre"))
    assert genres <= set(CANONICAL_GENRES)
    assert not genres & {"United Kingdom", "film", "ex", "NASA", "cat", "Film", "Ex"}
    languages = set(kb.values("language"))
    assert "English" in languages and "English Language" not in languages
    assert not languages & {"fre", "ger", "spa"} and {"French", "German", "Spanish"} <= languages
    assert not [lang for lang in languages
                if lang.endswith(" Language") and not lang.endswith("Sign Language")]
    for m in kb.movies:
        for field in ("actor", "director", "writer", "genre", "language"):
            assert len(set(m.values(field))) == len(m.values(field)), (m.id, field)
        assert m.year is None or isinstance(m.year, int)
    assert sum(m.year is None for m in kb.movies) == 338
    people = {v for f in ("actor", "director", "writer") for v in kb.values(f)}
    assert not people & {"Unknown", "nm1157013", "collaborative"}  # placeholders, not names
    slumdog = kb.by_id["Slumdog Millionaire"]
    assert slumdog.year == 2008 and slumdog.actors.count("Anil Kapoor") == 1
    assert slumdog.genres == ("Indie", "Romance", "Crime", "Drama", "Thriller")
    assert slumdog.languages == ("Hindi", "French", "English")


def test_opendialkg_normalisation_rules():
    assert normalise_genres(["Romance Film", "Crime Fiction", "Sci-Fi", "Science Fiction",
                             "Indie film", "United Kingdom", "film", "ex", "Romantic comedy"]) == \
        ["Romance", "Crime", "Science Fiction", "Indie", "Comedy"]
    assert normalise_language("English Language") == "English"
    assert normalise_language("Hungarian language") == "Hungarian"
    assert normalise_language("ger") == "German"
    assert normalise_people(["Ann", "Unknown", "nm1157013", "Ann", "collaborative", "Bo"]) == \
        ["Ann", "Bo"]


def test_opendialkg_format_is_lenient_on_years(tmp_path):
    data = {"A": {**film("A"), "year": "1999", "original_id": "0"},
            "B": {**film("B"), "year": None, "original_id": "1"},
            "C": {**film("C"), "year": "unknown", "original_id": "2"}}
    cat = MovieCatalog.load(write(tmp_path, data))
    assert [m.year for m in cat.movies] == [1999, None, None]


# ----- malformed input ------------------------------------------------------------------------
def test_invalid_json_names_the_file(tmp_path):
    path = write(tmp_path, '{"Alpha": {"name": "Alpha",')
    with pytest.raises(ConvsimError, match="not valid JSON") as err:
        MovieCatalog.load(path)
    assert err.value.file == str(path)


def test_missing_file_and_non_object(tmp_path):
    with pytest.raises(ConvsimError, match="cannot read"):
        MovieCatalog.load(tmp_path / "absent.json")
    with pytest.raises(ConvsimError, match="JSON object"):
        MovieCatalog.load(write(tmp_path, "[1, 2]"))


def test_record_not_an_object(tmp_path):
    path = write(tmp_path, {"Alpha": film(), "Beta": ["not", "a", "record"]})
    with pytest.raises(ConvsimError, match="must be an object") as err:
        MovieCatalog.load(path)
    assert (err.value.file, err.value.record) == (str(path), "Beta")


@pytest.mark.parametrize("original_id", [False, True], ids=["project", "opendialkg"])
def test_non_list_actor_field(tmp_path, original_id):
    bad = film("Beta", actor="Ann Lee")
    extra = {"original_id": "1"} if original_id else {}
    path = write(tmp_path, {"Alpha": {**film(), **({"original_id": "0"} if original_id else {})},
                            "Beta": {**bad, **extra}})
    with pytest.raises(ConvsimError, match="must be a list") as err:
        MovieCatalog.load(path)
    assert (err.value.file, err.value.record, err.value.field) == (str(path), "Beta", "actor")
    assert "Beta" in str(err.value) and "actor" in str(err.value)


@pytest.mark.parametrize("year", ["2001", "19x9", None, 3001, True])
def test_bad_year_in_project_format(tmp_path, year):
    path = write(tmp_path, {"Alpha": film(), "Beta": film("Beta", year)})
    with pytest.raises(ConvsimError, match="year") as err:
        MovieCatalog.load(path)
    assert (err.value.record, err.value.field) == ("Beta", "year")


@pytest.mark.parametrize("over, field", [({"name": ""}, "name"), ({"genre": ["Sci-Fi"]}, "genre"),
                                         ({"plot": ""}, "plot"), ({"writer": ["ok", 3]}, "writer")])
def test_project_format_is_strict(tmp_path, over, field):
    path = write(tmp_path, {"Beta": {**film("Beta"), **over}})
    with pytest.raises(ConvsimError) as err:
        MovieCatalog.load(path)
    assert (err.value.record, err.value.field) == ("Beta", field)
