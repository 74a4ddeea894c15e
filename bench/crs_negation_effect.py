"""How much retracted values moved the grounded metrics of a crs_shift run.

    python bench/crs_negation_effect.py runs/<id>

Re-scores every turn of every session with E(U) keeping the values the user turn retracts
(``user_negation: keep``, the original extractor) and without them (``drop``, the default;
evaluation/crs/negation.py), on the run's own transcripts and catalog, and prints per variant:
user turns whose E(U) held a retracted value, and the mean CC and grounded TAS under each setting.

A second table covers the attributes of a film the user turns down ("that one is a comedy film and
I asked for drama"; ``negation.rejected``, part of ``drop``): user turns whose E(U) held such a
value; how many of them are turns where the simulator rejected a film (``meta.reaction.kind ==
"reject"``) and, of those, whether the value dropped is the film's own attribute the simulator named
(``meta.reaction.misfit``); reject turns where that attribute was extracted but kept (misses; the
reasons about a wanted actor or writer, "Tom Hanks isn't in it", name no film attribute and are not
counted); values dropped in turns that rejected nothing (false drops, goal 0);
and the mean CC under ``drop`` without the rejection rule (retractions only: ``rejected`` patched to
False, the behaviour before it) and with it. docs/crs_shift.md "Deviations and decisions" quotes
both tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    args = ap.parse_args(argv)
    from crs_run_records import scored_run  # bench/ is on the path of a bench script

    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.evaluation.crs.negation import affirmed_concepts, rejected
    from convsim.evaluation.crs.nodes import scored_transcript, turn_evaluation
    from convsim.graphs.crs_shift import Params

    records, params, catalog = scored_run(args.run_dir)
    run = Path(args.run_dir)
    extractor = ConceptExtractor(catalog)
    base = Params(**{k: v for k, v in params.items() if k in Params.model_fields}).tas_settings()
    rows: dict[str, dict] = defaultdict(lambda: {"turns": 0, "retracted": 0, "values": 0,
                                                 "keep": defaultdict(list), "drop": defaultdict(list),
                                                 "retract_only": defaultdict(list), "rej_turns": 0,
                                                 "rej_in_reject": 0, "rej_is_misfit": 0, "false_drops": 0, "misses": 0,
                                                 "reject_turns": 0})
    for r in records:
        row = rows[r["variant"]]
        transcript = scored_transcript(r["transcript"])
        earlier: set = set()
        users = [e for e in transcript if e["speaker"] == "user"]
        systems = {e["turn"]: e for e in transcript if e["speaker"] == "system"}
        per = {"keep": [], "drop": [], "retract_only": []}
        for u in users:
            s = systems.get(u["turn"])
            if s is None:
                continue
            found = sorted([f, str(v)] for f, v in extractor.extract(u["text"]))
            kept = affirmed_concepts(u["text"], found)
            row["turns"] += 1
            row["retracted"] += len(kept) < len(found)
            row["values"] += len(found) - len(kept)
            dropped = [(f, v) for f, v in kept if rejected(u["text"], v)]
            reaction = (u.get("meta") or {}).get("reaction") or {}
            is_reject = reaction.get("kind") == "reject"
            row["reject_turns"] += is_reject
            if is_reject:  # the film's own value the simulator named as the reason, found but kept
                field, _, have = reaction.get("misfit") or [None, None, []]
                row["misses"] += any(f == field and v in {str(h) for h in have or ()} and (f, v) not in dropped
                                     and field not in ("actor", "writer") for f, v in kept)
            if dropped:
                row["rej_turns"] += 1
                row["rej_in_reject"] += is_reject
                misfit = reaction.get("misfit") or [None, None, []]
                own = {(misfit[0], str(v)) for v in misfit[2] or ()}
                row["rej_is_misfit"] += is_reject and all((f, v) in own for f, v in dropped)
                row["false_drops"] += 0 if is_reject else len(dropped)
            for mode in ("keep", "drop", "retract_only"):
                negation = "drop" if mode == "retract_only" else mode
                with mock.patch("convsim.evaluation.crs.nodes.rejected", return_value=False) \
                        if mode == "retract_only" else _nothing():
                    m, _ = turn_evaluation(u, s, extractor=extractor, idf=catalog.idf,
                                           settings=replace(base, user_negation=negation), user_concepts=found,
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
    print()
    print("rejected attributes (the reason a user turns a film down; part of drop):")
    print(f"{'variant':22} {'reject turns':>12} {'w/ rejected':>11} {'of which reject':>15} "
          f"{'= film attr':>11} {'misses':>6} {'false drops':>11} {'cc retract-only':>15} {'cc drop':>8} {'tas r-only':>10} "
          f"{'tas drop':>9}")
    for variant, row in rows.items():
        mean = lambda xs: f"{statistics.mean(xs):.3f}" if xs else "—"  # noqa: E731
        print(f"{variant:22} {row['reject_turns']:>12} {row['rej_turns']:>11} {row['rej_in_reject']:>15} "
              f"{row['rej_is_misfit']:>11} {row['misses']:>6} {row['false_drops']:>11} {mean(row['retract_only']['cc']):>15} "
              f"{mean(row['drop']['cc']):>8} {mean(row['retract_only']['tas']):>10} {mean(row['drop']['tas']):>9}")
    return 0


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    raise SystemExit(main())
