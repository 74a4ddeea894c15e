"""Scripted then simulated: the first k turns are the prefix verbatim, the simulator continues,
and the metrics cover the whole session; openevals' app/user callables work with a prefix."""
import json

import pytest

from convsim import ConvsimError, ExperimentConfig, load_config, run
from convsim.running.prefix import attach_prefixes, load_prefixes, prefixed_app, prefixed_user
from conftest import ROOT

CRS_PREFIX = ROOT / "configs" / "prefixes" / "crs_openings.json"
MULTIWOZ = ROOT.parent / "shared" / "data" / "multiwoz"


def _records(run_dir):
    return [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]


def _assert_prefix_then_simulated(rec, prefix_dialogue: list[dict], k: int):
    scripted = [t for t in rec["transcript"] if t["turn"] <= k]
    said = [(t["speaker"], t["text"]) for t in scripted]
    expected = [("user" if t["speaker"] == "user" else "system", t.get("text", t.get("utterance")))
                for t in prefix_dialogue[:2 * k]]
    assert said == expected  # the first k turns are the prefix verbatim
    later = [t for t in rec["transcript"] if t["turn"] > k]
    assert later and not any((t.get("meta") or {}).get("scripted") for t in later)  # the simulator continues
    assert all((t.get("meta") or {}).get("scripted") for t in scripted)


def test_crs_session_from_a_hand_written_prefix(tmp_path):
    cfg = load_config(ROOT / "configs" / "crs_shift.yaml").model_copy(update={
        "sessions": 2, "out_dir": str(tmp_path), "run_id": "p", "trace": False, "analysis": [],
        "params": {"n_turns": 5, "judge": False, "topic_mode": "keyword"},
        "prefix": {"file": str(CRS_PREFIX), "turns": 2}})
    recs = {r["session_id"]: r for r in _records(run(cfg, analyze=False))}
    dialogues = json.loads(CRS_PREFIX.read_text())
    for i, sid in enumerate(sorted(recs)):
        rec = recs[sid]
        assert rec["status"] == "ok" and rec["prefix"]["dialogue_id"] == dialogues[i]["dialogue_id"]
        _assert_prefix_then_simulated(rec, dialogues[i]["turns"], 2)
        # the simulator's own words from turn 3 on (rule-based: its template)
        assert all(t["text"] == t["meta"]["template"] for t in rec["transcript"] if t["turn"] > 2 and t["speaker"] == "user")
        assert [m["turn"] for m in rec["turn_metrics"]] == [1, 2, 3, 4, 5]  # metrics over the whole session
        assert rec["dialogue_metrics"]["tas_grounded"] is not None


@pytest.mark.skipif(not (MULTIWOZ / "dialogues_unified_sample.json").exists(), reason="MultiWOZ sample not found")
def test_service_session_from_a_multiwoz_prefix(tmp_path):
    source = MULTIWOZ / "dialogues_unified_sample.json"
    cfg = ExperimentConfig(name="sp", graph="customer_service", sessions=2, seed=7, trace=False, analysis=[],
                           params={"mode": "simulate", "n_sessions": 2, "max_turns": 12},
                           out_dir=str(tmp_path), run_id="sp", prefix={"file": str(source), "turns": 2})
    recs = sorted(_records(run(cfg, analyze=False)), key=lambda r: r["session_id"])
    dialogues = json.loads(source.read_text())
    for i, rec in enumerate(recs):
        assert rec["status"] == "ok"
        _assert_prefix_then_simulated(rec, dialogues[i]["turns"], 2)
        n_user = sum(t["speaker"] == "user" for t in rec["transcript"])
        assert len(rec["turn_metrics"]) == n_user > 2  # every turn scored, scripted ones included
        # the scripted turns carry MultiWOZ's gold annotation, as in replay
        assert rec["transcript"][0]["meta"]["gold_domain"] is not None
        assert "task_success" in rec["dialogue_metrics"]


def test_prefix_file_errors_name_the_dialogue(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"dialogue_id": "short", "turns": [{"speaker": "user", "text": "hi"}]}) + "\n")
    with pytest.raises(ConvsimError) as err:
        load_prefixes(path, 2)
    assert err.value.record == "short" and err.value.field == "prefix_turns"
    with pytest.raises(ConvsimError):
        load_prefixes(tmp_path / "missing.json", 1)


