"""The researcher's agent in a slot answers in the scenario's language: a slot declares it
(``Slot.language``, with the words the scenario knows), and a reply that is well-formed nonsense
(lorem ipsum, another language) is the agent's garbage: ``agent_failure`` with its raw text, never a
scored turn. Before, only empty, non-text and control-character replies were refused."""
import json

import pytest

from cli_helpers import cli
from convsim.errors import AgentError
from convsim.slots import Slot
from convsim.slots.nodes import call_slot
from fault_server import GARBAGE

AGENTS = f'''
FACTS = {{"capital of france": "Paris", "largest planet": "Jupiter", "chemical symbol for gold": "Au"}}

def english(inputs):
    q = inputs["messages"][-1]["content"].lower()
    topic = next((t for t in FACTS if t in q), None)
    return f"The {{topic}} is {{FACTS[topic]}}." if topic else "I do not know, sorry."

def lorem(inputs):
    return {GARBAGE!r}

def french(inputs):
    return "Je ne sais pas, mais je pense que la réponse est probablement dans le livre."
'''


@pytest.fixture
def agents(tmp_path):
    path = tmp_path / "lang_agents.py"
    path.write_text(AGENTS)
    return path


def _run(tmp_path, agents, attr):
    code, out, exc = cli("run", "hello_chat", "--sessions", 2, "--out", tmp_path / "runs", "--run-id", attr,
                         "-q", "--no-analysis", "--agent", f"agent={agents}:{attr}")
    return [json.loads(x) for x in (tmp_path / "runs" / attr / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("attr,words", [("lorem", ["not English", "Lorem ipsum dolor"]),
                                        ("french", ["not English", "Je ne sais pas"])])
def test_an_agent_answering_nonsense_is_an_agent_failure_with_its_raw_text(tmp_path, agents, attr, words):
    recs = _run(tmp_path, agents, attr)
    assert {r["status"] for r in recs} == {"agent_failure"}, [r["error"] for r in recs]
    assert all(w in r["error"] for r in recs for w in words), recs[0]["error"]
    assert not any(e["text"] == GARBAGE for r in recs for e in r["transcript"])


def test_an_agent_answering_english_is_ok(tmp_path, agents):
    recs = _run(tmp_path, agents, "english")
    assert {r["status"] for r in recs} == {"ok"}, [r["error"] for r in recs]


def test_a_slot_without_a_language_takes_any_reply(agents):
    transcript = [{"turn": 1, "speaker": "user", "text": "What is the capital of France?"}]
    loose = Slot(role="agent", handed="x", returns="reply")
    strict = Slot(role="agent", handed="x", returns="reply", language="en")
    turn, _ = call_slot(f"{agents}:french", loose, transcript, context={"turn": 1}, session_id="s")
    assert turn.text.startswith("Je ne sais pas")
    with pytest.raises(AgentError, match="not English.*raw: Je ne sais pas"):
        call_slot(f"{agents}:french", strict, transcript, context={"turn": 1}, session_id="s")
    turn, _ = call_slot(f"{agents}:english", strict, transcript, context={"turn": 1}, session_id="s")
    assert turn.text == "The capital of france is Paris."
