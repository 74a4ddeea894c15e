"""The scenarios' agent slots (customer service, group planning, course retrieval, CRS tools): what an
agent is handed never holds the hidden goal or targets; the action derived from a service agent's
tool use and reply; the built-in service pipeline graded from its bookings as an agent is."""
from __future__ import annotations

import json
import textwrap

from convsim.agents.service.slot import derive_action
from convsim.agents.service.tools import ServiceWorld
from convsim.catalog.service.db import booking_available, load_service_db, load_service_schema
from tests.cli_helpers import cli

DB, SCHEMA = load_service_db(), load_service_schema()

SPY = textwrap.dedent("""
    import json, os
    def app(inputs):
        seen = {"messages": inputs["messages"], "context": inputs["context"],
                "tools": sorted(t.name for t in inputs.get("tools", []))}
        with open(os.environ["SPY_FILE"], "a") as f:
            f.write(json.dumps(seen, default=str) + "\\n")
        return REPLY
""")


def _spy(tmp_path, name, reply):
    path = tmp_path / f"{name}.py"
    path.write_text(SPY.replace("REPLY", reply))
    return path


def _run(tmp_path, run_id, *args):
    code, out, exc = cli("run", *args, "--out", tmp_path, "--run-id", run_id, "--no-analysis")
    assert code == 0, (out, exc)
    return [json.loads(line) for line in (tmp_path / run_id / "results.jsonl").read_text().splitlines()]


def test_service_agent_is_handed_no_goal(tmp_path, monkeypatch):
    spy_file = tmp_path / "seen.jsonl"
    monkeypatch.setenv("SPY_FILE", str(spy_file))
    agent = _spy(tmp_path, "svc", "'Which area would you like?'")
    records = _run(tmp_path, "svc", "customer_service", "--agent", f"service={agent}:app", "--sessions", "3")
    seen = [json.loads(x) for x in spy_file.read_text().splitlines()]
    assert seen and all(set(s["context"]) == {"turn", "domains"} for s in seen)
    assert all(s["tools"] == ["book", "find_entities", "lookup_entity"] for s in seen)
    assert all(m["role"] in ("user", "assistant") for s in seen for m in s["messages"])
    for r in records:  # none of the goal's hidden parts reaches the agent
        goal = r["goal"]
        hidden = [json.dumps(g["book"]) for g in goal["domains"] if g.get("book")]
        hidden += [json.dumps(g["fail_book"]) for g in goal["domains"] if g.get("fail_book")]
        blob = spy_file.read_text()
        assert "fail_book" not in blob and '"goal"' not in blob and "user_state" not in blob
        assert not any(h in blob for h in hidden)
        # a reply that only asks: the action derived from it is a request for the slot it names
        system = [e for e in r["transcript"] if e["speaker"] == "system"]
        assert all(e["meta"]["action"] == "request" for e in system)


def test_retriever_agent_is_handed_no_gold_labels(tmp_path, monkeypatch):
    spy_file = tmp_path / "seen.jsonl"
    monkeypatch.setenv("SPY_FILE", str(spy_file))
    agent = _spy(tmp_path, "ret", "'CS114 then CS209 and CS114 again, and XX999'")
    records = _run(tmp_path, "ret", "course_retrieval", "--agent", f"retriever={agent}:app", "--set", "max_cases=2")
    seen = [json.loads(x) for x in spy_file.read_text().splitlines()]
    assert all(set(s["context"]) == {"case_id", "skill", "k"} for s in seen)
    assert "goldRelevance" not in spy_file.read_text() and "gold" not in json.dumps([s["context"] for s in seen])
    for r in records:  # read from the reply text: catalog codes in order, repeats and unknown codes dropped
        assert [c["subjectCode"] for c in r["retrieved"]] == ["CS114", "CS209"]
        assert r["transcript"][-1]["meta"]["codes_dropped"] == 1  # the repeat (XX999 is no catalog code)
        assert r["transcript"][-1]["meta"]["ranking_source"] == "reply text"


def test_planner_agent_is_handed_no_member_preferences(tmp_path, monkeypatch):
    spy_file = tmp_path / "seen.jsonl"
    monkeypatch.setenv("SPY_FILE", str(spy_file))
    agent = _spy(tmp_path, "plan", "'A quiet plan.'")
    records = _run(tmp_path, "plan", "group_planning", "--agent", f"planner={agent}:app", "--sessions", "1",
                   "--set", "n_sessions=1")
    seen = json.loads(spy_file.read_text().splitlines()[0])
    assert set(seen["context"]) == {"city", "start_date", "n_days", "members", "decisions"}
    assert all(isinstance(m, str) for m in seen["context"]["members"])  # names only
    prefs = [p["text"] for m in records[0]["members"] for p in m["preferences"].values() if p.get("text")]
    said = " ".join(m["content"] for m in seen["messages"])
    # a preference reaches the planner only as a member said it in the dialogue, never from the profile
    unsaid = [p for p in prefs if p not in said]
    assert not any(p in json.dumps(seen["context"]) for p in unsaid)


