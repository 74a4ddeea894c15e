"""Domain data: loaders and indices for the catalogs the project ships (catalog/data/) and for
the real formats (OpenDialKG movie KB, MultiWOZ databases and dialogues, TravelPlanner records).

Every loader raises ``convsim.ConvsimError`` naming the file, the record and the field.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    # movies (docs/movie_catalog.md)
    "FIELDS": "movies", "CANONICAL_GENRES": "movies", "Movie": "movies", "MovieCatalog": "movies",
    "load_movie_catalog": "movies", "ConceptExtractor": "concepts",
    # customer service (docs/customer_service.md)
    "DOMAINS": "service", "ServiceDB": "service", "ServiceSchema": "service", "load_service_db": "service",
    "load_service_schema": "service", "load_dialogues": "multiwoz_dialogues",
    "load_unified": "multiwoz_dialogues", "load_multiwoz22": "multiwoz_dialogues",
    # travel (docs/group_planning.md)
    "TravelDB": "travel", "load_travel_db": "travel", "load_travelplanner_ref_info": "travel",
    # courses (docs/course_retrieval.md)
    "TestSet": "courses", "TestCase": "courses", "load_courses": "courses", "load_test_set": "courses",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
