"""Metric throughput at the scale of the multi-model CRS experiment: 6 models x 1000 sessions x 20 turns = 120,000 turns.

Prints figures, never passes or fails on time (goals, printed beside the figures: 120,000 turns
evaluated in under 30 s and 1 GB with the TF-IDF path; extraction at least 20,000 utterances/s on the
OpenDialKG catalog, and on a synthetic catalog of 100,000 movies growing well below linearly in
catalog size).

    python bench/metrics_scale.py                       # full scale
    python bench/metrics_scale.py --models 1 --sessions 50   # quick look

Dialogues: a few real sessions of graphs/crs_shift.py (model none) are simulated once and
replicated to the requested count; the evaluation per dialogue is what a run does after the
simulation: the grounded turn metrics (catalog concept extraction, CC, CR, copy penalty, TAS), the
dialogue metrics, and TAS/CAS (TF-IDF embeddings, LDA topics, shift detection) + coverage.
"""

from __future__ import annotations

import argparse
import functools
import os
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OPENDIALKG = Path(__file__).resolve().parents[2] / "shared" / "data" / "opendialkg" / "opendialkg_movie_data.json"


def _letters(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if i == 0:
            return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def seed_dialogues(n_sessions: int, n_turns: int) -> list[list[dict]]:
    import convsim
    cfg = {"name": "bench", "graph": "crs_shift", "params": {"n_turns": n_turns, "n_sessions": n_sessions,
                                                           "topic_mode": "keyword", "judge": False},
           "sessions": n_sessions, "seed": 11, "concurrency": 2, "models": {"crs": "none", "user": "none"},
           "trace": False, "analysis": [], "out_dir": tempfile.mkdtemp(prefix="convsim-bench-")}
    from convsim.config import config_from_dict
    run_dir = convsim.run(config_from_dict(cfg), analyze=False)
    return [json.loads(line)["transcript"] for line in (Path(run_dir) / "results.jsonl").read_text().splitlines()]


def evaluate_all(dialogues: list[list[dict]], *, topic_mode: str, run_dir: str | None = None) -> dict:
    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.evaluation.crs.coverage import coverage_metrics, hidden_targets
    from convsim.evaluation.crs.nodes import DIALOGUE_CONTRIBUTORS, TASSettings, dialogue_evaluation, turn_evaluation
    from convsim.evaluation.crs.tas_cas_eval import _embedder, tas_cas_many, topic_extractor

    catalog = load_movie_catalog()
    parts = {"extract_s": 0.0, "lda_s": 0.0, "encode_s": 0.0}  # where the time goes (printed)
    extractor = _Timed(ConceptExtractor(catalog), "extract", parts, "extract_s")
    settings = TASSettings()
    embedder = _embedder("tfidf", catalog)
    topics = topic_extractor(topic_mode, catalog, run_dir)
    started, cpu_started = time.perf_counter(), time.process_time()
    turns = 0
    for transcript in dialogues:
        state = {"transcript": transcript, "turn_metrics": [], "turn_details": []}
        for u, s in zip(transcript[0::2], transcript[1::2]):
            m, d = turn_evaluation(u, s, extractor=extractor, idf=catalog.idf, settings=settings)
            state["turn_metrics"].append(m)
            state["turn_details"].append(d)
            turns += 1
        dialogue_evaluation(state, settings, catalog.idf, DIALOGUE_CONTRIBUTORS)
        coverage_metrics(transcript, hidden_targets({"transcript": transcript}))  # logged in the first user turn
    grounded = time.perf_counter() - started
    tas_cas_many(dialogues, topics=_Timed(topics, "topics_many", parts, "lda_s"),
                 embedder=_Timed(embedder, "encode", parts, "encode_s"))
    total = time.perf_counter() - started
    return {"turns": turns, "seconds": total, "grounded_s": grounded, "tas_cas_s": total - grounded,
            "cpu_s": time.process_time() - cpu_started, **parts}


class _Timed:
    """``obj`` with the time spent in its method ``name`` added to ``parts[key]`` (a breakdown for the
    printout; every other attribute is the object's own)."""

    def __init__(self, obj, name: str, parts: dict, key: str) -> None:
        self._obj, self._name, self._parts, self._key = obj, name, parts, key

    def __getattr__(self, attr):
        value = getattr(self._obj, attr)
        if attr != self._name:
            return value

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._parts[self._key] += time.perf_counter() - t0
        return timed


def synthetic_catalog(n: int, seed: int = 0):
    from convsim.catalog.movies.catalog import CANONICAL_GENRES, Movie, MovieCatalog
    rng = random.Random(seed)
    first = [f"{a}{b}" for a in ("Al", "Be", "Ca", "Da", "El", "Fi", "Go", "Ha", "Iv", "Jo", "Ka", "Le", "Mo", "Na")
             for b in ("ra", "ven", "lin", "dor", "mis", "tan", "rek", "sol")]
    last = [f"{a}{b}{c}" for a in ("Br", "Cr", "Dr", "Fr", "Gr", "Kl", "Pr", "St", "Tr", "Wr")
            for b in ("an", "el", "is", "or", "ut") for c in ("ford", "wick", "ton", "man", "berg", "ley", "son")]
    words = ["Silent", "Crimson", "River", "Night", "Empire", "Garden", "Shadow", "Winter", "Echo", "Harbor",
             "Glass", "Iron", "Paper", "Velvet", "Storm", "Lantern", "Orchard", "Signal", "Canyon", "Falcon"]
    person = lambda: f"{rng.choice(first)} {rng.choice(last)}"  # noqa: E731
    movies = []
    for i in range(n):
        title = f"{rng.choice(words)} {rng.choice(words)} {i}"
        movies.append(Movie(id=str(i), title=title, year=rng.randint(1930, 2024),
                            genres=tuple(rng.sample(CANONICAL_GENRES, 2)),
                            actors=tuple({person() for _ in range(4)}), directors=(person(),),
                            writers=(person(),), languages=("English",),
                            plot=f"A story about {rng.choice(words).lower()} and {rng.choice(words).lower()}."))
    return MovieCatalog(movies, source=f"<synthetic {n}>")


def extraction_throughput(catalog, utterances: list[str]) -> dict:
    from convsim.catalog.movies.concepts import ConceptExtractor
    t0 = time.perf_counter()
    extractor = ConceptExtractor(catalog)
    build = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    for text in utterances:
        extractor.extract(text)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"movies": len(catalog), "build_s": build, "utterances": len(utterances), "per_s": len(utterances) / secs,
            "per_cpu_s": len(utterances) / cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--seed-sessions", type=int, default=12, help="real sessions simulated, then replicated")
    ap.add_argument("--topics", default="lda", choices=["lda", "keyword"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes evaluating dialogues")
    ap.add_argument("--synthetic", type=int, default=100_000, help="movies in the synthetic catalog")
    args = ap.parse_args()

    seeds = seed_dialogues(args.seed_sessions, args.turns)
    n = args.models * args.sessions
    # Replicas get a unique out-of-vocabulary word per utterance, so that no cache or per-batch
    # de-duplication sees more repetition than real sessions of templated users would have.
    dialogues = [[dict(t, text=f"{t['text']} zq{_letters(i)}") for t in seeds[i % len(seeds)]] for i in range(n)]
    # Train the LDA once here and save it: the workers load it like a run's nodes do.
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.evaluation.crs.tas_cas_eval import topic_extractor
    model_dir = tempfile.mkdtemp(prefix="convsim-bench-lda-")
    topic_extractor(args.topics, load_movie_catalog(), model_dir)
    base_rss = peak_rss_mb()
    started = time.perf_counter()
    chunks = [dialogues[i::args.workers] for i in range(args.workers)]
    if args.workers == 1:
        parts = [evaluate_all(chunks[0], topic_mode=args.topics, run_dir=model_dir)]
    else:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(args.workers) as pool:
            parts = list(pool.map(functools.partial(evaluate_all, topic_mode=args.topics, run_dir=model_dir), chunks))
    wall = time.perf_counter() - started
    turns = sum(p["turns"] for p in parts)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"evaluate: {args.models} x {args.sessions} x {args.turns} = {turns:,} turns in {wall:.1f} s wall "
          f"({turns / wall:,.0f} turns/s, {args.workers} worker(s)), topics={args.topics}, embedder=tfidf "
          f"[per worker: grounded TAS + coverage {max(p['grounded_s'] for p in parts):.1f} s, "
          f"TAS/CAS {max(p['tas_cas_s'] for p in parts):.1f} s]; peak RSS {peak_rss_mb():,.0f} MB "
          f"(before evaluation {base_rss:,.0f} MB; largest worker process {children:,.0f} MB)")
    if args.models * args.sessions * args.turns == 120_000:
        print(f"  goal < 30 s for 120,000 turns: {wall:.1f} s ({wall / 30:.2f} of it); goal < 1 GB: largest "
              f"worker {children:,.0f} MB, this process {peak_rss_mb():,.0f} MB")
    cpu = max(p["cpu_s"] for p in parts)
    print(f"  CPU time of the busiest worker: {cpu:.1f} s (the wall time when each worker has a core to itself; "
          f"{turns / cpu:,.0f} turns/s); load average now {os.getloadavg()[0]:.1f}")
    busy = sum(p["seconds"] for p in parts)
    share = {key: sum(p[key] for p in parts) / busy for key in ("extract_s", "grounded_s", "lda_s", "encode_s", "tas_cas_s")}
    print(f"  where the workers' time goes: concept extraction (extract) {share['extract_s']:.0%}, other grounded "
          f"metrics {share['grounded_s'] - share['extract_s']:.0%}, LDA topics (word counts and the E-step) "
          f"{share['lda_s']:.0%}, TF-IDF encoding {share['encode_s']:.0%}, TAS/CAS logic "
          f"{share['tas_cas_s'] - share['lda_s'] - share['encode_s']:.0%}")

    utterances = [t["text"] for d in seeds for t in d][:2000]
    utterances = (utterances * (10_000 // max(1, len(utterances)) + 1))[:10_000]
    from convsim.catalog.movies.catalog import MovieCatalog
    rows = []
    if OPENDIALKG.exists():
        rows.append(("OpenDialKG", extraction_throughput(MovieCatalog.load(OPENDIALKG), utterances)))
    else:
        print(f"OpenDialKG catalog absent at {OPENDIALKG}: skipped")
    rows.append((f"synthetic {args.synthetic:,}", extraction_throughput(synthetic_catalog(args.synthetic), utterances)))
    for name, r in rows:
        print(f"extract [{name}: {r['movies']:,} movies]: {r['per_s']:,.0f} utterances/s "
              f"({r['per_cpu_s']:,.0f} per CPU second; index build {r['build_s']:.1f} s, {r['utterances']:,} utterances; "
              f"goal >= 20,000/s: {r['per_s'] / 20_000:.2f} of it)")
    if len(rows) == 2:
        (_, a), (_, b) = rows
        print(f"catalog size x{b['movies'] / a['movies']:.0f} -> extraction time x{a['per_s'] / b['per_s']:.2f}")
    print(f"peak RSS {peak_rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
