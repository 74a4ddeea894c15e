"""An OpenAI-compatible endpoint agent uses the scenario's tools (function calling), through the CLI on
real runs against a stdlib server on 127.0.0.1 (tests/fault_server.py, scripted by tests/openai_agent.py):

* the example customer-service agent (examples/scripted_models.py's policy) in-process and behind an
  endpoint meets the same simulated customers: the same replies, the same tool calls and results per
  turn, the same bookings graded from state;
* a malformed tool call (an unknown tool, arguments that are not JSON, arguments that do not fit the
  schema) is answered with ToolNode's error message and recorded; the agent goes on;
* an agent that never stops calling tools is an agent_failure after ``#tool_rounds=N``, raw kept;
* a transport fault inside the tool loop is infrastructure (errors.jsonl, infra_error);
* a bad ``#tool_rounds`` is bad input (one line, exit 2, nothing written);
* ``#tool_choice=`` goes as the request's tool_choice: a forced one (``required``, a tool's name) on
  each turn's first request only, ``auto`` after it; a bad value, or a tool the scenario lacks, is bad input.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.cli_helpers import cli, one_line
from tests.conftest import ROOT
from fault_server import serve
from openai_agent import as_endpoint

pytest.importorskip("langchain.agents", reason="the in-process twin needs langchain>=1.0 (pip install 'convsim[examples]')")
sys.path.insert(0, str(ROOT / "examples"))
from scripted_models import film_policy, service_policy  # noqa: E402

FAST = '{"attempts": 2, "initial_wait": 0.01, "max_wait": 0.05, "timeout": 10.0}'


@pytest.fixture(autouse=True)
def _scripted_model(monkeypatch):
    monkeypatch.delenv("CONVSIM_EXAMPLE_MODEL", raising=False)


def _run(tmp_path, run_id, *args, code=0):
    got, out, exc = cli("run", *args, "--out", tmp_path, "--run-id", run_id, "--no-analysis", "-q")
    assert got == code, (out, exc)
    return [json.loads(line) for line in (tmp_path / run_id / "results.jsonl").read_text().splitlines()]


def _system_turns(record):
    return [e for e in record["transcript"] if e.get("speaker") == "system"]


def test_the_same_agent_in_process_and_behind_an_endpoint_books_the_same(tmp_path):
    sessions = "6"
    local = _run(tmp_path, "local", "customer_service", "--sessions", sessions,
                 "--agent", f"service={ROOT / 'examples' / 'service_agent.py'}:graph")
    requests: list = []
    with serve(answer=as_endpoint(service_policy, requests)) as server:
        remote = _run(tmp_path, "remote", "customer_service", "--sessions", sessions,
                      "--agent", f"service=openai:clerk@{server.url}")
    assert len(remote) == len(local) == 6 and {r["status"] for r in remote} == {"ok"}
    # the scenario's three tools went as function-calling schemas on every request
    assert all(sorted(t["function"]["name"] for t in q["tools"]) == ["book", "find_entities", "lookup_entity"]
               for q in requests)
    book = next(t["function"] for t in requests[0]["tools"] if t["function"]["name"] == "book")
    assert {"domain", "name", "people", "day", "time", "stay"} <= set(book["parameters"]["properties"])
    # tool results went back as tool messages, and the earlier turns' calls stayed in the conversation
    assert any(m["role"] == "tool" for q in requests for m in q["messages"])
    by_id = {r["session_id"]: r for r in local}
    booked = 0
    for r in remote:
        twin = by_id[r["session_id"]]
        assert [e["text"] for e in r["transcript"]] == [e["text"] for e in twin["transcript"]]
        assert ([e["meta"]["tool_calls"] for e in _system_turns(r)]
                == [e["meta"]["tool_calls"] for e in _system_turns(twin)])
        assert r["agent_bookings"] == twin["agent_bookings"]
        for key in ("task_success_state", "policy_compliance_state", "bookings_made", "state_grading"):
            assert r["dialogue_metrics"][key] == twin["dialogue_metrics"][key], key
        assert {c["role"] for c in r["llm_calls"]} == {"agent:service"}
        booked += r["dialogue_metrics"]["bookings_made"]
    assert booked > 0  # the endpoint's agent booked, and state grading saw it
    assert any(r["dialogue_metrics"]["task_success_state"] == 1 for r in remote)
    # one request per tool round and one for each reply: every request the server answered was recorded
    calls = sum(len(r["llm_calls"]) for r in remote)
    tools_run = sum(len(e["meta"]["tool_calls"]) for r in remote for e in _system_turns(r))
    assert calls == server.served["ok"] == len(requests) and calls > tools_run > 0


def _malformed(request):
    """First answer: three malformed calls and one good search; then a reply naming what came back."""
    tool_msgs = [m for m in request["messages"] if m["role"] == "tool"]
    if tool_msgs:
        return "Here is what I found: " + " | ".join(m["content"][:40] for m in tool_msgs)
    fn = lambda name, args: {"name": name, "arguments": args}  # noqa: E731
    return {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": fn("teleport", '{"to": "Paris"}')},
        {"id": "c2", "type": "function", "function": fn("book", '{"domain": "hotel", "name": ')},
        {"id": "c3", "type": "function", "function": fn("find_entities", '{"domain": 7}')},
        {"id": "c4", "type": "function", "function": fn("find_entities",
                                                        '{"domain": "restaurant", "constraints": {"area": "north"}}')}]}


def test_malformed_tool_calls_are_answered_with_tool_errors_and_recorded(tmp_path):
    requests: list = []
    with serve(answer=lambda q: (requests.append(q), _malformed(q))[1]) as server:
        records = _run(tmp_path, "bad", "customer_service", "--sessions", "1",
                       "--agent", f"service=openai:clerk@{server.url}")
    assert records[0]["status"] == "ok"
    first = _system_turns(records[0])[0]["meta"]
    errors = first["tool_errors"]
    assert [c["name"] for c in errors] == ["teleport", "book", "find_entities"] and all(c["error"] for c in errors)
    assert "is not a valid tool, try one of [find_entities, lookup_entity, book]" in errors[0]["result"]
    assert "are not valid JSON" in errors[1]["result"] and errors[1]["args"] == '{"domain": "hotel", "name": '
    assert "validation error" in errors[2]["result"] and errors[2]["args"] == {"domain": 7}
    # what ran: the good search only (the scenario's own log), and nothing was booked
    assert [c["name"] for c in first["tool_calls"]] == ["find_entities"] and first["tool_calls"][0]["result"]["ok"]
    assert records[0]["agent_bookings"] == []
    # the agent was told, in call order, with each call's id
    answers = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["c1", "c2", "c3", "c4"]
    assert answers[0]["content"].startswith("Error: teleport is not a valid tool")
    assert answers[1]["content"].startswith("Error: ") and answers[1]["content"].endswith("Please fix your mistakes.")
    assert json.loads(answers[3]["content"])["ok"] is True
    # the assistant message with the calls went back as ChatOpenAI sends it (valid calls, then the
    # invalid one with its raw arguments), its text "" where ChatOpenAI sends null
    sent = next(m for m in requests[1]["messages"] if m.get("tool_calls"))
    assert [c["id"] for c in sent["tool_calls"]] == ["c1", "c3", "c4", "c2"] and sent["content"] == ""
    assert sent["tool_calls"][3]["function"]["arguments"] == '{"domain": "hotel", "name": '


def test_an_agent_that_never_stops_calling_tools_fails_after_tool_rounds(tmp_path):
    loop = {"content": None, "tool_calls": [{"id": "x", "type": "function", "function": {
        "name": "lookup_entity", "arguments": '{"domain": "hotel", "name": "acorn guest house"}'}}]}
    requests: list = []
    with serve(answer=lambda q: (requests.append(q), loop)[1]) as server:
        records = _run(tmp_path, "loop", "customer_service", "--sessions", "2",
                       "--agent", f"service=openai:clerk@{server.url}#tool_rounds=2&max_tokens=64&seed=5")
        served = server.served["ok"]
    assert {r["status"] for r in records} == {"agent_failure"}
    for r in records:
        assert "still calling tools after 2 round(s)" in r["error"] and "acorn guest house" in r["error"]
        assert r["agents"] == {"service": f"openai:clerk@{server.url}#tool_rounds=2&max_tokens=64&seed=5"}
    assert all(q["max_tokens"] == 64 and q["seed"] == 5 for q in requests)  # the generation settings went
    assert served == 2 * 3  # two rounds of calls run, the third answer with calls refused: per session
    assert not (tmp_path / "loop" / "errors.jsonl").exists()


def test_a_transport_fault_inside_the_tool_loop_is_infrastructure(tmp_path):
    first = {"content": None, "tool_calls": [{"id": "a", "type": "function", "function": {
        "name": "find_entities", "arguments": '{"domain": "hotel", "constraints": {}}'}}]}
    # the first request answers a tool call; the next (with the tool result) fails on both attempts
    with serve(answer=lambda q: first, script=["ok", "500", "500"]) as server:
        config = tmp_path / "down.yaml"
        config.write_text(f"name: down\ngraph: customer_service\nsessions: 1\nretry: {FAST}\n"
                          f"agents: {{service: 'openai:clerk@{server.url}'}}\n")
        records = _run(tmp_path, "down", config, code=3)
    assert records[0]["status"] == "infra_error"
    errors = [json.loads(x) for x in (tmp_path / "down" / "errors.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in errors] == ["infrastructure"] and "ModelUnavailable" in errors[0]["error"]


@pytest.mark.parametrize("option, word", [("#tool_rounds=0", "tool_rounds"), ("#tool_rounds=x", "tool_rounds"),
                                          ("#rounds=3", "tool_rounds"), ("#max_tokens=8&temperature=3", "temperature"),
                                          ("#tool_rounds=2&", "max_tokens"), ("#tool_choice=", "tool_choice"),
                                          ("#tool_choice=look up", "tool_choice"), ("#tool_choice=x/y", "tool_choice"),
                                          ("#tool_choice=" + "x" * 65, "tool_choice")])
def test_a_bad_openai_option_is_bad_input(tmp_path, option, word):
    one_line(["run", "customer_service", "--sessions", "1", "--out", tmp_path, "--run-id", "x",
              "--agent", f"service=openai:clerk@http://127.0.0.1:9/v1{option}"], word)
    assert not (tmp_path / "x").exists()


def test_a_recommender_behind_an_endpoint_searches_the_catalog(tmp_path):
    """crs_shift: the example recommender's policy behind an endpoint calls search_films each turn;
    the calls and their results are the turn's tool_calls, the films it names are read from its reply."""
    with serve(answer=as_endpoint(film_policy)) as server:
        records = _run(tmp_path, "crs", "crs_shift", "--sessions", "2", "--agent", f"crs=openai:rec@{server.url}")
    assert {r["status"] for r in records} == {"ok"}
    system = [e for r in records for e in _system_turns(r)]
    searched = [c for e in system for c in e["meta"]["tool_calls"] if c["name"] == "search_films"]
    assert searched and all(c["result"]["ok"] and isinstance(c["args"]["constraints"], dict) for c in searched)
    assert all(e["meta"]["rec_ids_source"] == "reply text" for e in system)
    named = [e for e in system if e["meta"]["mentioned_ids"]]
    assert named  # the films it recommended, read through the catalog
    for e in named:  # each recommended film came from a search result of that turn
        found = {f["id"] for c in e["meta"]["tool_calls"] for f in c["result"].get("results", [])}
        assert set(e["meta"]["mentioned_ids"]) & found


