"""How far a run goes past its token budget with many calls in flight.

150 hello_chat sessions of 3 turns, 16 in flight, against an in-process model
(tests/doubles.SlowBackend: 20 ms a call, ~4 prompt characters a token, answers of 1..30 tokens,
the agent's ``max_tokens: 30``), under ``max_tokens`` budgets of 2,000, 5,000 and 10,000. Prints what
each attempt spent (prompt + completion tokens of every recorded call) against its budget.

Usage:
    python bench/token_budget.py [--budgets 2000 5000 10000] [--concurrency 16]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import convsim  # noqa: E402
from convsim.providers import models  # noqa: E402
from convsim.providers.limits import BudgetReached  # noqa: E402
from convsim.running.store import RunStore  # noqa: E402
from convsim.providers.usage import call_tokens  # noqa: E402
from doubles import SlowBackend  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[2000, 5000, 10000])
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    backend = SlowBackend(max_tokens=30)
    models._backend = lambda spec, timeout=120.0: backend
    for budget in args.budgets:
        out = tempfile.mkdtemp()
        cfg = {"name": "budget", "graph": "hello_chat", "sessions": 150, "seed": 3, "analysis": [], "out_dir": out,
               "params": {"n_turns": 3}, "concurrency": args.concurrency,
               "models": {"agent": {"spec": "openai:fake@http://127.0.0.1:9/v1", "max_tokens": 30}},
               "limits": {"max_tokens": budget}}
        try:
            convsim.run(cfg, run_id="r", analyze=False)
        except BudgetReached:
            pass
        records = RunStore(Path(out) / "r").records()
        spent = sum(call_tokens(c) for r in records for c in r["llm_calls"])
        calls = sum(len(r["llm_calls"]) for r in records)
        print(f"max_tokens={budget}: spent {spent} ({spent - budget:+d}) in {calls} calls, "
              f"{sum(r['status'] == 'ok' for r in records)} sessions ok")
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
