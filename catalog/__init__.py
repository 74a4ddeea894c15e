"""Domain data: loaders and indices for the catalogs the project ships (catalog/data/) and for
the real formats (OpenDialKG movie KB, MultiWOZ databases and dialogues, TravelPlanner records).

Every loader raises ``convsim.ConvsimError`` naming the file, the record and the field.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    # movies (docs/movie_catalog.md)
    "FIELDS": "movies.catalog", "CANONICAL_GENRES": "movies.catalog", "Movie": "movies.catalog", "MovieCatalog": "movies.catalog",
    "load_movie_catalog": "movies.catalog", "ConceptExtractor": "movies.concepts",
    # customer service (docs/customer_service.md)
    "DOMAINS": "service.db", "ServiceDB": "service.db", "ServiceSchema": "service.db", "load_service_db": "service.db",
    "load_service_schema": "service.db", "load_dialogues": "service.multiwoz",
    "load_unified": "service.multiwoz", "load_multiwoz22": "service.multiwoz",
    # travel (docs/group_planning.md)
    "TravelDB": "travel", "load_travel_db": "travel", "load_travelplanner_ref_info": "travel",
    # courses (docs/course_retrieval.md)
    "TestSet": "courses", "TestCase": "courses", "load_courses": "courses", "load_test_set": "courses",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
