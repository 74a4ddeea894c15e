"""Memory a stateful agent adapter holds over a long run: a graph agent (convsim.slots GraphAgent)
whose state grows by ``--kb`` KB of scratch (retrieved documents, tool results) each turn, in
hello_chat's agent slot, over ``--sessions`` sessions (6 turns each), model ``none``. One fresh
subprocess per code tree (``--trees``: checkouts whose ``convsim`` is imported, e.g. main before
the change and this worktree), each printing after the run: the sessions the adapter still holds,
their state pickled (bytes), the resident set now (``VmRSS``, after ``gc.collect()``) and its
peak (``VmHWM``).

    python bench/agent_state_memory.py [--sessions 2000] [--kb 8] [--trees /work/main .]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AGENT = '''
import operator
from typing import Annotated
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
FACTS = {"capital of france": "Paris", "boiling point of water": "100 degrees Celsius",
         "author of hamlet": "William Shakespeare", "largest planet": "Jupiter",
         "speed of light": "299,792 kilometres per second", "chemical symbol for gold": "Au"}
KB = %d

class State(MessagesState):
    scratch: Annotated[list, operator.add]

def reply(state):
    question = state["messages"][-1].content.lower()
    topic = next((t for t in FACTS if t in question), None)
    doc = (question + " ") * (KB * 1024 // (len(question) + 1))  # what it looked up this turn
    return {"messages": [AIMessage(f"The {topic} is {FACTS[topic]}." if topic else "I do not know.")],
            "scratch": [doc]}

b = StateGraph(State)
b.add_node("reply", reply)
b.add_edge(START, "reply")
b.add_edge("reply", END)
graph = b.compile()
'''

CHILD = '''
import gc, json, pickle, sys
import convsim
from convsim.config import config_from_dict
from convsim.running.runner import run
n, out, agent = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cfg = config_from_dict({"graph": "hello_chat", "sessions": n, "out_dir": out, "run_id": "mem", "trace": False,
                        "concurrency": 8, "analysis": [], "params": {"n_turns": 6, "agents": {"agent": agent}}})
run(cfg, show_progress=False, analyze=False)
from convsim.slots import nodes
gc.collect()
held = [a for a in nodes._AGENTS.values() if hasattr(a, "sessions")]
items = [v for a in held for v in a.sessions.items.values()]
status = {}
for line in open(f"/proc/self/status"):
    k, _, v = line.partition(":")
    if k in ("VmRSS", "VmHWM"):
        status[k] = int(v.split()[0]) / 1024
ok = sum(1 for x in open(f"{out}/mem/results.jsonl") if '"status": "ok"' in x or '"status":"ok"' in x)
print(json.dumps({"convsim": convsim.__file__, "ok": ok, "held": len(items),
                  "held_mb": len(pickle.dumps(items)) / 2**20, "rss_mb": status["VmRSS"],
                  "peak_mb": status["VmHWM"]}))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--kb", type=int, default=8, help="KB the agent's state grows by each turn")
    ap.add_argument("--trees", nargs="+", default=[str(ROOT)])
    args = ap.parse_args()
    print(f"{args.sessions} hello_chat sessions x 6 turns, a graph agent keeping {args.kb} KB of scratch a turn")
    print(f"{'tree':<28} {'ok':>6} {'held':>6} {'held MB':>9} {'RSS MB':>8} {'peak MB':>8}")
    for tree in args.trees:
        with tempfile.TemporaryDirectory() as tmp:
            agent_file = Path(tmp) / "scratch_agent.py"
            agent_file.write_text(AGENT % args.kb)
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            done = subprocess.run([sys.executable, "-c", CHILD, str(args.sessions), str(Path(tmp) / "runs"),
                                   f"{agent_file}:graph"], env=env, capture_output=True, text=True, cwd=tmp)
            if done.returncode != 0:
                sys.exit(f"{tree}: the run failed:\n{done.stderr[-3000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{str(Path(r['convsim']).parent.parent)[-28:]:<28} {r['ok']:>6} {r['held']:>6} "
                  f"{r['held_mb']:>9.1f} {r['rss_mb']:>8.1f} {r['peak_mb']:>8.1f}")


if __name__ == "__main__":
    main()
