"""Garbage is a failure, with its raw text: one check for every model answer
that becomes a turn or a verdict (convsim.providers.answer_check). Before, a server answering
random bytes with a NUL inside for the recommender left the session ``ok`` with the junk scored as
the system's turn (TAS 0.0, ``crs_generation_failures`` 0); at 20 % faults, 20 of 30 ``ok``
sessions held a junk system turn. Well-formed nonsense (lorem ipsum, a salad of words, another
language) passed the check: in a 20 %-fault run, 9 of 22 ``ok`` sessions held the fault server's
lorem-ipsum sentence as a turn; the language test (convsim.providers.answer_language) fails it."""
import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from convsim.config import config_from_dict
from convsim.providers.answer_check import answer_defect, checked_invoke, value_defect
from convsim.providers.models import ChatModel, parse_model_spec
from convsim.running.runner import run
from convsim.running.store import read_jsonl
from convsim.agents.language import EnglishTurn, node_vocabulary
from doubles import goal_answer
from fault_server import GARBAGE, NONSENSE, junk_text, serve

NONSENSE_FILE = json.loads((Path(__file__).parent / "data" / "nonsense_answers.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("text,why", [
    ("", "empty"), ("   \n", "empty"), (None, "not text"), (b"bytes", "not text"),
    ("a\x00b", "control character U+0000"), ("ok \x1b[31m red", "control character U+001B"),
    ("caf\x85 latin-1 C1 byte", "control character U+0085"), ("bad \ufffd byte", "undecodable"),
    ("private \ue000 use", "private-use"), ("x" * 9000, "over the bound"),
    (junk_text(b"request", 0), "control character"),
])
def test_each_defect_is_named(text, why):
    assert why in answer_defect(text)


@pytest.mark.parametrize("text", ["You might enjoy Inception.", "Tabs\tand\nnewlines\r\nare text.",
                                  "Émilie aime « Amélie » 🎬 — 東京物語", "Zero\u200dwidth joiners are text",
                                  "A newer emoji \U0001FAE8 is text"])
def test_real_text_passes(text):
    assert answer_defect(text) is None


@pytest.mark.parametrize("text,why", [
    (GARBAGE, "not English: 2 of its 13 words are English words"),  # "sit", "do"
    *[(t, "not English") for t in NONSENSE if "Velvet" not in t],
    ("Velvet harbor quietly seventeen marmalade, orbit lantern cathedral pudding, whisper gravel.",
     "a list of words, not a sentence"),
    *[(t, "not English") for lang, texts in NONSENSE_FILE.items() if lang in ("de", "it", "nl", "ru", "zh", "ar")
      for t in texts[:2]],
])
def test_well_formed_nonsense_fails_the_language_test_and_passes_without_it(text, why):
    vocab = node_vocabulary()
    assert why in answer_defect(text, language="en", vocabulary=vocab)
    assert answer_defect(text) is None  # the form alone: what passed before


@pytest.mark.parametrize("text", [
    "Yes.", "No, thanks.", "Au.", "Paris.", "Cast Away", "Everything Everywhere All at Once",
    "The Lord of the Rings: The Return of the King", "You might enjoy Cast Away, a drama with Tom Hanks.",
    "I need a cheap restaurant in the north part of town that serves Thai food.",
    "Yu Garden is at 529 Newmarket Road Fen Ditton, postcode C.B 5, 8 P.A.",
    "Don't worry, I'll book it for you; it's a great place and they're open late.",
    "Paris. 100 degrees Celsius. William Shakespeare. Jupiter. Au.",
    # lists are no prose: a recommender's bare titles, a terse agent's notes (no function word)
    "Inception, Heat, Alien, Memento, Tenet, Dunkirk, Arrival, Up",
    "- Heat (1995)\n- Alien (1979)\n- Up (2009)\n- Tenet (2020)\n- Inception (2010)\n- Memento (2000)",
    "turn 3: (plan 1), (lookup 1), (draft 1), (plan 2), (lookup 2), (draft 2), (plan 3), (lookup 3)",
])
def test_real_english_answers_pass_the_language_test(text):
    assert answer_defect(text, language="en", vocabulary=node_vocabulary()) is None


