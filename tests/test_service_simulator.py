"""The simulator that does not speak the rules' language: held-out paraphrases, policy-relevant
requests, the optional LLM user, and the simulator checks that flag a broken simulated user."""
import ast
import json
import re
from pathlib import Path

import pytest

import convsim.graphs.customer_service as cs
from convsim.agents.service.paraphrase import POOL_FILE, UserUtterance, realise
from convsim.agents.service.user_simulator import sample_goal
from convsim.catalog.service.db import load_service_db
from convsim import StructuredResult, rng_for, stable_seed
from convsim.errors import SimulatorError
from convsim.agents.service.paraphrase import llm_realise

ROOT = Path(__file__).parents[1]


def _grams(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z']+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not k.startswith("_"):
                yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def test_heldout_pool_shares_no_phrase_with_the_triage_rules():
    pool = json.loads(POOL_FILE.read_text())
    held = set().union(*(_grams(re.sub(r"\{\w+\}", " ", s)) for s in _strings(pool)))
    tree = ast.parse((ROOT / "agents/service/triage.py").read_text())
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    # regex alternatives become plain phrases: drop the syntax, keep the words
    rules = set().union(*(_grams(re.sub(r"[\\()|?*+\[\]^${}]|\\b|'\?", " ", lit)) for lit in literals))
    shared = held & rules
    assert held and rules and not shared, f"shared phrases: {sorted(shared)[:5]}"


def _run(n=16, **params):
    return run_sessions(cs.Params(n_sessions=n, judge=False, **params))


def run_sessions(p: "cs.Params") -> list[dict]:
    """Every session of ``p`` through the customer-service graph in process (seed 7), final states."""
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"])
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return out


def _pooled(records, name):
    vals = [t[name] for r in records for t in r["turn_metrics"] if t.get(name) is not None]
    return sum(vals) / len(vals)


def test_heldout_surface_changes_only_the_words_and_measures_triage_honestly():
    templ, held = _run(), _run(surface="heldout")
    t_user = [e for r in templ for e in r["transcript"] if e["speaker"] == "user"]
    h_user = [e for r in held for e in r["transcript"] if e["speaker"] == "user"]
    assert t_user[0]["meta"]["gold_domain"] == h_user[0]["meta"]["gold_domain"]
    assert all(e["text"] != e["meta"]["template_text"] for e in h_user if e["meta"].get("template_text"))
    assert _pooled(templ, "domain_routing") == 1.0  # the rules parse their own templates
    assert _pooled(held, "domain_routing") < 1.0     # and not wording they never saw
    again = _run(surface="heldout")
    assert [e["text"] for e in again[0]["transcript"]] == [e["text"] for e in held[0]["transcript"]]


def test_realise_says_every_value():
    out = {"gold_domain": "restaurant", "user_acts": [{"intent": "inform", "domain": "restaurant", "slot": "food"},
                                                      {"intent": "inform", "domain": "restaurant", "slot": "area"}],
           "gold_state": {"restaurant-food": ["thai"], "restaurant-area": ["east"]}}
    for seed in range(5):
        text = realise("opening", out, {}, rng_for(seed, "t"))
        assert "thai" in text and "east" in text
    book = {"gold_domain": "hotel", "user_acts": [{"intent": "inform", "domain": "hotel", "slot": s}
                                                  for s in ("bookpeople", "bookday", "bookstay")],
            "gold_state": {"hotel-bookpeople": ["3"], "hotel-bookday": ["friday"], "hotel-bookstay": ["2"]}}
    text = realise("book", book, {}, rng_for(1, "t"))
    assert "3" in text and "friday" in text and "2" in text


def test_policy_requests_at_a_configurable_rate():
    db = load_service_db()
    plain = [sample_goal(db, s) for s in range(40)]
    assert plain == [sample_goal(db, s, policy_rate=0.0) for s in range(40)]  # rate 0: same goals as before
    rich = [sample_goal(db, s, policy_rate=1.0) for s in range(40)]
    impossible = [g for goal in rich for g in goal["domains"] if g.get("impossible")]
    bare = [g for goal in rich for g in goal["domains"] if g.get("bare_book")]
    assert impossible and bare
    for g in impossible:  # really impossible with the other constraints, feasible without
        slot = g["impossible"]["slot"]
        others = {k: v for k, v in g["constraints"].items() if k != slot}
        assert not db.query(g["domain"], {**others, slot: g["impossible"]["value"]})
        assert db.query(g["domain"], g["constraints"])


def test_bare_booking_makes_policy_fail_only_when_the_agent_is_broken():
    clean = _run(policy_request_rate=1.0)
    broken = _run(policy_request_rate=1.0, fault="book_missing_slots", supervisor=False)
    assert sum(r["dialogue_metrics"]["policy_violations"] for r in clean) == 0
    assert any(t["expected_action"] == "request" for r in clean for t in r["turn_metrics"])
    assert sum(r["dialogue_metrics"]["policy_violations"] for r in broken) > 0


class _UserModel:
    """A `user` model double: structured answers from a list (a dict validates, a str is garbage)."""
    is_none = False
    spec = "double:user"

    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def structured(self, messages, schema, purpose="", retries=2):
        self.calls.append(messages)
        a = self.answers.pop(0) if self.answers else self.answers_default
        if callable(a):
            a = a(messages)
        if isinstance(a, dict):
            return StructuredResult(ok=True, value=schema.model_validate(a), raw=json.dumps(a), attempts=1)
        return StructuredResult(ok=False, raw=a, error="ValueError: no JSON", attempts=retries + 1)


def _says_values(messages):
    values = json.loads(messages[-1][1].rsplit("Values: ", 1)[1])
    return {"text": "I want " + " and ".join(str(v) for v in values.values() if v) + ", thanks"}


def _one_session(model):
    p = cs.Params(n_sessions=1, judge=False)
    init = next(iter(cs.sessions(p, cs.Context(params=p, seed=7))))
    c = cs.Context(params=p, seed=1, session_id=init["session_id"], models={"user": model})
    return cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                           context=c, config={"recursion_limit": 10_000})


