"""Traces: compact diffs, replay, and every node step checked against the checkpointer's history."""
import json
import operator
from typing import Annotated, TypedDict

import pytest

from doubles import fan_graph
from convsim import ConvsimError, ExperimentConfig, load_graph_module, read_trace, run, state_at
from convsim.traces.tracing import (TraceRecorder, apply_change, compact_change, cut_trace, dict_diff,
                             explain_turn_metrics)


def test_compact_change_appended_and_replaced():
    assert compact_change([1, 2], [1, 2, 3]) == {"appended": [3], "before_len": 2, "after_len": 3}
    assert compact_change([], [{"a": 1}]) == {"appended": [{"a": 1}], "before_len": 0, "after_len": 1}
    assert compact_change([1, 2], [2]) == {"before": [1, 2], "after": [2]}
    assert compact_change({"x": 1}, {"x": 2}) == {"before": {"x": 1}, "after": {"x": 2}}
    assert apply_change([1, 2], {"appended": [3], "before_len": 2, "after_len": 3}) == [1, 2, 3]
    assert apply_change("old", {"before": "old", "after": "new"}) == "new"


def test_dict_diff_lists_changed_leaves_only():
    before = {"hotel": {"area": "north", "stars": 4}, "train": {"day": "mon"}}
    after = {"hotel": {"area": "south", "stars": 4}, "train": {"day": "mon"}, "taxi": {"to": "x"}}
    assert dict_diff(before, after) == [("hotel.area", "north", "south"), ("taxi", None, {"to": "x"})]
    assert dict_diff({"a": [1]}, {"a": [1]}) == []


class FanState(TypedDict, total=False):
    session_id: str
    turn: int
    log: Annotated[list[str], operator.add]
    belief: dict
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict


def _fan_graph():
    """user -> (left, right in parallel) -> join; loops for 2 turns. Parallel steps share a superstep."""
    def user(s):
        t = s.get("turn", 0) + 1
        return {"turn": t, "transcript": [{"turn": t, "speaker": "user", "text": f"hi {t}", "meta": {}}]}

    def left(s):
        return {"log": ["left"], "belief": {**s.get("belief", {}), "area": f"north{s['turn']}"}}

    def right(s):
        return {"log": ["right"]}

    def join(s):
        return {"turn_metrics": [{"turn": s["turn"], "n_log": len(s["log"])}]}

    return fan_graph(FanState, user, left, right, join, last_turn=2)


def _check_against_history(trace, history):
    """Every step's before/after against the checkpoint before and after its superstep."""
    loop = {h.metadata["step"]: json.loads(json.dumps(h.values)) for h in history
            if h.metadata.get("source") == "loop"}
    supersteps = sorted({s["superstep"] for s in trace["steps"]})
    assert supersteps == list(range(len(loop) - 1)), "one checkpoint per superstep, plus the first"
    for s in trace["steps"]:
        before, after = loop[s["superstep"]], loop[s["superstep"] + 1]
        assert s["changed"], f"step {s['step']} ({s['node']}) recorded no change"
        for key, ch in s["changed"].items():
            if "appended" in ch:
                assert len(before.get(key, [])) == ch["before_len"]
                assert after[key][ch["before_len"]:] == ch["appended"]
                assert len(after[key]) == ch["after_len"]
            else:
                assert before.get(key) == ch["before"], (s["step"], key)
                assert after.get(key) == ch["after"], (s["step"], key)
        last = max(x["step"] for x in trace["steps"] if x["superstep"] == s["superstep"])
        assert state_at(trace["initial"], trace["steps"], last) == after


def test_parallel_steps_match_in_memory_history(tmp_path):
    graph = _fan_graph()
    cfg = {"configurable": {"thread_id": "t"}}
    init = {"session_id": "s", "turn": 0, "log": [], "belief": {}, "transcript": [], "turn_metrics": [],
            "dialogue_metrics": {}}
    rec = TraceRecorder(init)
    for mode, chunk in graph.stream(init, cfg, stream_mode=["values", "updates"]):
        rec.on_values(chunk) if mode == "values" else rec.on_updates(chunk)
    path = rec.write(tmp_path / "t.jsonl.gz")
    trace = read_trace(path)
    nodes = [s["node"] for s in trace["steps"]]
    assert nodes.count("user") == 2 and nodes.count("join") == 2
    left = [s for s in trace["steps"] if s["node"] == "left"]
    right = [s for s in trace["steps"] if s["node"] == "right"]
    assert left[0]["superstep"] == right[0]["superstep"]
    assert left[1]["changed"]["belief"] == {"before": {"area": "north1"}, "after": {"area": "north2"}}
    assert [s["turn"] for s in trace["steps"]] == [1, 1, 1, 1, 2, 2, 2, 2]
    _check_against_history(trace, list(graph.get_state_history(cfg)))


