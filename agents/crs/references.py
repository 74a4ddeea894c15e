"""Reference recommenders: systems of known quality that a metric must order correctly
(docs/crs_shift.md "Reference systems"). Selected with the ``crs_agent`` param.

* ``echo``: restates the user's concepts ("Noted: you want ..."), names no film. It has no
  recommendation value, yet grounded TAS scores it at or near the ceiling: the echo diagnostic
  (evaluation/crs/nodes.py) must flag it.
* ``random``: films drawn at random from the catalog, named by title.
* ``titles_only``: the template recommender's own films, named by title only (no attribute).
* ``oracle``: the films that are best under the simulated user's *true latent taste*
  (agents/crs/profile.py) among those satisfying its current constraints, in natural wording
  (one reason per film, no restating). It reads the taste, never the hidden target list.
* ``restating``: the earlier template recommender, which opens every answer by restating all
  tracked constraints (kept as a named reference of a copy-prone system).

Gaming references (systems of *no* recommendation value built to score high on a metric; a
metric that ranks them near the top is gameable, and the run says so: evaluation/crs/validity.py):

* ``parrot``: repeats the user's turn verbatim. Grounded TAS gives it the maximum, 1.0
  (CC = CR = 1 and the copy penalty I = 1: 1 + 1 - 1); it names only the films the user named,
  which the echo flag does not count as recommendations.
* ``restate_titles``: "Noted: you want {the user's concepts}." then the template recommender's
  films by title ("Try "A" or "B"."): the restating of the review's gaming agent, with real films.
* ``paraphrase``: the user's concepts said back in varied words ("So what you're after is ..., got
  it.") plus one random film that shares *one* value the user stated ("Try '1917'" for films from
  2019): a restatement dressed as a recommendation, whatever its wording.
* ``echo_plus_fixed_film``: the echo reply plus one fixed film, the same in every turn and
  session ('Noted: you want ... Try "Titanic".'). Its first naming may count as a
  recommendation; every later turn repeats a film already named, which the echo flag does not
  count either.

Each function returns ``(text, named_ids, ranked_ids)``: the answer, the films it names (known
exactly, not re-extracted) and its ranked list (Recall@K / coverage read the top-k of it).
"""

from __future__ import annotations

from convsim.catalog.movies.catalog import Movie, MovieCatalog
from convsim.catalog.movies.phrasing import concepts_phrase, echo_reply  # noqa: F401  (re-exported)
from convsim import rng_for

REFERENCE_AGENTS = ("echo", "random", "titles_only", "oracle", "restating", "parrot",
                    "echo_plus_fixed_film", "restate_titles", "paraphrase")
# built to score on words, not films (restate_titles names the template's films: it may score as the
# template on the adaptation metrics, never above; the others must be flagged)
GAMING_AGENTS = ("echo", "parrot", "echo_plus_fixed_film", "restate_titles", "paraphrase")

PARAPHRASES = ("So what you're after is {concepts}, got it.", "Right, {concepts} it is.",
               "Understood: {concepts}, nothing else.", "If I follow you, {concepts}.")
FIXED_FILM = "Titanic"  # echo_plus_fixed_film's film (the catalog's first film when it lacks it)


def fixed_film(catalog: MovieCatalog) -> Movie:
    """The one film ``echo_plus_fixed_film`` names, whatever the user asks."""
    return catalog.by_id.get(FIXED_FILM) or catalog.movies[0]


def echo_plus_fixed_film_reply(user_concepts, catalog: MovieCatalog) -> tuple[str, list[str], list[str]]:
    """The echo reply plus one fixed film: 'Noted: you want horror films. Anything else? Try
    "Titanic".' It names (and logs) that film only."""
    film = fixed_film(catalog)
    return f'{echo_reply(user_concepts)} Try "{film.title}".', [film.id], [film.id]


def random_reply(catalog: MovieCatalog, *, seed: int, turn: int, n_mention: int, top_k: int
                 ) -> tuple[str, list[str], list[str]]:
    rng = rng_for(seed, turn, "crs_random")
    picks = rng.sample(range(len(catalog.movies)), min(top_k, len(catalog.movies)))
    ranked = [catalog.movies[i].id for i in picks]
    named = ranked[:n_mention]
    titles = [catalog.by_id[i].title for i in named]
    text = "How about " + " or ".join(f'"{t}"' for t in titles) + "?"
    return text, named, ranked


def titles_only_reply(films: list[Movie]) -> tuple[str, list[str], list[str]]:
    if not films:
        return "I have nothing for that right now.", [], []
    text = f'You might like "{films[0].title}".'
    for movie in films[1:]:
        text += f' "{movie.title}" is another good one.'
    return text, [m.id for m in films], [m.id for m in films]


def oracle_ranking(catalog: MovieCatalog, utility: dict[str, float], constraints: dict,
                   shown: set[str]) -> list[str]:
    """Films satisfying the user's current constraints by descending latent utility, then every
    other film by utility: the best list the taste allows. Films in ``shown`` go last (the
    oracle names new films rather than repeating itself)."""
    order = {m.id: k for k, m in enumerate(catalog.movies)}

    def key(i: str):
        return -utility.get(i, 0.0), order[i]

    fitting = sorted((m.id for m in catalog.search(constraints)), key=key) if constraints else []
    taken = set(fitting)
    ranked = fitting + sorted((i for i in order if i not in taken), key=key)
    return [i for i in ranked if i not in shown] + [i for i in ranked if i in shown]


def restate_titles_reply(user_concepts, films: list[Movie]) -> tuple[str, list[str], list[str]]:
    """The echo reply, then the given films (the template's) by title."""
    head = echo_reply(user_concepts).split(" Anything else?")[0]
    if not films:
        return head, [], []
    return (f"{head} Try " + " or ".join(f'"{m.title}"' for m in films) + ".",
            [m.id for m in films], [m.id for m in films])


def paraphrase_reply(user_concepts, catalog: MovieCatalog, *, seed: int, turn: int
                     ) -> tuple[str, list[str], list[str]]:
    """The user's concepts in varied words plus one random film sharing one stated value."""
    rng = rng_for(seed, turn, "crs_paraphrase")
    concepts = sorted((f, str(v)) for f, v in user_concepts)
    text = rng.choice(PARAPHRASES).format(concepts=concepts_phrase(concepts) if concepts else "anything good")
    pool = sorted({i for f, v in concepts if f in ("genre", "actor", "director", "writer", "language", "year")
                   for i in catalog.items_with(f, v)}) if concepts else []
    film = catalog.by_id[rng.choice(pool)] if pool else catalog.movies[rng.randrange(len(catalog.movies))]
    return f'{text} Try "{film.title}".', [film.id], [film.id]
