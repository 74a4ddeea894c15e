"""crs_shift against a model server with faults (tests/fault_server.py): how sessions end, and
whether any ``ok`` session holds a turn that fails the answer check or is one of the server's
nonsense answers.

Prints figures, never passes or fails:

    PYTHONPATH=$PWD python bench/answer_check_faults.py                  # 30 sessions, 20% faults
    PYTHONPATH=$PWD python bench/answer_check_faults.py --sessions 10 --faults 500=0.06,garbage=0.04,junk=0.10

The recommender, the user and the judge all talk to the one server; its ``ok`` answers are valid
for each role (a JSON verdict, the paraphrase's own message, a reply naming a film).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--faults", default="500=0.05,garbage=0.03,junk=0.06,nonsense=0.06")
    args = ap.parse_args()
    faults = {k: float(v) for k, v in (x.split("=") for x in args.faults.split(","))}

    from convsim.agents.language import node_vocabulary
    from convsim.config import config_from_dict
    from convsim.providers.answer_check import answer_defect
    from convsim.running.runner import run
    from convsim.running.store import read_jsonl
    from fault_server import GARBAGE, NONSENSE, serve
    from test_answer_check import _crs_answer

    with serve(seed=args.seed, faults=faults, answer=_crs_answer) as server, \
            tempfile.TemporaryDirectory() as tmp:
        spec = f"openai:fake@{server.url}"
        cfg = config_from_dict({"graph": "crs_shift", "sessions": args.sessions, "seed": 3, "out_dir": tmp,
                                "run_id": "faults", "trace": False, "analysis": [],
                                "params": {"n_turns": args.turns, "topic_mode": "keyword"},
                                "models": {"crs": spec, "user": spec, "judge": spec},
                                "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30, "answer_attempts": 2}})
        records = read_jsonl(run(cfg, analyze=False) / "results.jsonl")
    vocab = node_vocabulary()
    nonsense = {GARBAGE, *NONSENSE}
    ok = [r for r in records if r["status"] == "ok"]
    with_nonsense = [r for r in ok if any(e["text"] in nonsense for e in r["transcript"])]
    failing = [r for r in ok if any(answer_defect(e["text"], language="en", vocabulary=vocab) is not None
                                    for e in r["transcript"])]
    served = Counter({k: v for k, v in server.served.items() if k != "ping"})
    print(f"faults {faults} (total {sum(faults.values()):.0%}), seed {args.seed}, {args.sessions} sessions x "
          f"{args.turns} turns")
    print(f"answers served: {dict(served)}")
    print(f"statuses: {dict(Counter(r['status'] for r in records))}")
    print(f"ok sessions holding a garbage/nonsense answer as a turn: {len(with_nonsense)} of {len(ok)}")
    print(f"ok sessions with a turn failing the answer check (form + English): {len(failing)} of {len(ok)}")


if __name__ == "__main__":
    main()
