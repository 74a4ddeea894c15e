"""The shipped movie catalog and its concept extractor, loaded once per test module that imports
these fixtures (tests/test_crs_recommender.py, tests/test_crs_user_goal.py)."""
import pytest

from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor


@pytest.fixture(scope="module")
def catalog():
    return load_movie_catalog()


@pytest.fixture(scope="module")
def extractor(catalog):
    return ConceptExtractor(catalog)