def _lookup_then_reply(request):
    """A tool call (a look-up) while the turn's last message is the user's; a reply after the result."""
    if request["messages"][-1]["role"] == "tool":
        return "The " + json.loads(request["messages"][-1]["content"]).get("reason", "venue") + " is noted."
    return {"content": None, "tool_calls": [{"id": f"l{len(request['messages'])}", "type": "function", "function": {
        "name": "lookup_entity", "arguments": '{"domain": "hotel", "name": "acorn guest house"}'}}]}


@pytest.mark.parametrize("choice, first, later", [
    ("lookup_entity", {"type": "function", "function": {"name": "lookup_entity"}}, "auto"),
    ("required", "required", "auto"), ("auto", "auto", "auto"), ("none", "none", "none"), (None, None, None)])
def test_tool_choice_forces_only_the_first_request_of_a_turn(tmp_path, choice, first, later):
    """A forced tool_choice on every request would make the agent call tools until tool_rounds ran out:
    it goes on the turn's first request, the requests after a tool result say auto."""
    requests: list = []
    spec = "#tool_rounds=1" + (f"&tool_choice={choice}" if choice else "")
    with serve(answer=lambda q: (requests.append(q), _lookup_then_reply(q))[1]) as server:
        records = _run(tmp_path, "choice", "customer_service", "--sessions", "1",
                       "--agent", f"service=openai:clerk@{server.url}{spec}")
    assert records[0]["status"] == "ok", records[0]["error"]
    system = _system_turns(records[0])
    assert len(system) >= 2 and len(requests) == 2 * len(system)  # per turn: a look-up, then the reply
    for e in system:  # each turn's look-up ran against the session's tools and was recorded
        assert [c["name"] for c in e["meta"]["tool_calls"]] == ["lookup_entity"]
    assert [q.get("tool_choice") for q in requests] == [first, later] * len(system)
    assert all("tool_choice" not in q for q in requests) == (choice is None)