def test_the_same_titles_as_a_run_of_words_are_a_salad_and_as_a_list_pass():
    """The stop-word rule's defect, injected both ways: without function words, the titles said as
    one run fail; said as a list they pass (only the known-word rule judges a list)."""
    titles = ["Inception", "Heat", "Alien", "Memento", "Tenet", "Dunkirk", "Arrival", "Jaws"]
    vocab = node_vocabulary()
    assert "a list of words" in answer_defect(" ".join(titles) + ".", language="en", vocabulary=vocab)
    assert answer_defect(", ".join(titles), language="en", vocabulary=vocab) is None
    assert "not English" in answer_defect("Lorem, ipsum, dolor, sit, amet, consectetur, adipiscing, elit",
                                          language="en", vocabulary=vocab)


def test_the_prompt_words_are_known_and_a_language_the_check_does_not_know_is_refused():
    names = "Zorblax Quintessa Marvolio Trenchwick"  # a catalog the shipped vocabulary does not hold
    assert "not English" in answer_defect(f"{names} Fennimore.", language="en")
    assert answer_defect(f"{names} Fennimore.", language="en", prompt_texts=[f"Candidates: {names}, Fennimore"]) is None
    with pytest.raises(ValueError, match="no language check for 'fr'"):
        answer_defect("Bonjour tout le monde, comment allez-vous ?", language="fr")


def test_a_node_format_check_fails_an_answer_that_is_not_what_it_asked_for():
    def score_1_to_5(text):
        return None if text.strip(".") in {"1", "2", "3", "4", "5"} else f"a score 1-5, got {text[:20]!r}"
    from convsim.providers.retry import RetryPolicy
    model = Script(["Seven.", "9", "4."], retry=RetryPolicy(answer_attempts=3))
    got = checked_invoke(model, [("user", "Rate it 1-5.")], purpose="t", expect=score_1_to_5)
    assert got.ok and got.text == "4." and got.raws == ["Seven.", "9"]
    model = Script(["Seven.", "9"], retry=RetryPolicy(answer_attempts=2))
    got = checked_invoke(model, [("user", "Rate it 1-5.")], purpose="t", expect=score_1_to_5)
    assert not got.ok and got.reason == "not the expected format: a score 1-5, got '9'" and got.raws == ["Seven.", "9"]


def test_checked_invoke_expects_english_by_default_and_a_node_may_say_otherwise():
    from convsim.providers.retry import RetryPolicy
    french = NONSENSE_FILE["fr"][0]
    model = Script([GARBAGE, french], retry=RetryPolicy(answer_attempts=2))
    got = checked_invoke(model, [("user", "Recommend a film.")], purpose="t")
    assert not got.ok and got.raws == [GARBAGE, french] and got.reason.startswith("not English")
    model = Script([french])
    assert checked_invoke(model, [("user", "Recommande un film.")], purpose="t", language=None).ok


def test_a_turn_inside_a_structured_answer_must_be_english():
    class Said(BaseModel):
        utterance: EnglishTurn

    bad = json.dumps({"utterance": GARBAGE})
    with serve(answer=lambda req: bad) as server:
        model = ChatModel(spec=parse_model_spec(f"openai:fake@{server.url}"), role="user")
        res = model.structured([("user", "What do you want?")], Said, retries=1)
    assert not res.ok and "not English" in res.error and res.raws == [bad, bad]
    good = json.dumps({"utterance": "I'd love a museum on the first day."})
    with serve(answer=lambda req: good) as server:
        model = ChatModel(spec=parse_model_spec(f"openai:fake@{server.url}"), role="user")
        assert model.structured([("user", "What do you want?")], Said, retries=1).ok


def test_an_echo_of_the_prompt_and_a_short_answer_fail_only_when_asked():
    prompt = ["You are a movie recommender chatting with a user."]
    assert "repeats its prompt" in answer_defect("Sure. You are a movie recommender chatting with a user.",
                                                 prompt_texts=prompt)
    assert answer_defect("Sure.", prompt_texts=prompt) is None
    assert "shorter than 3 words" in answer_defect("Sure.", min_words=3)


def test_a_nul_escaped_inside_json_is_caught_once_parsed():
    assert value_defect({"reason": "fine", "items": ["a", {"k": "b\x00c"}]}).startswith("control character")
    assert value_defect({"reason": "", "n": 3}) is None