def test_builtin_pipeline_is_graded_from_its_bookings(tmp_path):
    records = _run(tmp_path, "builtin", "customer_service", "--sessions", "6")
    for r in records:
        dm = r["dialogue_metrics"]
        made = sum(len(o["bookings"]) for o in r["outcomes"].values())
        assert dm["bookings_made"] == made
        assert dm["task_success_state"] in ((0, 1) if dm["bookings_expected"] or made else (None,))
        assert "unreported" not in dm and dm["joint_goal_accuracy"] is not None  # the pipeline reports it all
    assert any(r["dialogue_metrics"]["task_success_state"] == 1 for r in records)


def _booking(record):
    for day in ("monday", "tuesday", "wednesday", "thursday", "friday"):
        for people in "1234":
            b = {"bookday": day, "bookpeople": people, "booktime": "19:00"}
            if booking_available("restaurant", record["name"], b):
                return b
    raise AssertionError


def test_derive_action_from_tool_use_and_reply():
    record = DB.records["restaurant"][3]
    world = ServiceWorld(DB, SCHEMA)
    world.find_entities("restaurant", {"food": record["food"]})
    named = derive_action(world.calls, f"How about {record['name']}? Its phone is {record.get('phone', '')}.", {}, DB)
    assert named["kind"] == "search" and named["entity"] == record["name"]
    if record.get("phone"):
        assert named["informed"].get("phone") == record["phone"]
    unnamed = derive_action(world.calls, "There are several. Which area would you like?", {}, DB)
    assert unnamed["kind"] == "search" and unnamed["entity"] is None and unnamed["requested"] == ["area"]
    world.calls.clear()
    world.book("restaurant", record["name"], people="2", day="monday")
    assert derive_action(world.calls, "What time?", {}, DB)["requested"] == ["booktime"]
    world.calls.clear()
    b = _booking(record)
    out = world.book("restaurant", record["name"], people=b["bookpeople"], day=b["bookday"], time=b["booktime"])
    act = derive_action(world.calls, f"Booked, reference {out['reference']}.", {"acts": ["Restaurant-Book"]}, DB)
    assert act["kind"] == "book" and act["reference"] == out["reference"] and act["acts"] == ["Restaurant-Book"]
    world.calls.clear()
    world.find_entities("restaurant", {"food": "no such food at all"})
    assert derive_action(world.calls, "Sorry, none.", {}, DB)["kind"] == "nooffer"


def test_film_tools_search_and_lookup():
    from convsim.agents.crs.tools import FilmTools
    from convsim.catalog.movies.catalog import load_movie_catalog
    catalog = load_movie_catalog()
    tools = FilmTools(catalog)
    film = catalog.movies[0]
    genre = film.genres[0]
    out = tools.search_films({"genre": genre}, 50)
    assert out["ok"] and all(genre in f["genres"] for f in out["results"])
    assert tools.lookup_film(film.title)["film"]["id"] == film.id
    assert tools.search_films({"mood": "x"})["reason"] == "unknown_field"
    assert [c["name"] for c in tools.calls] == ["search_films", "lookup_film", "search_films"]


def test_reported_structure_turns_the_metrics_back_on(tmp_path):
    """An agent that reports domain, intent and belief state gets the metrics that read them (scored
    against the simulator's gold); what it still does not report stays None with the reason."""
    agent = tmp_path / "reporting.py"
    agent.write_text(textwrap.dedent("""
        def app(inputs):
            return {"content": "Which area would you like?",
                    "structured": {"domain": "restaurant", "intent": "find_restaurant",
                                   "belief_state": {"restaurant": {"area": "centre"}}}}
    """))
    records = _run(tmp_path, "rep", "customer_service", "--agent", f"service={agent}:app", "--sessions", "3")
    for r in records:
        dm = r["dialogue_metrics"]
        assert dm["domain_routing"] is not None and dm["joint_goal_accuracy"] is not None
        assert dm["intent_accuracy"] is not None and dm["slot_accuracy"] is not None
        assert "joint_goal_accuracy" not in dm["unreported"] and "domain_routing" not in dm["unreported"]
        assert dm["unreported"]["policy_decision_accuracy"] == "the agent has no separate policy step"
    # the reported domain is scored: sessions whose customer wants no restaurant route wrong
    assert any(r["dialogue_metrics"]["domain_routing"] < 1 for r in records)
