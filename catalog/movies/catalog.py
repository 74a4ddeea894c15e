"""Movie catalog: one loader for the project catalog and the OpenDialKG movie KB.

Both files are a JSON object keyed by title whose values look like
``{"name", "year", "genre": [...], "actor": [...], "director": [...], "writer": [...],
"language": [...], "plot"}``.

- The project catalog (``catalog/data/movies.json``) is read strictly: every field must be
  present and well typed, ``year`` is an int and genres come from ``CANONICAL_GENRES``.
- The OpenDialKG KB (records carry ``original_id``) is known-messy data and is normalised:
  duplicate people are dropped, " Language" suffixes and ISO codes are merged, genres go
  through a whitelist (Freebase subjects such as "United Kingdom" or "film" are dropped) and
  a missing or unparseable year becomes ``None``. Structural defects (not an object, a field
  that is not a list) still raise ``ConvsimError``.

See docs/movie_catalog.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from convsim import ConvsimError
from convsim.textio import load_json
from convsim.lazy import cached_once

FIELDS = ("genre", "actor", "director", "writer", "language", "year")
LIST_FIELDS = ("genre", "actor", "director", "writer", "language")
PROJECT_CATALOG = Path(__file__).resolve().parents[1] / "data" / "movies.json"

CANONICAL_GENRES = (
    "Action", "Adventure", "Animation", "Biography", "Comedy", "Crime", "Documentary", "Drama",
    "Family", "Fantasy", "History", "Horror", "Indie", "Music", "Musical", "Mystery", "Romance",
    "Science Fiction", "Sport", "Thriller", "War", "Western",
)

# OpenDialKG genre strings (lower-cased) that denote a film genre, mapped to canonical genres.
# Anything not listed is a Freebase subject ("United Kingdom", "NASA", "ex", "film", "cat") and
# is dropped: the original used them as genres and matched them as substrings.
_GENRE_MAP: dict[str, tuple[str, ...]] = {g.lower(): (g,) for g in CANONICAL_GENRES}
_GENRE_MAP.update({
    "action film": ("Action",), "martial arts film": ("Action",), "superhero movie": ("Action",),
    "disaster film": ("Action",), "adventure film": ("Adventure",), "road movie": ("Adventure",),
    "animated cartoon": ("Animation",), "computer animation": ("Animation",), "anime": ("Animation",),
    "biographical film": ("Biography",),
    "black comedy": ("Comedy",), "parody": ("Comedy",), "satire": ("Comedy",),
    "slapstick": ("Comedy",), "screwball comedy": ("Comedy",), "farce": ("Comedy",),
    "comedy of manners": ("Comedy",), "comedy of errors": ("Comedy",), "political satire": ("Comedy",),
    "buddy film": ("Comedy",), "comedy-drama": ("Comedy", "Drama"),
    "tragicomedy": ("Comedy", "Drama"), "romantic comedy": ("Romance", "Comedy"),
    "horror comedy": ("Horror", "Comedy"),
    "crime fiction": ("Crime",), "heist film": ("Crime",), "film noir": ("Crime",),
    "film-noir": ("Crime",), "neo-noir": ("Crime",), "true crime": ("Crime",),
    "buddy cop film": ("Crime", "Comedy"),
    "documentary film": ("Documentary",), "docudrama": ("Documentary", "Drama"),
    "costume drama": ("Drama",), "melodrama": ("Drama",), "legal drama": ("Drama",),
    "teen drama": ("Drama",), "historical period drama": ("History", "Drama"),
    "family (film genre) #395": ("Family",),
    "urban fantasy": ("Fantasy",), "high fantasy": ("Fantasy",), "contemporary fantasy": ("Fantasy",),
    "romantic fantasy": ("Romance", "Fantasy"), "science fantasy": ("Science Fiction", "Fantasy"),
    "historical fiction": ("History",),
    "slasher": ("Horror",), "psychological horror": ("Horror",), "zombie film": ("Horror",),
    "vampire film": ("Horror",), "monster movie": ("Horror",), "splatter film": ("Horror",),
    "indie film": ("Indie",),
    "backstage musical": ("Musical",), "dance film": ("Musical",),
    "detective fiction": ("Mystery",),
    "romance film": ("Romance",), "paranormal romance": ("Romance",),
    "sci-fi": ("Science Fiction",), "science fiction": ("Science Fiction",),
    "soft science fiction": ("Science Fiction",), "future noir": ("Science Fiction", "Crime"),
    "sports": ("Sport",), "motorsport": ("Sport",),
    "suspense": ("Thriller",), "psychological thriller": ("Thriller",),
    "political thriller": ("Thriller",), "spy film": ("Thriller",),
    "war film": ("War",),
    "spaghetti western": ("Western",), "revisionist western": ("Western",),
})

# Language spellings merged by the loader: ISO 639-2 codes that OpenDialKG uses as values
# ("fre", "ger", "spa" were substring traps in the original) and regional variants.
_LANGUAGE_ALIASES = {
    "fre": "French", "fra": "French", "ger": "German", "deu": "German", "spa": "Spanish",
    "eng": "English", "ita": "Italian", "jpn": "Japanese", "american english": "English",
    "early modern english": "English", "mandarin chinese": "Mandarin", "standard chinese": "Mandarin",
}
# "Sign Language" is part of a language's name; other " Language" suffixes are Freebase noise.
_LANGUAGE_SUFFIX = re.compile(r"(?<!\bSign)\s+languages?$", re.IGNORECASE)
_YEAR_PREFIX = re.compile(r"^\s*(\d{3,4})")


@dataclass(frozen=True)
class Movie:
    id: str
    title: str
    year: int | None
    genres: tuple[str, ...]
    actors: tuple[str, ...]
    directors: tuple[str, ...]
    writers: tuple[str, ...]
    languages: tuple[str, ...]
    plot: str

    def values(self, field: str) -> tuple[str, ...]:
        """The movie's values of one field of FIELDS; year gives ``(str(year),)`` or ``()``."""
        if field == "year":
            return () if self.year is None else (str(self.year),)
        attr = _FIELD_ATTR.get(field)
        if attr is None:
            raise ConvsimError(f"unknown field {field!r}; expected one of {FIELDS}", field=field)
        return getattr(self, attr)

    @functools.cached_property
    def richness(self) -> int:
        """How many field values the entry has (a popularity proxy: well-known films have
        fuller catalog entries); computed once per film."""
        return sum(len(self.values(f)) for f in FIELDS)


