"""The simulated movie-seeker's latent taste and hidden target films (docs/crs_shift.md "Targets").

A user's taste is drawn once, from its session seed, before the dialogue starts:

* ``true_genre`` and a handful of *liked values*: people, a writer and a language taken from
  ``TASTE_FILMS`` films of that genre (the films the user happens to love);
* the *utility* of a film, u(m) = [true_genre ∈ m] + Σ_{(f, v) liked, v ∈ m.f} WEIGHTS[f];
* ``n_targets`` hidden *target films* of the true genre, drawn without replacement with
  probability ∝ exp(u(m) / temperature). Targets are therefore consistent with the taste but not
  a deterministic function of it: a recommender that knows the taste exactly (the ``oracle``
  reference) ranks them high, not necessarily first.

The simulator never names a target the system has not named (anchors and its own examples exclude
them) and reveals the taste only through the values it asks for, so Recall@K and preference
coverage computed against the targets are free of the leak of scoring a system on films the user
named itself. The targets *follow the user's shifts* (:func:`redraw_targets`, agents/crs/user.py):
after any change of its constraints the user keeps the targets that still satisfy them and draws
the rest among the films that do, so at the end the targets satisfy its last preference.
"""

from __future__ import annotations

import math

from convsim.catalog.movies.catalog import MovieCatalog
from convsim import rng_for

TASTE_FILMS = 3
WEIGHTS = {"genre": 1.0, "actor": 1.0, "director": 1.0, "writer": 0.75, "language": 0.25}
LIKED_PER_FIELD = {"actor": 2, "director": 1, "writer": 1, "language": 1}


def draw_liked(catalog: MovieCatalog, true_genre: str, seed: int) -> list[list[str]]:
    """Liked (field, value) pairs: the true genre plus values of a few films of that genre."""
    rng = rng_for(seed, 0, "taste")
    pool = sorted(catalog.items_with("genre", true_genre))
    taste = rng.sample(pool, min(TASTE_FILMS, len(pool)))
    liked = [["genre", true_genre]]
    for field, n in LIKED_PER_FIELD.items():
        values = sorted({v for i in taste for v in catalog.by_id[i].values(field)})
        liked += [[field, v] for v in rng.sample(values, min(n, len(values)))]
    return liked


def utility(catalog: MovieCatalog, liked: list[list[str]]) -> dict[str, float]:
    """u(m) for every film with u > 0 (the other films have utility 0)."""
    out: dict[str, float] = {}
    for field, value in liked:
        for film in catalog.items_with(field, value):
            out[film] = out.get(film, 0.0) + WEIGHTS.get(field, 0.0)
    return out


def ranked_by_utility(catalog: MovieCatalog, liked: list[list[str]]) -> list[str]:
    """Film ids by descending utility (ties: catalog order), the films with u = 0 last."""
    u = utility(catalog, liked)
    order = {m.id: k for k, m in enumerate(catalog.movies)}
    return sorted(order, key=lambda i: (-u.get(i, 0.0), order[i]))


def draw_targets(catalog: MovieCatalog, liked: list[list[str]], true_genre: str, seed: int,
                 n_targets: int, temperature: float) -> list[str]:
    """``n_targets`` films of the true genre, sampled ∝ exp(u / temperature) without replacement."""
    rng = rng_for(seed, 0, "targets")
    u = utility(catalog, liked)
    pool = sorted(catalog.items_with("genre", true_genre))
    weights = [math.exp(u.get(i, 0.0) / temperature) for i in pool]
    chosen: list[str] = []
    while pool and len(chosen) < n_targets:
        pick = rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(pick))
        weights.pop(pick)
    return chosen


def redraw_targets(catalog: MovieCatalog, liked: list[list[str]], pool: list[str], keep: list[str],
                   rng, n_targets: int, temperature: float) -> list[str]:
    """Targets that follow the user's preference: the old targets in ``keep`` (those still
    satisfying the new constraints) first, then films of ``pool`` (the films satisfying the new
    constraints, minus the films the user itself named) sampled ∝ exp(u / temperature) without
    replacement until there are ``n_targets``."""
    chosen = list(dict.fromkeys(keep))[:n_targets]
    u = utility(catalog, liked)
    rest = sorted(set(pool) - set(chosen))
    weights = [math.exp(u.get(i, 0.0) / temperature) for i in rest]
    while rest and len(chosen) < n_targets:
        pick = rng.choices(range(len(rest)), weights=weights)[0]
        chosen.append(rest.pop(pick))
        weights.pop(pick)
    return chosen