def _run_graph(tmp_path, graph, **params):
    cfg = ExperimentConfig(name=graph, graph=graph, sessions=1, checkpoint=True, concurrency=2,
                           out_dir=str(tmp_path), run_id=f"r_{graph}", analysis=[], params=params)
    return run(cfg, analyze=False)


def _history(run_dir, graph, thread):
    from langgraph.checkpoint.sqlite import SqliteSaver
    module = load_graph_module(graph)
    with SqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver:
        compiled = module.build(module.Params()).compile(checkpointer=saver)
        return list(compiled.get_state_history({"configurable": {"thread_id": thread}}))


@pytest.mark.parametrize("graph,params", [
    ("hello_chat", {}),
    pytest.param("customer_service", {}, marks=pytest.mark.slow),
    pytest.param("crs_shift", {"n_turns": 6, "first_shift_turn": 3}, marks=pytest.mark.slow),
])
def test_session_trace_matches_sqlite_history(tmp_path, graph, params):
    try:
        load_graph_module(graph)
    except ConvsimError as exc:
        pytest.skip(f"graph {graph} not available: {exc}")
    run_dir = _run_graph(tmp_path, graph, **params)
    rec = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert rec["status"] == "ok", rec["error"]
    trace = read_trace(run_dir / "traces" / "default" / f"{rec['session_id']}.jsonl")
    _check_against_history(trace, _history(run_dir, graph, f"default/{rec['session_id']}/t0"))
    final = state_at(trace["initial"], trace["steps"], trace["steps"][-1]["step"])
    assert final["transcript"] == rec["transcript"]
    assert final["turn_metrics"] == rec["turn_metrics"]
    # the custom-stream metric events are kept, tied to the step that emitted them
    turn_events = [e for e in trace["events"] if e["event"].get("kind") == "turn"]
    assert len(turn_events) == len(rec["turn_metrics"])
    for e in turn_events:
        assert trace["steps"][e["step"]]["turn"] == e["event"]["turn"]


def test_cut_trace_keeps_the_prefix():
    trace = {"initial": {"a": 1}, "steps": [{"step": i, "superstep": i, "changed": {}} for i in range(4)],
             "events": [{"step": 1, "event": {}}, {"step": 3, "event": {}}]}
    cut = cut_trace(trace, 2)
    assert [s["step"] for s in cut["steps"]] == [0, 1] and len(cut["events"]) == 1


def _metric_trace():
    step = lambda i, turn, node, changed: {"step": i, "superstep": i, "turn": turn, "node": node,
                                           "changed": changed, "wall_s": 0, "llm_calls": []}
    return {"initial": {}, "events": [], "steps": [
        step(0, 1, "user", {"turn": {"before": 0, "after": 1}}),
        step(1, 1, "crs", {"constraints": {"before": {}, "after": {"genre": "drama"}}}),
        step(2, 1, "evaluate_turn", {"turn_metrics": {"appended": [{"turn": 1}], "before_len": 0, "after_len": 1}}),
        step(3, 2, "user", {"turn": {"before": 1, "after": 2}, "shift": {"before": None, "after": "genre"}}),
        step(4, 2, "crs", {"transcript": {"appended": [{}], "before_len": 3, "after_len": 4}}),
        step(5, 2, "evaluate_turn", {"turn_metrics": {"appended": [{"turn": 2}], "before_len": 1, "after_len": 2}}),
    ]}


def test_explain_turn_metrics_links_low_metric_to_its_turn_steps():
    trace = _metric_trace()
    metrics = [{"turn": 1, "cc": 0.9, "len": 3}, {"turn": 2, "cc": 0.2, "len": 50}]
    out = explain_turn_metrics(trace, metrics, {"cc": 0.5, "len": {"above": 40}},
                               metric_inputs={"cc": ["constraints", "shift"]})
    assert [(e["turn"], e["metric"]) for e in out] == [(2, "cc"), (2, "len")]
    cc = out[0]
    assert cc["direction"] == "below" and cc["threshold"] == 0.5 and cc["value"] == 0.2
    # turn 2 changed 'shift' (step 3) but not 'constraints': that one is carried from step 1
    assert [(s["step"], s["keys"]) for s in cc["steps"]] == [(3, ["shift"])]
    assert cc["carried"] == [{"step": 1, "node": "crs", "turn": 1, "key": "constraints",
                              "change": {"before": {}, "after": {"genre": "drama"}}}]
    # without declared inputs every step of the turn is listed
    assert [s["step"] for s in out[1]["steps"]] == [3, 4, 5] and out[1]["direction"] == "above"


