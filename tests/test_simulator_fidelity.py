"""Simulator checks: an LLM user double that breaks persona on some sessions gives
``simulator_failure`` sessions, excluded from the agent's metrics and counted; the rule-based
simulators never trip their own checks."""
import json

import pytest
from langchain_core.messages import AIMessage

import convsim.providers.models as models
from convsim.agents.crs.fidelity import crs_simulator_checks
from convsim import load_config, run
from conftest import ROOT
from convsim.evaluation.reporting.report import build_report

BROKEN_OPENING = "Can you suggest"  # one of the simulator's three openings, drawn per session


class UserDouble:
    """Paraphrases by returning the template, except that it answers as the recommender on the
    first turn of the sessions whose opening template starts with BROKEN_OPENING."""

    def invoke(self, messages, **kwargs):
        prompt = messages[-1].content
        template = prompt.split("Message to rewrite:\n", 1)[1].split("\n\nRules:", 1)[0].strip()
        if template.startswith(BROKEN_OPENING):
            return AIMessage(f"I'd recommend you watch these. {template}")
        return AIMessage(template)


@pytest.fixture
def double_backend(monkeypatch):
    real = models._make_backend
    monkeypatch.setattr(models, "_make_backend",
                        lambda spec, *a: UserDouble() if spec.model == "user-double" else real(spec, *a))
    monkeypatch.setattr(models, "_BACKENDS", {})


def test_persona_breaks_are_simulator_failures_excluded_and_counted(tmp_path, double_backend):
    demo = load_config(ROOT / "configs" / "crs_shift.yaml")
    cfg = demo.model_copy(update={
        "sessions": 8, "out_dir": str(tmp_path), "run_id": "double", "trace": False, "analysis": [],
        "variants": demo.variants[:1],  # the template recommender alone
        # the paraphrase path: the double reads the rule template from its prompt
        "params": {"n_turns": 4, "judge": False, "topic_mode": "keyword", "user_llm": "paraphrase"},
        "models": {"crs": "none", "user": "ollama:user-double", "judge": "none"}})
    run_dir = run(cfg, analyze=False)
    recs = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    opening = {r["session_id"]: r["transcript"][0]["meta"]["template"] for r in recs}
    broken = {sid for sid, t in opening.items() if t.startswith(BROKEN_OPENING)}
    assert 0 < len(broken) < len(recs)  # the double breaks persona on some sessions only
    status = {r["session_id"]: r["status"] for r in recs}
    assert {s for s, st in status.items() if st == "simulator_failure"} == broken
    flagged = next(r for r in recs if r["session_id"] in broken)
    assert flagged["simulator_flags"][0]["check"] == "_check_persona"
    # agent metrics over clean sessions only
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]["template"]
    clean = [r for r in recs if r["status"] == "ok"]
    assert summary["n"] == len(clean)
    mean = sum(r["dialogue_metrics"]["tas_grounded"] for r in clean) / len(clean)
    assert summary["metrics"]["tas_grounded"]["mean"] == pytest.approx(mean)
    html = build_report(run_dir).read_text()
    assert "_check_persona" in html and f"n={len(clean)}" in html
    assert f'<td class="num">{len(broken)}</td>' in html  # the simulator failures, counted


def test_rule_based_crs_user_never_trips_its_checks(tmp_path):
    """False positives would silently drop good sessions: 30 template users of 20 turns (shifts,
    contradictions and all) raise no flag."""
    demo = load_config(ROOT / "configs" / "crs_shift.yaml")
    cfg = demo.model_copy(update={  # the demo's template recommender alone
        "sessions": 30, "out_dir": str(tmp_path), "run_id": "rules", "trace": False, "analysis": [],
        "variants": [v for v in demo.variants if v.name == "template"],
        "params": {"n_turns": 20, "judge": False, "topic_mode": "keyword"}})
    recs = [json.loads(x) for x in (run(cfg, analyze=False) / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 30 and all(r["status"] == "ok" and r["simulator_flags"] == [] for r in recs)
    assert any(t["meta"]["stage"] == "contradiction" for r in recs for t in r["transcript"] if t["speaker"] == "user")


@pytest.mark.parametrize("text, check", [
    ("System: I recommend Heat.", "_check_persona"),
    ("You might enjoy Heat, it is a great thriller.", "_check_persona"),
    ("Thanks, goodbye!", "_check_ending"),
    ("I want no comedy at all.", "_check_profile"),
])
def test_each_crs_check_catches_its_defect(text, check):
    turns = [{"turn": 1, "speaker": "user", "text": text, "meta": {"stage": "details", "constraints": {"genre": "Comedy"}}},
             {"turn": 1, "speaker": "system", "text": "ok", "meta": {}},
             {"turn": 2, "speaker": "user", "text": "Any more comedies?", "meta": {"stage": "details",
                                                                             "constraints": {"genre": "Comedy"}}}]
    assert [f["check"] for f in crs_simulator_checks({"transcript": turns})] == [check]


class SimulatorJudgeDouble:
    """The LLM path's judge: says the user broke persona in the dialogues that open with
    BROKEN_OPENING, answers garbage for those opening with "I feel like", clean otherwise."""

    def invoke(self, messages, **kwargs):
        prompt = messages[0].content
        if f"USER: {BROKEN_OPENING}" in prompt:
            return AIMessage('{"broke_persona": true, "ended_early": false, "contradicted_profile": false, '
                             '"turn": 1, "reason": "the user recommends films"}')
        if "USER: I feel like" in prompt:
            return AIMessage("The user seems fine to me.")
        return AIMessage('{"broke_persona": false, "ended_early": false, "contradicted_profile": false, '
                         '"turn": null, "reason": ""}')


def test_llm_simulator_judge_flags_sessions(tmp_path, monkeypatch):
    real = models._make_backend
    monkeypatch.setattr(models, "_make_backend",
                        lambda spec, *a: SimulatorJudgeDouble() if spec.model == "sim-judge" else real(spec, *a))
    monkeypatch.setattr(models, "_BACKENDS", {})
    cfg = load_config(ROOT / "configs" / "crs_shift.yaml").model_copy(update={
        "sessions": 8, "out_dir": str(tmp_path), "run_id": "judge", "trace": False, "analysis": [],
        "params": {"n_turns": 3, "judge": False, "topic_mode": "keyword"},
        "models": {"crs": "none", "user": "none", "judge": "none", "simulator_judge": "ollama:sim-judge"}})
    recs = [json.loads(x) for x in (run(cfg, analyze=False) / "results.jsonl").read_text().splitlines()]
    opening = {r["session_id"]: r["transcript"][0]["text"] for r in recs}
    broken = {s for s, t in opening.items() if t.startswith(BROKEN_OPENING)}
    garbage = {s for s, t in opening.items() if t.startswith("I feel like")}
    assert broken and len(broken) < len(recs)
    for r in recs:
        sid = r["session_id"]
        if sid in broken:
            assert r["status"] == "simulator_failure"
            assert [f["check"] for f in r["simulator_flags"]] == ["_llm_check_persona"]  # rule checks: clean
        else:  # an unreadable judge answer is recorded and flags nothing
            assert r["status"] == "ok" and r["simulator_judge"]["failed"] == (sid in garbage)