def test_sessions_may_carry_their_own_prefix():
    own = {"source": "sessions", "dialogue_id": "x", "turns": 1, "pairs": [{"user": "hello", "system": None}]}
    inits = [{"session_id": "a", "prefix": own}, {"session_id": "b"}, {"session_id": "c"}]
    out = list(attach_prefixes(inits, {"file": str(CRS_PREFIX), "turns": 1}))
    assert out[0]["prefix"] is own
    assert [o["prefix"]["dialogue_id"] for o in out[1:]] == ["opening-drama", "opening-comedy"]  # i-th, cycling


def test_openevals_callables_with_a_prefix():
    pytest.importorskip("openevals")
    from openevals.simulators import run_multiturn_simulation
    from convsim.contract.interop import GraphApp
    pairs = [{"user": "What is the largest planet?", "system": "Scripted: Jupiter, of course."}]
    app = GraphApp("hello_chat", params={"n_turns": 3})
    app.initial_state = {"session_id": "x", "turn": 0,
                         "questions": ["largest planet", "author of hamlet", "speed of light"]}
    result = run_multiturn_simulation(app=prefixed_app(app, pairs),
                                      user=prefixed_user(["Who is the author of hamlet?", "What is love?"], pairs),
                                      max_turns=3, thread_id="pre-1")
    traj = [(m["role"], m["content"]) for m in result["trajectory"]]
    assert traj[:2] == [("user", pairs[0]["user"]), ("assistant", pairs[0]["system"])]
    assert traj[2:] == [("user", "Who is the author of hamlet?"),
                        ("assistant", "The author of hamlet is William Shakespeare."),
                        ("user", "What is love?"), ("assistant", "I do not know.")]
    assert len(app.state("pre-1")["turn_metrics"]) == 3  # the graph scored the scripted turn too


@pytest.mark.slow
def test_cli_run_with_a_prefix(tmp_path):
    import subprocess
    import sys
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "convsim", "run", "crs_shift", "--sessions", "1", "--set", "n_turns=3",
            "--set", "judge=false", "--set", "topic_mode=keyword", "--no-analysis", "--no-trace", "-q",
            "--out", str(tmp_path), "--prefix", str(CRS_PREFIX)]
    subprocess.run(base + ["--run-id", "ok", "--prefix-turns", "2"], env=env, cwd=ROOT, check=True)
    (rec,) = _records(tmp_path / "ok")
    assert rec["transcript"][0]["text"] == json.loads(CRS_PREFIX.read_text())[0]["turns"][0]["text"]
    assert rec["prefix"]["turns"] == 2 and len(rec["turn_metrics"]) == 3
    bad = subprocess.run(base + ["--run-id", "bad", "--prefix-turns", "3"], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "prefix_turns" in bad.stderr + bad.stdout  # the openings have 2 user turns


@pytest.mark.parametrize("turns,field,words", [
    ([{"speaker": "user", "text": "hi"}, {"speaker": "martian", "text": "beep"}], "turns[1].speaker", "unknown speaker"),
    ([{"speaker": "system", "text": "Hello, how can I help?"}, {"speaker": "user", "text": "hi"}],
     "turns[0].speaker", "opens with a system turn"),
    ([{"speaker": "user", "text": "hi"}, {"speaker": "system", "text": "a"}, {"speaker": "system", "text": "b"}],
     "turns[2].speaker", "two system turns in a row"),
])
def test_a_prefix_dialogue_that_is_not_user_then_reply_is_refused(tmp_path, turns, field, words):
    # before: an unknown speaker was taken as the system, an opening system turn and a second reply
    # were dropped without a word
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"dialogue_id": "d1", "turns": turns}]))
    with pytest.raises(ConvsimError, match=words) as err:
        load_prefixes(path, 1)
    assert (err.value.record, err.value.field) == ("d1", field) and err.value.file == str(path)


def test_a_prefix_dialogue_id_that_appears_twice_is_refused(tmp_path):
    path = tmp_path / "p.json"
    one = {"dialogue_id": "same", "turns": [{"speaker": "user", "text": "hi"}, {"speaker": "agent", "text": "hello"}]}
    path.write_text(json.dumps([one, one]))
    with pytest.raises(ConvsimError, match="appears twice") as err:
        load_prefixes(path, 1)
    assert err.value.field == "dialogue_id"
    path.write_text(json.dumps([one, {**one, "dialogue_id": "other"}]))
    assert [p["pairs"][0]["system"] for p in load_prefixes(path, 1)] == ["hello", "hello"]  # agent is a system