def test_explain_ignores_missing_and_non_numeric_metrics():
    out = explain_turn_metrics(_metric_trace(), [{"turn": 1, "cc": None, "ok": True}], {"cc": 0.5, "ok": 1})
    assert out == []


def test_read_trace_names_file_and_line_of_a_bad_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"type": "initial", "state": {}}\nnot json\n')
    with pytest.raises(ConvsimError) as exc:
        read_trace(p)
    assert "line 2" in str(exc.value) and "bad.jsonl" in str(exc.value)


@pytest.mark.parametrize("name,content,words", [
    ("list.jsonl", b'{"type": "initial", "state": {}}\n[1, 2]\n', "not a JSON object"),
    ("latin.jsonl", b'{"type": "initial", "state": {"x": "caf\xe9"}}\n', "not UTF-8"),
    ("init.jsonl", b'{"type": "initial", "state": "oops"}\n', "initial state is not a JSON object"),
    ("step.jsonl", b'{"type": "initial", "state": {}}\n{"type": "step", "step": "1", "changed": {}}\n',
     "step is not an integer"),
    ("deep.jsonl", b'{"type": "initial", "state": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
     "not a JSON object"),
    ("bad.jsonl.gz", b"not gzip at all", "not a readable gzip trace"),
    ("dir.jsonl", None, "is a directory"),
])
def test_a_damaged_trace_file_is_one_line_naming_it(tmp_path, name, content, words):
    # before: TypeError, UnicodeDecodeError, BadGzipFile, IsADirectoryError or AttributeError
    # tracebacks from convsim trace, fork and report
    from convsim.errors import ConvsimError
    from convsim.traces.tracing import read_trace
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ConvsimError) as err:
        read_trace(path)
    assert words in str(err.value) and name in str(err.value)


def test_a_text_holding_unicode_line_separators_reads_back(tmp_path):
    # U+2028 and U+0085 are not line ends in JSONL: reading the trace with str.splitlines() broke it
    rec = TraceRecorder({"transcript": []}, [])
    rec.on_values({"transcript": []})
    text = "one\u2028two\x85three"
    rec.on_updates({"agent": {"transcript": [{"text": text}]}})
    rec.on_values({"transcript": [{"text": text}]})
    rec.close().write(tmp_path / "t.jsonl")
    (step,) = read_trace(tmp_path / "t.jsonl")["steps"]
    assert step["changed"]["transcript"]["appended"][0]["text"] == text


def test_each_send_task_step_lists_only_its_own_model_calls(tmp_path, monkeypatch):
    # before, every step of a Send fan-out listed all the node's calls of the superstep (3 x 3 here):
    # a task's step could not say which call was its own
    import time
    from pathlib import Path

    import convsim
    from convsim.providers import models
    from convsim.running.store import RunStore
    from convsim.traces.tracing import read_trace

    class Experts:  # the last expert answers first: threads finish in the reverse of the send order
        def invoke(self, messages, **kwargs):
            from langchain_core.messages import AIMessage
            question = messages[-1].content
            time.sleep({"geography": 0.2, "chemistry": 0.1, "literature": 0.0}[question.split()[2]])
            return AIMessage(f"answer to {question}", usage_metadata={
                "input_tokens": 3, "output_tokens": 4, "total_tokens": 7})
    monkeypatch.setattr(models, "_backend", lambda spec, timeout=120.0: Experts())
    graph = Path(__file__).parent / "data" / "graphs" / "send_experts.py"
    run_dir = convsim.run({"name": "send", "graph": str(graph), "sessions": 2, "analysis": [],
                           "out_dir": str(tmp_path), "models": {"agent": "openai:fake@http://127.0.0.1:9/v1"}},
                          run_id="send", analyze=False)
    for record in RunStore(run_dir).records():
        assert record["status"] == "ok"
        trace = read_trace(run_dir / "traces" / "default" / f"{record['session_id']}.jsonl")
        steps = [s for s in trace["steps"] if s["node"] == "expert"]
        assert len(steps) == 3 and len({s["superstep"] for s in steps}) == 1
        # the steps come in the order LangGraph applied the tasks' writes (the send order), not as
        # their threads finished, each with the one call its task made and its own answer
        assert [[c["purpose"] for c in s["llm_calls"]] for s in steps] == \
            [["ask_geography"], ["ask_chemistry"], ["ask_literature"]]
        assert [c["task"] for s in steps for c in s["llm_calls"]] == [0, 1, 2]  # the Send index
        own = [s["changed"]["answers"] for s in steps]
        assert [(c["before_len"], c["after_len"], len(c["appended"])) for c in own] == [(0, 1, 1), (1, 2, 1), (2, 3, 1)]
        assert [c["appended"][0]["expert"] for c in own] == ["geography", "chemistry", "literature"]
        # replayed step by step, the state passes through each task's append and ends as the run did
        from convsim.traces.tracing import state_at
        assert state_at(trace["initial"], trace["steps"], steps[0]["step"])["answers"] == own[0]["appended"]
        assert state_at(trace["initial"], trace["steps"], steps[-1]["step"])["answers"] == \
            [a for c in own for a in c["appended"]]
        # the record lists each call once, in task order (the send order)
        assert [c["purpose"] for c in record["llm_calls"]] == ["ask_geography", "ask_chemistry", "ask_literature"]