class Script:
    """A chat model handle answering from a list, recording how often it was asked."""

    def __init__(self, answers, retry=None):
        self.answers, self.asked, self.retry = list(answers), 0, retry

    def invoke(self, messages, purpose="", **kw):
        self.asked += 1
        return self.answers.pop(0)


def test_a_failing_answer_is_asked_again_as_configured_and_every_raw_is_kept():
    from convsim.providers.retry import RetryPolicy
    model = Script(["\x00junk", "  ", "A fine answer."], retry=RetryPolicy(answer_attempts=3))
    got = checked_invoke(model, [("user", "hi")], purpose="t")
    assert got.ok and got.text == "A fine answer." and got.attempts == 3 and got.raws == ["\x00junk", "  "]
    model = Script(["\x00junk", "\x01again"], retry=RetryPolicy(answer_attempts=2))
    got = checked_invoke(model, [("user", "hi")], purpose="t")
    assert not got.ok and got.raws == ["\x00junk", "\x01again"] and model.asked == 2
    assert got.as_record()["raw"] == "\x01again" and "U+0001" in got.reason


class Verdict(BaseModel):
    correct: bool
    reason: str


def test_structured_refuses_a_nul_inside_valid_json_and_keeps_every_raw():
    nul = json.dumps({"correct": True, "reason": "fine\x00"})
    with serve(answer=lambda req: nul) as server:
        model = ChatModel(spec=parse_model_spec(f"openai:fake@{server.url}"), role="judge")
        res = model.structured([("user", "Is it right?")], Verdict, retries=1)
    assert not res.ok and "control character U+0000" in res.error and res.raws == [nul, nul]
    with serve(answer=lambda req: json.dumps({"correct": True, "reason": "fine"})) as server:  # the control
        model = ChatModel(spec=parse_model_spec(f"openai:fake@{server.url}"), role="judge")
        assert model.structured([("user", "Is it right?")], Verdict, retries=1).ok


