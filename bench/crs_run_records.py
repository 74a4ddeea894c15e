"""What the CRS re-scoring benches read from a run: its scored sessions and its movie catalog.

``python bench/crs_paper_delays.py`` and ``python bench/crs_negation_effect.py`` re-score a crs_shift
run's transcripts; both start from :func:`scored_run`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def scored_run(run_dir: str | Path):
    """``(records, params, catalog)`` of the run's scored sessions (status ok), or exit 2 with one
    line when it has none."""
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.graphs.crs_shift import catalog_location

    run = Path(run_dir)
    if not (run / "results.jsonl").is_file():
        print(f"{run}: no results.jsonl (not a run directory)", file=sys.stderr)
        raise SystemExit(2)
    records = [json.loads(line) for line in (run / "results.jsonl").open()]
    records = [r for r in records if r.get("status") in (None, "ok")]
    if not records:
        print(f"{run / 'results.jsonl'}: no scored session", file=sys.stderr)
        raise SystemExit(2)
    params = records[0].get("params") or {}
    return records, params, load_movie_catalog(catalog_location(params.get("catalog_path")))