_FIELD_ATTR = {"genre": "genres", "actor": "actors", "director": "directors",
               "writer": "writers", "language": "languages"}


def normalise_language(value: str) -> str:
    stripped = _LANGUAGE_SUFFIX.sub("", value.strip())
    return _LANGUAGE_ALIASES.get(stripped.lower(), stripped)


def normalise_genres(values: list[str]) -> list[str]:
    """Whitelist-map OpenDialKG genre strings; unknown strings (Freebase subjects) are dropped."""
    out: list[str] = []
    for value in values:
        out.extend(_GENRE_MAP.get(value.strip().lower(), ()))
    return _dedupe(out)


_PLACEHOLDER_PERSON = re.compile(r"^(unknown|n/?a|none|nm\d+)$", re.IGNORECASE)


def normalise_people(values: list[str]) -> list[str]:
    """Order-preserving de-duplication; drops placeholders ("Unknown", IMDb ids "nm1157013")
    and all-lower-case entries ("collaborative"), which are not names."""
    return _dedupe(v for v in values if not _PLACEHOLDER_PERSON.match(v) and v != v.lower())


def _dedupe(values) -> list[str]:
    seen: set[str] = set()
    out = []
    for v in values:
        if v and v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _string_list(raw: dict, field: str, *, file: str, record: str, required: bool) -> list[str]:
    value = raw.get(field)
    if value is None:
        if required:
            raise ConvsimError(f"missing field {field!r}", file=file, record=record, field=field)
        return []
    if not isinstance(value, list):
        raise ConvsimError(f"field {field!r} must be a list of strings, got {type(value).__name__}",
                           file=file, record=record, field=field)
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ConvsimError(f"field {field!r} holds a non-string or empty entry: {item!r}",
                               file=file, record=record, field=field)
    return [item.strip() for item in value]