@pytest.mark.parametrize("graph, role, tools", [
    ("customer_service", "service", "find_entities, lookup_entity, book"),
    ("crs_shift", "crs", "search_films, lookup_film"),
    ("course_retrieval", "retriever", "search_courses, get_course"),
    ("group_planning", "planner", "find_places, lookup_place")])
def test_a_tool_choice_naming_no_tool_of_the_scenario_is_bad_input(tmp_path, graph, role, tools):
    """Each shipped slot declares the tools it hands the agent (``Slot.tools``): a name it lacks is
    one line before the run, exit 2, nothing written, no request made."""
    with serve(answer=_lookup_then_reply) as server:
        one_line(["run", graph, "--sessions", "1", "--out", tmp_path, "--run-id", "x", "-q", "--agent",
                  f"{role}=openai:clerk@{server.url}#tool_choice=teleport"],
                 "tool_choice=teleport names no tool", tools, f"agents.{role}")
        assert not server.served
    assert not (tmp_path / "x").exists()


def test_each_shipped_slot_declares_the_tools_its_scenario_hands_the_agent():
    """Slot.tools is what the scenario's tool objects are named, in order (it is checked against
    ``#tool_choice`` before the run, so it must not drift from the tools)."""
    from convsim.agents.courses import slot as courses_slot
    from convsim.agents.courses.tools import CourseTools
    from convsim.agents.crs import slot as crs_slot
    from convsim.agents.crs.tools import FilmTools
    from convsim.agents.group import slot as group_slot
    from convsim.agents.group.tools import TravelTools
    from convsim.agents.service import slot as service_slot
    from convsim.agents.service.tools import session_tools
    from convsim.catalog.courses import load_courses
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.travel import load_travel_db
    made = {"crs": FilmTools(load_movie_catalog()).tools(), "retriever": CourseTools(load_courses()).tools(),
            "planner": TravelTools(load_travel_db()).tools(), "service": session_tools()}
    for slot in (crs_slot.CRS_SLOT, courses_slot.SLOT, group_slot.SLOT, service_slot.SLOT):
        assert slot.tools and slot.tools == tuple(t.name for t in made[slot.role]), slot.role