def _crs_answer(request: dict) -> str:
    """Valid answers for every CRS role: a JSON verdict, the paraphrase's own message, a reply."""
    if request.get("response_format"):
        return json.dumps({"proactiveness": 3, "coherence": 4, "personalization": 2})
    prompt = request["messages"][-1]["content"]
    m = re.search(r"Message to rewrite:\n(.*?)\n\nRules:", prompt, re.S)
    if "What your message does:" in prompt:  # the user's goal prompt (prompts/user_goal.txt)
        return goal_answer(prompt)
    return m.group(1) if m else "You might enjoy Cast Away, a drama with Tom Hanks."


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _run(tmp_path, server, run_id, sessions):
    spec = f"openai:fake@{server.url}"
    cfg = config_from_dict({"graph": "crs_shift", "sessions": sessions, "seed": 3, "out_dir": str(tmp_path),
                            "run_id": run_id, "trace": False, "analysis": [],
                            "params": {"n_turns": 3, "topic_mode": "keyword"},
                            "models": {"crs": spec, "user": spec, "judge": spec},
                            "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30, "answer_attempts": 2}})
    run_dir = run(cfg, analyze=False)
    return read_jsonl(run_dir / "results.jsonl")  # lines split at "\n" alone: junk holds U+0085 and U+2028


def test_junk_on_every_call_for_recommender_user_and_judge_is_never_ok_and_every_raw_is_kept(tmp_path):
    with serve(faults={"junk": 1.0}, answer=_crs_answer) as server:
        records = _run(tmp_path, server, "junk", 3)
    assert len(records) == 3 and not [r for r in records if r["status"] == "ok"]
    assert {r["status"] for r in records} == {"simulator_failure"}  # the user failed first: not the CRS's
    kept = {s for r in records for s in _strings(r)}
    assert server.junk and set(server.junk) <= kept  # every raw answer, retries included
    for r in records:
        system = [e for e in r["transcript"] if e["speaker"] == "system"]
        assert system and all(e["meta"]["generation"]["ok"] is False for e in system)
        assert all(answer_defect(e["text"]) is None for e in r["transcript"])  # junk is never a turn
        assert {"user_model_failed", "judge_invalid"} <= {f["check"] for f in r["simulator_flags"]}
        assert r["dialogue_metrics"]["crs_generation_failures"] == len(system)


def test_nonsense_on_every_call_for_recommender_user_and_judge_is_never_ok_and_every_raw_is_kept(tmp_path):
    with serve(faults={"nonsense": 1.0}, answer=_crs_answer) as server:
        records = _run(tmp_path, server, "nonsense", 3)
    assert len(records) == 3 and not [r for r in records if r["status"] == "ok"]
    kept = {s for r in records for s in _strings(r)}
    assert server.nonsense and set(server.nonsense) <= kept  # every raw answer, retries included
    vocab = node_vocabulary()
    for r in records:
        turns = {e["text"] for e in r["transcript"]}
        assert not turns & set(NONSENSE)  # nonsense is never a turn
        assert all(answer_defect(t, language="en", vocabulary=vocab) is None for t in turns)
        system = [e for e in r["transcript"] if e["speaker"] == "system"]
        assert all(e["meta"]["generation"]["ok"] is False and "not English" in e["meta"]["generation"]["reason"]
                   for e in system)
        assert {"user_model_failed", "judge_invalid"} <= {f["check"] for f in r["simulator_flags"]}


@pytest.mark.parametrize("fault", ["nonsense", "junk"])
def test_nonsense_or_junk_from_the_recommender_alone_is_an_agent_failure(tmp_path, fault):
    with serve(answer=_crs_answer) as good, serve(faults={fault: 1.0}) as bad:
        cfg = config_from_dict({"graph": "crs_shift", "sessions": 2, "seed": 3, "out_dir": str(tmp_path),
                                "run_id": "crs", "trace": False, "analysis": [],
                                "params": {"n_turns": 2, "topic_mode": "keyword"},
                                "models": {"crs": f"openai:fake@{bad.url}", "user": f"openai:fake@{good.url}",
                                           "judge": f"openai:fake@{good.url}"},
                                "retry": {"attempts": 2, "initial_wait": 0, "timeout": 30}})
        records = read_jsonl(run(cfg, analyze=False) / "results.jsonl")
    assert {r["status"] for r in records} == {"agent_failure"}
    assert all({f["check"] for f in r["agent_flags"]} == {"crs_model_failed"} for r in records)
    assert set(getattr(bad, fault)) <= {s for r in records for s in _strings(r)}


def test_at_twenty_percent_faults_every_ok_session_holds_only_valid_turns(tmp_path):
    with serve(seed=5, faults={"500": 0.05, "garbage": 0.03, "junk": 0.06, "nonsense": 0.06},
               answer=_crs_answer) as server:
        records = _run(tmp_path, server, "mixed", 8)
    assert server.served["junk"] > 0 and server.served["500"] > 0 and server.served["nonsense"] > 0
    assert server.served["garbage"] > 0
    ok = [r for r in records if r["status"] == "ok"]
    assert ok, [r["status"] for r in records]  # else the check below holds vacuously
    vocab = node_vocabulary()
    for r in ok:  # the whole check: form and language
        assert all(answer_defect(e["text"], language="en", vocabulary=vocab) is None for e in r["transcript"]), \
            r["session_id"]
        assert not {e["text"] for e in r["transcript"]} & {GARBAGE, *NONSENSE}, r["session_id"]
    # a session that met junk or nonsense on every try of one answer is flagged, with it kept
    kept = {s for r in records for s in _strings(r)}
    assert set(server.junk) <= kept and set(server.nonsense) <= kept


def test_an_external_agent_or_user_answering_garbage_fails_that_side():
    """The same check guards answers from agents and users outside convsim (openevals callables)."""
    from convsim.contract.interop import openevals_app_node, openevals_user_node
    from convsim.errors import AgentError, SimulatorError
    state = {"session_id": "s", "turn": 1, "transcript": [{"turn": 1, "speaker": "user", "text": "hi"}]}
    with pytest.raises(AgentError, match=r"U\+0000.*raw: 'ok\\x00'"):
        openevals_app_node(lambda inputs, thread_id: {"role": "assistant", "content": "ok\x00"})(state)
    assert openevals_app_node(lambda inputs, thread_id: {"role": "assistant", "content": "Hello!"})(state)
    with pytest.raises(SimulatorError, match="empty answer"):
        openevals_user_node(["  "])({"session_id": "s", "transcript": []})
