"""The CRS world as LangChain tools: search films by constraints and look a film up (catalog/movies).

``FilmTools(catalog)``: ``search_films(constraints, limit)`` — films satisfying every field
constraint (genre, actor, director, writer, language, year; AND over fields, a list is OR within
a field), as ``MovieCatalog.search``; ``lookup_film(title)`` — one film by id or title (exact,
case-insensitive). Results carry the catalog id, which is what a recommender's ``recommended_ids``
names. Every call and result goes to ``calls``. Nothing here reads the simulated seeker's target
films or preferences: the tools expose the catalog only.
"""
from __future__ import annotations

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from convsim.agents.toollog import ToolLog
from convsim.catalog.movies.catalog import FIELDS, Movie, MovieCatalog

MAX_RESULTS = 10


class SearchArgs(BaseModel):
    constraints: dict[str, str | int | list[str]] = Field(default_factory=dict, description=(
        f"field -> value (or a list of values, any of which matches); fields: {', '.join(FIELDS)}"))
    limit: int = Field(MAX_RESULTS, ge=1, le=50, description="at most this many films")


class LookupArgs(BaseModel):
    title: str = Field(description="a film's title or catalog id")


def film_card(m: Movie) -> dict:
    return {"id": m.id, "title": m.title, "year": m.year, "genres": list(m.genres), "actors": list(m.actors[:5]),
            "directors": list(m.directors), "languages": list(m.languages)}


TOOL_NAMES = ("search_films", "lookup_film")  # FilmTools.tools(), in order (the slot declares them)


class FilmTools(ToolLog):
    def __init__(self, catalog: MovieCatalog) -> None:
        super().__init__()
        self.catalog = catalog
        self._by_title = {}
        for m in catalog.movies:
            self._by_title.setdefault(m.title.casefold(), m)

    def search_films(self, constraints: dict | None = None, limit: int = MAX_RESULTS) -> dict:
        constraints = dict(constraints or {})
        unknown = sorted(k for k in constraints if k not in FIELDS)
        if unknown:
            return self.record("search_films", {"constraints": constraints, "limit": limit},
                               {"ok": False, "reason": "unknown_field", "fields": unknown, "known": list(FIELDS)})
        found = self.catalog.search(constraints)
        # the fullest entries first (a popularity proxy), then title order
        found = sorted(found, key=lambda m: -m.richness)[:limit]
        return self.record("search_films", {"constraints": constraints, "limit": limit},
                           {"ok": True, "results": [film_card(m) for m in found]})

    def lookup_film(self, title: str) -> dict:
        m = self.catalog.by_id.get(str(title)) or self._by_title.get(str(title).strip().casefold())
        result = {"ok": True, "film": {**film_card(m), "writers": list(m.writers), "plot": m.plot}} if m else \
            {"ok": False, "reason": "not_found"}
        return self.record("lookup_film", {"title": title}, result)

    def tools(self) -> list[StructuredTool]:
        def search_films(constraints: dict | None = None, limit: int = MAX_RESULTS) -> dict:
            return self.search_films(constraints, limit)

        def lookup_film(title: str) -> dict:
            return self.lookup_film(title)

        return [StructuredTool.from_function(search_films, name="search_films", args_schema=SearchArgs,
                                             description="Search the film catalog by genre, actor, director, "
                                                         "writer, language or year."),
                StructuredTool.from_function(lookup_film, name="lookup_film", args_schema=LookupArgs,
                                             description="Look up one film by title or id: cast, director, "
                                                         "year, genres, plot.")]
