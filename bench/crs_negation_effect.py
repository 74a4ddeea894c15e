"""How much retracted values moved the grounded metrics of a crs_shift run.

    python bench/crs_negation_effect.py runs/<id>

Re-scores every turn of every session with E(U) keeping the values the user turn retracts
(``user_negation: keep``, the original extractor) and without them (``drop``, the default;
evaluation/crs/negation.py), on the run's own transcripts and catalog, and prints per variant:
user turns whose E(U) held a retracted value, and the mean CC and grounded TAS under each setting.
docs/crs_shift.md "Deviations and decisions" quotes its output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    args = ap.parse_args(argv)

    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.evaluation.crs.negation import affirmed_concepts
    from convsim.evaluation.crs.nodes import scored_transcript, turn_evaluation
    from graphs.crs_shift import Params, catalog_location

    run = Path(args.run_dir)
    records = [json.loads(line) for line in (run / "results.jsonl").open()]
    records = [r for r in records if r.get("status") in (None, "ok")]
    if not records:
        print(f"{run / 'results.jsonl'}: no scored session", file=sys.stderr)
        return 2
    params = records[0].get("params") or {}
    catalog = load_movie_catalog(catalog_location(params.get("catalog_path")))
    extractor = ConceptExtractor(catalog)
    base = Params(**{k: v for k, v in params.items() if k in Params.model_fields}).tas_settings()
    rows: dict[str, dict] = defaultdict(lambda: {"turns": 0, "retracted": 0, "values": 0,
                                                 "keep": defaultdict(list), "drop": defaultdict(list)})
    for r in records:
        row = rows[r["variant"]]
        transcript = scored_transcript(r["transcript"])
        earlier: set = set()
        users = [e for e in transcript if e["speaker"] == "user"]
        systems = {e["turn"]: e for e in transcript if e["speaker"] == "system"}
        per = {"keep": [], "drop": []}
        for u in users:
            s = systems.get(u["turn"])
            if s is None:
                continue
            found = sorted([f, str(v)] for f, v in extractor.extract(u["text"]))
            kept = affirmed_concepts(u["text"], found)
            row["turns"] += 1
            row["retracted"] += len(kept) < len(found)
            row["values"] += len(found) - len(kept)
            for mode in ("keep", "drop"):
                m, _ = turn_evaluation(u, s, extractor=extractor, idf=catalog.idf,
                                       settings=replace(base, user_negation=mode), user_concepts=found,
                                       earlier_named=earlier)
                per[mode].append(m)
            earlier |= set((s.get("meta") or {}).get("mentioned_ids") or [])
        for mode, ms in per.items():
            for key in ("cc", "tas"):
                vals = [m[key] for m in ms if m[key] is not None]
                if vals:
                    row[mode][key].append(statistics.mean(vals))
    print(f"run {run.name}: {len(records)} sessions")
    print(f"{'variant':22} {'user turns':>10} {'w/ retracted':>12} {'cc keep':>8} {'cc drop':>8} "
          f"{'tas keep':>9} {'tas drop':>9}")
    for variant, row in rows.items():
        mean = lambda xs: f"{statistics.mean(xs):.3f}" if xs else "—"  # noqa: E731
        print(f"{variant:22} {row['turns']:>10} {row['retracted']:>12} {mean(row['keep']['cc']):>8} "
              f"{mean(row['drop']['cc']):>8} {mean(row['keep']['tas']):>9} {mean(row['drop']['tas']):>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