def test_a_task_id_goes_to_its_own_step_when_two_tasks_interleave_their_events():
    # each task's "updates" chunk comes before its "tasks" result, but two tasks finishing at once in
    # two threads may interleave them: the id goes to the update holding the result's own objects
    calls, call_tasks = [], {}
    rec = TraceRecorder({"xs": []}, calls, append_keys={"xs"}, call_tasks=call_tasks)
    rec.on_values({"xs": []})
    for task_id, x in (("A", 1), ("B", 2)):
        call = {"node": "w", "task": x - 1, "purpose": f"p{x}"}
        call_tasks[id(call)] = task_id
        calls.append(call)
    a, b = [1], [2]
    rec.on_updates({"w": {"xs": a}})
    rec.on_updates({"w": {"xs": b}})
    rec.on_task({"id": "B", "name": "w", "error": None, "result": {"xs": b}})
    rec.on_task({"id": "A", "name": "w", "error": None, "result": {"xs": a}})
    rec.on_values({"xs": [1, 2]})
    assert [[c["purpose"] for c in s["llm_calls"]] for s in rec.steps] == [["p1"], ["p2"]]


def test_tasks_appending_to_one_key_at_once_each_show_their_own_items():
    # two tasks of a superstep append to "xs" and "log"; they finish B before A, LangGraph applies A
    # then B. Before, both steps showed the combined change of each key; now each shows its own items
    # at their place, the steps come in the order applied, and replay passes through each append.
    from convsim.traces.tracing import state_at
    rec = TraceRecorder({"xs": [0], "log": [], "errs": []}, [], append_keys={"xs", "log", "errs"})
    rec.on_values({"xs": [0], "log": [], "errs": []})
    a_xs, b_xs, a_log, b_log = [{"a": 1}, {"a": 2}], [{"b": 1}], ["A"], ["B", "B2"]
    rec.on_updates({"w": {"xs": b_xs, "log": b_log, "errs": ["e"]}})
    rec.on_updates({"v": {"xs": a_xs, "log": a_log, "flag": True, "errs": []}})
    rec.on_updates({"u": {"other": 5}})  # writes none of them: its step comes first
    rec.on_values({"xs": [0, *a_xs, *b_xs], "log": [*a_log, *b_log], "flag": True, "other": 5, "errs": ["e"]})
    steps = rec.steps
    assert [s["node"] for s in steps] == ["u", "v", "w"]
    assert steps[1]["changed"]["xs"] == {"appended": a_xs, "before_len": 1, "after_len": 3}
    assert steps[2]["changed"]["xs"] == {"appended": b_xs, "before_len": 3, "after_len": 4}
    assert steps[1]["changed"]["log"] == {"appended": ["A"], "before_len": 0, "after_len": 1}
    assert steps[2]["changed"]["log"] == {"appended": ["B", "B2"], "before_len": 1, "after_len": 3}
    # an empty append sits where its step comes
    assert steps[1]["changed"]["errs"] == {"appended": [], "before_len": 0, "after_len": 0}
    assert steps[2]["changed"]["errs"] == {"appended": ["e"], "before_len": 0, "after_len": 1}
    assert state_at(rec.initial, steps, 1)["xs"] == [0, *a_xs]
    assert state_at(rec.initial, steps, 2) == {"xs": [0, *a_xs, *b_xs], "log": ["A", "B", "B2"], "flag": True,
                                               "other": 5, "errs": ["e"]}
    # a list the tasks' items cannot be found in (a custom reducer that copied them): the combined change
    rec2 = TraceRecorder({"xs": []}, [], append_keys={"xs"})
    rec2.on_values({"xs": []})
    rec2.on_updates({"w": {"xs": [{"b": 1}]}})
    rec2.on_updates({"v": {"xs": [{"a": 1}]}})
    rec2.on_values({"xs": [{"a": 1}, {"b": 1}]})  # equal items, other objects
    assert [s["changed"]["xs"]["appended"] for s in rec2.steps] == [[{"a": 1}, {"b": 1}]] * 2
