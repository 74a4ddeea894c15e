"""What the state-transition trace itself costs, isolated from LangGraph and from machine load.

Each session of a graph is streamed once (``values`` + ``updates`` + ``custom``, as the runner does)
and its chunks are kept; the recorder is then fed the same chunks again and again and timed:

- ``recorder``: convsim's TraceRecorder (copies only the keys a superstep wrote, and only the new
  items of a grown list);
- ``full snapshot``: the previous design, a JSON round trip of the whole state every superstep
  (what the diff needs when nothing is known about which keys changed);
- ``session``: the session's own time in LangGraph with trace off (``values`` + ``custom``).

Prints milliseconds per session and the recorder's cost as a share of the session. Usage:
    python bench/trace_recorder.py [--graph crs_shift] [--sessions 5] [--repeat 5] [--set n_turns=20]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from timing import median_time  # noqa: E402
from convsim import load_graph_module, session_seed  # noqa: E402
from convsim.config import parse_assignment  # noqa: E402
from convsim.running.store import json_default  # noqa: E402
from convsim.traces.tracing import TraceRecorder  # noqa: E402


def full_snapshot_cost(chunks) -> None:
    """The old recorder's dominant work: a deep copy of the whole state per superstep."""
    for mode, chunk in chunks:
        if mode == "values":
            json.loads(json.dumps(chunk, default=json_default))


def feed(init, chunks) -> TraceRecorder:
    rec = TraceRecorder(init, [])
    for mode, chunk in chunks:
        if mode == "values":
            rec.on_values(chunk)
        elif mode == "updates":
            rec.on_updates(chunk)
        else:
            rec.on_custom(chunk)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="crs_shift")
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--set", dest="set_", action="append", default=[], help="param=value")
    args = ap.parse_args()
    mod = load_graph_module(args.graph)
    params = mod.Params(**dict(parse_assignment(s, what="--set") for s in args.set_))
    compiled = mod.build(params).compile()
    inits = list(mod.sessions(params, mod.Context(params=params)))[:args.sessions]
    rows = []
    for init in inits:
        sid = init["session_id"]
        init = {"transcript": [], "turn_metrics": [], "dialogue_metrics": {}, **init}

        def ctx():
            return mod.Context(params=params, seed=session_seed(0, sid, 0), session_id=sid)
        chunks = list(compiled.stream(dict(init), context=ctx(), stream_mode=["values", "updates", "custom"]))
        session_s = median_time(lambda: list(compiled.stream(dict(init), context=ctx(),
                                                             stream_mode=["values", "custom"])), args.repeat)
        rec_s = median_time(lambda: feed(init, chunks), args.repeat)
        full_s = median_time(lambda: full_snapshot_cost(chunks), args.repeat)
        n_steps = len(feed(init, chunks).steps)
        rows.append((sid, n_steps, session_s, rec_s, full_s))
    print(f"{args.graph}: {len(rows)} sessions, median of {args.repeat} (ms per session)")
    print(f"{'session':<14}{'steps':>6}{'session':>10}{'recorder':>10}{'full snap':>10}{'rec/sess':>9}")
    for sid, n, s, r, f in rows:
        print(f"{sid:<14}{n:>6}{1000 * s:>10.1f}{1000 * r:>10.2f}{1000 * f:>10.2f}{r / s:>9.1%}")
    tot = [sum(x[i] for x in rows) for i in (2, 3, 4)]
    print(f"total: recorder = {tot[1] / tot[0]:.1%} of the untraced session time; "
          f"a full-state snapshot per superstep alone = {tot[2] / tot[0]:.1%} "
          f"({tot[2] / tot[1]:.1f}x the recorder)")


if __name__ == "__main__":
    main()