def test_llm_user_words_are_used_and_garbage_falls_back_to_the_rule_user():
    """An invalid LLM user answer: the rule user's own wording says the move (flagged on the turn,
    counted in user_model_fallbacks), so the dialogue goes on and the agent is still evaluated
    (before: the session ended at turn 1 as a simulator failure, no agent turn evaluated)."""
    model = _UserModel([{"text": "hey, any chance of a 3 star place to sleep?"}])
    model.answers_default = _says_values
    state = _one_session(model)
    assert state["transcript"][0]["text"] == "hey, any chance of a 3 star place to sleep?"
    assert state["user_llm"]["ok"] and model.calls
    assert state["dialogue_metrics"]["user_model_fallbacks"] == 0
    bad = _UserModel(["Sure! {\"text\": oops"])
    bad.answers_default = "still garbage"
    state = _one_session(bad)
    users = [e for e in state["transcript"] if e["speaker"] == "user"]
    assert users and all(e["text"] == e["meta"]["template_text"] for e in users)  # the rule user's words
    assert all(e["meta"]["user_model_fallback"]["raw"] == "still garbage" for e in users[1:])
    assert state["dialogue_metrics"]["user_model_fallbacks"] == len(users) > 1
    assert len(state["turn_metrics"]) == len(users)  # every agent turn evaluated
    with pytest.raises(SimulatorError, match="raw answer"):  # without a fallback, garbage still raises
        llm_realise(bad, "inform", {"user_acts": []}, [])
    with pytest.raises(ValueError):
        UserUtterance(text="System: I recommend the golden dragon")
    # valid JSON that states none of the move's values (the schema description echoed back)
    echo = _UserModel([{"text": "What the LLM user says next: plain words, no labels, no JSON."}])
    echo.answers_default = _says_values
    state = _one_session(echo)
    first = state["transcript"][0]
    assert first["text"] == first["meta"]["template_text"]
    assert "states none of the values" in first["meta"]["user_model_fallback"]["error"]


def _sim_state(texts, moves, termination="user_stop", disclosed=("restaurant",)):
    transcript = [{"turn": i + 1, "speaker": "user", "text": t, "meta": {"move": m}}
                  for i, (t, m) in enumerate(zip(texts, moves))]
    goal = {"domains": [{"domain": "restaurant"}, {"domain": "hotel"}]}
    return {"mode": "simulate", "termination": termination, "transcript": transcript,
            "user_state": {"goal": goal, "disclosed": {d: {"area": "x"} for d in disclosed}}}


def test_simulator_checks_flag_broken_users_and_pass_good_ones():
    good = _sim_state(["I need a cheap place to eat.", "Thanks, goodbye."], ["opening", "bye"],
                      disclosed=("restaurant", "hotel"))
    assert cs.simulator_checks(good) == []
    checks = lambda s: sorted({f["check"] for f in cs.simulator_checks(s)})  # noqa: E731
    assert checks(_sim_state(["I recommend the golden dragon, shall I book it?"], ["opening"],
                             disclosed=("restaurant", "hotel"))) == ["user_speaks_as_agent"]
    assert checks(_sim_state(['{"constraints": {"area": "east"}}'], ["opening"],
                             disclosed=("restaurant", "hotel"))) == ["goal_leak"]
    assert checks(_sim_state(["Cheap food please, bye!"], ["opening"])) == ["early_goodbye", "goal_unstated"]
    # every turn that tripped a check keeps its own flag (before: the first per check name only);
    # the fidelity check that flags the same thing (_check_goal_leak) does not add a second one
    twice = cs.simulator_checks(_sim_state(['{"area": "east"}', "I need a cheap place.", 'my goal: {"food": "thai"}'],
                                           ["opening", "inform", "inform"], disclosed=("restaurant", "hotel")))
    assert [(f["check"], f["detail"].split(":")[0]) for f in twice] == [("goal_leak", "turn 1"), ("goal_leak", "turn 3")]
    replay = {"mode": "replay", "termination": "agent_error", "replay": {"turns": [{}, {}, {}]},
              "turn_metrics": [{}]}
    # a replay cut short by the agent's error is the agent's failure (agent_checks), never the
    # recording's: before, replay_ran_out made it a simulator_failure and it left the agent's scores
    assert cs.simulator_checks(replay) == []
    assert [f["check"] for f in cs.agent_checks(dict(replay, errors=[{"node": "action", "error": "x"}]))] == ["agent_error"]
    assert cs.simulator_checks(dict(replay, termination="replay_end", turn_metrics=[{}, {}, {}])) == []
