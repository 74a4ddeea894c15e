"""The recorder's fast paths (append-only reducers, values encoded once) record what the generic diff does."""
import json
import operator
import pickle
import re
from typing import Annotated, TypedDict

from langgraph.types import Overwrite

from doubles import fan_graph
from convsim import read_trace, state_at
from convsim.traces.tracing import TraceRecorder, append_channels


class S(TypedDict, total=False):
    turn: int
    log: Annotated[list[str], operator.add]
    transcript: Annotated[list[dict], operator.add]
    belief: dict
    tags: list


def _graph(mutate: bool = False):
    """Appends from two parallel nodes, an empty append, an Overwrite, a plain list key that grows;
    ``mutate``: a node also changes an earlier step's value in place (never returned)."""
    def user(s):
        t = s.get("turn", 0) + 1
        return {"turn": t, "transcript": [{"turn": t, "text": f"hi {t}"}], "tags": (s.get("tags") or []) + [t],
                "log": []}

    def left(s):
        return {"log": ["left"], "belief": {"area": f"north{s['turn']}"}}

    def right(s):
        return {"log": [] if s["turn"] == 1 else ["right", "again"]}

    def join(s):
        if mutate:
            s["belief"]["area"] = "mutated"  # in place: the trace keeps what ``left`` wrote
        return {"log": Overwrite(["reset"]) if s["turn"] == 2 else ["join"]}

    return fan_graph(S, user, left, right, join, last_turn=3)


def _record(graph, tmp_path, name, append_keys):
    init = {"turn": 0, "log": [], "transcript": [], "belief": {}, "tags": []}
    rec = TraceRecorder(init, append_keys=append_keys)
    cfg = {"configurable": {"thread_id": name}}
    for mode, chunk in graph.stream(init, cfg, stream_mode=["values", "updates"]):
        rec.on_values(chunk) if mode == "values" else rec.on_updates(chunk)
    text = rec.close().write(tmp_path / f"{name}.jsonl").read_text()
    return read_trace(tmp_path / f"{name}.jsonl"), text, list(graph.get_state_history(cfg))


def _without_wall(text):
    return re.sub(r'"wall_s": [0-9.e-]+', '"wall_s": 0', text)


def test_append_fast_path_matches_generic_diff_and_history(tmp_path):
    graph = _graph()
    assert append_channels(graph.channels) == {"log", "transcript"}
    fast, fast_text, history = _record(graph, tmp_path, "fast", append_channels(graph.channels))
    slow, slow_text, _ = _record(graph, tmp_path, "slow", frozenset())
    by_step = {h.metadata["step"]: json.loads(json.dumps(h.values)) for h in history
               if h.metadata.get("source") == "loop"}
    for s in fast["steps"]:
        last = max(x["step"] for x in fast["steps"] if x["superstep"] == s["superstep"])
        assert state_at(fast["initial"], fast["steps"], last) == by_step[s["superstep"] + 1], s["step"]
    steps = {(s["superstep"], s["node"]): s["changed"] for s in fast["steps"]}
    # parallel appends of one superstep: each writer records its own items, at their place
    assert steps[(4, "left")]["log"] == {"appended": ["left"], "before_len": 2, "after_len": 3}
    assert steps[(4, "right")]["log"] == {"appended": ["right", "again"], "before_len": 3, "after_len": 5}
    # the generic diff, not told the key is an append, records the superstep's combined change on each
    slow_steps = {(s["superstep"], s["node"]): s["changed"] for s in slow["steps"]}
    assert slow_steps[(4, "left")]["log"] == slow_steps[(4, "right")]["log"] == {
        "appended": ["left", "right", "again"], "before_len": 2, "after_len": 5}
    assert steps[(0, "user")]["log"] == {"appended": [], "before_len": 0, "after_len": 0}
    # an Overwrite is not an append: the whole before and after, in both recorders ...
    assert steps[(5, "join")]["log"] == {"before": ["left", "join", "left", "right", "again"], "after": ["reset"]}
    # ... and the appends after it are compact again
    assert steps[(6, "user")]["log"] == {"appended": [], "before_len": 1, "after_len": 1}
    assert steps[(8, "join")]["log"] == {"appended": ["join"], "before_len": 4, "after_len": 5}
    # a plain (last-value) list that grew at its end is still compact
    assert steps[(6, "user")]["tags"] == {"appended": [3], "before_len": 2, "after_len": 3}
    # the generic diff records the same, except that it writes an empty append as before/after
    assert [s["changed"].keys() for s in slow["steps"]] == [s["changed"].keys() for s in fast["steps"]]
    assert [s["changed"]["log"] for s in slow["steps"] if s["node"] == "user"] == [
        {"before": [], "after": []}, {"before": ["left", "join"], "after": ["left", "join"]},
        {"before": ["reset"], "after": ["reset"]}]
    for fast_step in fast["steps"]:
        if fast_step["node"] != "user":
            changed = dict(slow_steps[fast_step["superstep"], fast_step["node"]])
            if fast_step["node"] in ("left", "right"):  # parallel writers: own part vs combined (above)
                changed["log"] = fast_step["changed"]["log"]
            assert fast_step["changed"] == changed, fast_step["step"]
    assert _without_wall(fast_text).count("\n") == _without_wall(slow_text).count("\n")


def test_closed_recorder_carries_only_its_text(tmp_path):
    graph = _graph()
    init = {"turn": 0, "log": [], "transcript": [], "belief": {}, "tags": []}
    rec = TraceRecorder(init, append_keys=append_channels(graph.channels))
    for mode, chunk in graph.stream(init, {"configurable": {"thread_id": "p"}}, stream_mode=["values", "updates"]):
        rec.on_values(chunk) if mode == "values" else rec.on_updates(chunk)
    open_text = rec.render()
    rec.close()
    clone = pickle.loads(pickle.dumps(rec))
    assert clone.render() == open_text
    assert clone.write(tmp_path / "t.jsonl.gz") and read_trace(tmp_path / "t.jsonl.gz")["steps"] == rec.steps


def test_a_later_in_place_mutation_does_not_rewrite_a_recorded_step(tmp_path):
    trace, _, _ = _record(_graph(mutate=True), tmp_path, "m", frozenset({"log", "transcript"}))
    left = [s for s in trace["steps"] if s["node"] == "left"]
    assert [s["changed"]["belief"]["after"] for s in left] == [{"area": f"north{t}"} for t in (1, 2, 3)]