def _parse_year_lenient(value) -> int | None:
    # OpenDialKG stores years as strings and lacks them for 338 movies; "bad" means unknown here.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _YEAR_PREFIX.match(value)
        return int(m.group(1)) if m else None
    return None


def _parse_year_strict(value, *, file: str, record: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1870 <= value <= 2100:
        raise ConvsimError(f"year must be an integer between 1870 and 2100, got {value!r}",
                           file=file, record=record, field="year")
    return value


def _parse_record(key: str, raw, *, file: str, strict: bool) -> Movie:
    if not isinstance(raw, dict):
        raise ConvsimError(f"record must be an object, got {type(raw).__name__}",
                           file=file, record=key)
    name = raw.get("name", key if not strict else None)
    if not isinstance(name, str) or not name.strip():
        raise ConvsimError("missing or empty 'name'", file=file, record=key, field="name")
    plot = raw.get("plot", "")
    if plot is None and not strict:
        plot = ""
    if not isinstance(plot, str) or (strict and not plot.strip()):
        raise ConvsimError("'plot' must be a non-empty string", file=file, record=key, field="plot")
    lists = {f: _string_list(raw, f, file=file, record=key, required=strict) for f in LIST_FIELDS}
    if strict:
        year = _parse_year_strict(raw.get("year"), file=file, record=key)
        unknown = [g for g in lists["genre"] if g not in CANONICAL_GENRES]
        if unknown:
            raise ConvsimError(f"genres {unknown} are not in the canonical vocabulary",
                               file=file, record=key, field="genre")
        genres = _dedupe(lists["genre"])
        languages = _dedupe(lists["language"])
    else:
        year = _parse_year_lenient(raw.get("year"))
        genres = normalise_genres(lists["genre"])
        languages = _dedupe(normalise_language(v) for v in lists["language"])
    people = _dedupe if strict else normalise_people
    return Movie(id=key, title=name.strip(), year=year, genres=tuple(genres),
                 actors=tuple(people(lists["actor"])), directors=tuple(people(lists["director"])),
                 writers=tuple(people(lists["writer"])), languages=tuple(languages),
                 plot=plot.strip())


def _unify_case(movies: list[Movie]) -> list[Movie]:
    """Give every value one spelling per field ("Hungarian"/"hungarian" -> the most frequent)."""
    canon: dict[str, dict[str, str]] = {}
    for field in LIST_FIELDS:
        spellings: dict[str, Counter] = defaultdict(Counter)
        for m in movies:
            for v in m.values(field):
                spellings[v.casefold()][v] += 1
        canon[field] = {k: min(c, key=lambda s: (-c[s], s)) for k, c in spellings.items()}
    out = []
    for m in movies:
        fixed = {_FIELD_ATTR[f]: tuple(_dedupe(canon[f][v.casefold()] for v in m.values(f)))
                 for f in LIST_FIELDS}
        out.append(Movie(id=m.id, title=m.title, year=m.year, plot=m.plot, **fixed))
    return out


class MovieCatalog:
    """Movies plus per-field inverted indices (value -> movie ids), case-insensitive on values."""

    def __init__(self, movies: list[Movie], source: str = "<memory>"):
        self.movies = list(movies)
        self.source = source
        self.by_id = {m.id: m for m in self.movies}
        self._index: dict[str, dict[str, set[str]]] = {f: defaultdict(set) for f in FIELDS}
        self._canonical: dict[str, dict[str, str]] = {f: {} for f in FIELDS}
        for m in self.movies:
            for f in FIELDS:
                for v in m.values(f):
                    self._canonical[f].setdefault(v.casefold(), v)
                    self._index[f][self._canonical[f][v.casefold()]].add(m.id)
        self._frozen = {f: {v: frozenset(ids) for v, ids in idx.items()}
                        for f, idx in self._index.items()}
        self._idf: dict[tuple, float] = {}  # idf of (field, value) asked for and in the catalog

    @classmethod
    def load(cls, path: str | Path | None = None, *, fmt: str = "auto") -> "MovieCatalog":
        """Load a catalog. ``fmt``: "project" (strict), "opendialkg" (normalising) or "auto"
        (OpenDialKG when every record carries ``original_id``, as the KB's records do)."""
        path = Path(path) if path is not None else PROJECT_CATALOG
        file = str(path)
        data = load_json(path, what="movie catalog")  # UTF-8, bounded nesting, one-line errors
        if not isinstance(data, dict) or not data:
            raise ConvsimError("a movie catalog must be a non-empty JSON object keyed by title",
                               file=file)
        if fmt == "auto":
            is_kb = all(isinstance(r, dict) and "original_id" in r for r in data.values())
            fmt = "opendialkg" if is_kb else "project"
        if fmt not in ("project", "opendialkg"):
            raise ConvsimError(f"unknown catalog format {fmt!r}", file=file)
        movies = [_parse_record(k, r, file=file, strict=fmt == "project") for k, r in data.items()]
        if fmt == "opendialkg":
            movies = _unify_case(movies)
        return cls(movies, source=file)

    def __len__(self) -> int:
        return len(self.movies)

    def _check_field(self, field: str) -> None:
        if field not in FIELDS:
            raise ConvsimError(f"unknown field {field!r}; expected one of {FIELDS}",
                               file=self.source, field=field)

    def canonical(self, field: str, value) -> str | None:
        """The catalog's spelling of ``value`` (case-insensitive), or None if absent."""
        self._check_field(field)
        return self._canonical[field].get(str(value).strip().casefold())

    def values(self, field: str) -> list[str]:
        self._check_field(field)
        return sorted(self._frozen[field])

    def items_with(self, field: str, value) -> frozenset[str]:
        canon = self.canonical(field, value)
        return self._frozen[field].get(canon, frozenset()) if canon is not None else frozenset()

    def doc_freq(self, field: str, value) -> int:
        return len(self.items_with(field, value))

    def idf(self, field: str, value) -> float:
        """Smooth IDF, ln((1+N)/(1+df)) + 1 (crs.md §1.3), N = movies in the catalog."""
        try:  # every turn weighs the same few hundred concepts: each is computed once
            return self._idf[field, value]
        except (KeyError, TypeError):
            pass
        canon = self.canonical(field, value)
        df = len(self._frozen[field].get(canon, ())) if canon is not None else 0
        weight = math.log((1 + len(self.movies)) / (1 + df)) + 1.0
        if canon is not None:  # bounded by the catalog's values, whatever callers ask
            try:
                self._idf[field, value] = weight
            except TypeError:  # an unhashable value: weighed, not kept
                pass
        return weight

    def search(self, constraints: dict[str, str | int | list], *, limit: int | None = None
               ) -> list[Movie]:
        """Movies satisfying every field constraint (AND over fields, OR within a list),
        ordered by title then id. An empty constraint dict matches every movie."""
        ids: set[str] | None = None
        for field, wanted in constraints.items():
            self._check_field(field)
            options = wanted if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
            matching: set[str] = set()
            for value in options:
                matching |= self.items_with(field, value)
            ids = matching if ids is None else ids & matching
        pool = self.movies if ids is None else [self.by_id[i] for i in ids]
        ordered = sorted(pool, key=lambda m: (m.title.casefold(), m.id))
        return ordered if limit is None else ordered[:limit]


@cached_once(maxsize=8)
def _load_cached(path: str | None) -> MovieCatalog:
    return MovieCatalog.load(path)


def load_movie_catalog(path: str | Path | None = None) -> MovieCatalog:
    """Shared (cached) catalog: sessions of a run load it once. Do not mutate the result."""
    return _load_cached(None if path is None else str(Path(path).resolve()))


load_movie_catalog.cache_clear = _load_cached.cache_clear  # type: ignore[attr-defined]
