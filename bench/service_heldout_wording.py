"""How held out is the held-out wording? Prints figures, never passes or fails:

    python bench/service_heldout_wording.py                 # the project's pool
    python bench/service_heldout_wording.py --pool OLD.json # another pool (e.g. from git show)

* the word 2-grams the held-out pool shares with the simulator's templates, and the forms saying
  them (``convsim.agents.service.wording``: values are one token ``<v>``, ``{slots}`` a gap);
* the slot-bearing held-out forms, each filled with one value and run through the rule triage in
  its domain: read correctly or not, and the 2-grams the triage's expressions matched in it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from convsim.catalog.service.db import load_service_db
from convsim.agents.service import wording


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", help="a held-out pool JSON (default: the project's)")
    ap.add_argument("--verbose", action="store_true", help="list every slot-bearing form")
    args = ap.parse_args()
    pool = json.loads(Path(args.pool).read_text(encoding="utf-8")) if args.pool else None
    db = load_service_db()
    forms = wording.heldout_forms(pool)
    shared = wording.shared_with_templates(db, pool)
    sharing = sorted({f for fs in shared.values() for f in fs})
    print(f"held-out forms: {len(forms)}; 2-grams shared with the templates: {len(shared)}, "
          f"said by {len(sharing)} forms")
    for g, fs in sorted(shared.items()):
        print(f"  {' '.join(g)!r}: {fs[0]}" + (f" (+{len(fs) - 1})" if len(fs) > 1 else ""))
    reads = wording.triage_reads(db, pool)
    matched = [r for r in reads if r["matched"]]
    print(f"slot-bearing forms: {len(reads)}; read correctly by the rule triage: {sum(r['read'] for r in reads)}; "
          f"forms where the triage matched a 2-gram: {len(matched)}")
    for r in reads:
        if args.verbose or r["matched"]:
            print(f"  {'read' if r['read'] else 'miss'} {r['key']:28s} {r['text']!r} -> {r['got']!r} "
                  f"matched {[' '.join(g) for g in r['matched']]}")


if __name__ == "__main__":
    main()
