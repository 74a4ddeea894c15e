"""A simulator judge (model role "simulator_judge") whose answer cannot be read did not check the
simulated user. It flags nothing (the session stays ``ok``: a broken checker must not drop
sessions), but it is counted: the dialogue metric ``simulator_judge_failed`` is 1 (0 when the judge
answered), the session's fidelity figure ``simulator_judge_flags`` is None (unknown, not "0
problems"), the record's ``simulator_judge.flags`` is None (never ``[]``, which reads as clean), and
the dataset summary counts the failures. Before, the audit (gemma3-270m as the judge) found both
sessions ``ok``, ``flags: []`` and 0 everywhere in summary.json: the failure showed only in the
model-usage table."""
import json

from langchain_core.messages import AIMessage

import convsim.providers.models as models
from convsim.agents.crs.fidelity import crs_simulator_checks, llm_simulator_flags
from convsim import run
from convsim.config import config_from_dict
from convsim.evaluation.crs.nodes import TASSettings

GARBAGE_OPENING = "I feel like"  # one of the simulator's three openings, drawn per session
CLEAN = ('{"broke_persona": false, "ended_early": false, "contradicted_profile": false, '
         '"turn": null, "reason": ""}')


class SimulatorJudgeDouble:
    """Answers garbage (what gemma3-270m did: prose about the task) for the dialogues that open with
    GARBAGE_OPENING, a clean verdict otherwise."""

    def invoke(self, messages, **kwargs):
        if f"USER: {GARBAGE_OPENING}" in messages[0].content:
            return AIMessage('{\n"description": "The simulator judge answers whether the user broke persona"}')
        return AIMessage(CLEAN)


class StructuredDouble:
    """The ChatModel.structured interface, answering one fixed result."""
    is_none = False

    def __init__(self, ok, raw):
        self.ok, self.raw = ok, raw

    def structured(self, messages, schema, purpose=""):
        from types import SimpleNamespace
        value = schema.model_validate_json(self.raw) if self.ok else None
        return SimpleNamespace(ok=self.ok, value=value, raw=self.raw, error=None if self.ok else "not JSON")


def test_a_failed_judge_answer_is_not_an_empty_flag_list():
    from convsim.evaluation.crs.nodes import simulator_judge_outcome  # new: imported here so the other tests run on old code
    transcript = [{"turn": 1, "speaker": "user", "text": "A comedy please.", "meta": {}},
                  {"turn": 1, "speaker": "system", "text": "Try Airplane!", "meta": {}}]
    settings = TASSettings()
    failed = llm_simulator_flags(StructuredDouble(False, "The user is fine."), transcript)
    clean = llm_simulator_flags(StructuredDouble(True, CLEAN), transcript)
    assert failed["failed"] is True and failed["flags"] is None and failed["raw"] == "The user is fine."
    assert clean == {"flags": [], "failed": False, "raw": CLEAN}
    assert simulator_judge_outcome({"simulator_judge": failed}, settings, None)[0] == \
        {"simulator_judge_failed": 1, "simulator_judge_flags": None}
    assert simulator_judge_outcome({"simulator_judge": clean}, settings, None)[0] == \
        {"simulator_judge_failed": 0, "simulator_judge_flags": 0}
    assert simulator_judge_outcome({"simulator_judge": None}, settings, None) == ({}, {})  # no judge: nothing
    found = {"flags": [{"check": "_llm_check_persona"}, {"check": "_llm_check_ending"}], "failed": False}
    assert simulator_judge_outcome({"simulator_judge": found}, settings, None)[0] == \
        {"simulator_judge_failed": 0, "simulator_judge_flags": 2}  # the problems the judge found
    # still no flag: the session is not dropped for the checker's failure
    assert crs_simulator_checks({"transcript": transcript, "simulator_judge": failed}) == []


def test_a_simulator_judge_answering_garbage_is_counted_and_its_figures_are_missing(tmp_path, monkeypatch):
    real = models._make_backend
    monkeypatch.setattr(models, "_make_backend",
                        lambda spec, *a: SimulatorJudgeDouble() if spec.model == "sim-judge" else real(spec, *a))
    monkeypatch.setattr(models, "_BACKENDS", {})
    cfg = config_from_dict({
        "graph": "crs_shift", "sessions": 8, "seed": 7, "out_dir": str(tmp_path), "run_id": "sj",
        "trace": False, "analysis": [], "params": {"n_turns": 3, "judge": False, "topic_mode": "keyword"},
        "variants": [{"name": "v", "models": {}}],
        "models": {"crs": "none", "user": "none", "judge": "none", "simulator_judge": "ollama:sim-judge"}})
    run_dir = run(cfg, analyze=False)
    recs = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    garbage = {r["session_id"] for r in recs if r["transcript"][0]["text"].startswith(GARBAGE_OPENING)}
    assert garbage and len(garbage) < len(recs)
    for r in recs:
        dm, failed = r["dialogue_metrics"], r["session_id"] in garbage
        assert r["status"] == "ok" and r["simulator_flags"] == []  # flags nothing, as intended
        assert dm["simulator_judge_failed"] == int(failed)  # 0 -> 1
        assert dm["simulator_judge_flags"] == (None if failed else 0)  # missing, not 0
        assert r["simulator_judge"]["flags"] == (None if failed else [])  # never [] for a failure
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]["v"]
    assert summary["metrics"]["simulator_judge_failed"]["n"] == len(recs)
    assert summary["metrics"]["simulator_judge_failed"]["mean"] == len(garbage) / len(recs)
    assert summary["metrics"]["simulator_judge_flags"]["n"] == len(recs) - len(garbage)
    assert summary["dataset"]["simulator_judge_failed_total"] == len(garbage)
    assert summary["dataset"]["simulator_judge_sessions"] == len(recs)
    # the report's Simulator fidelity section says so (before: "No session was flagged", read as clean)
    from convsim.evaluation.reporting.report import build_report
    html = build_report(run_dir).read_text()
    section = html[html.index('id="fidelity"'):]
    assert f"v: the simulator judge could not check {len(garbage)} session(s)" in section
    assert "No session was flagged" not in section


def test_without_a_simulator_judge_nothing_is_reported(tmp_path):
    cfg = config_from_dict({
        "graph": "crs_shift", "sessions": 1, "seed": 7, "out_dir": str(tmp_path), "run_id": "none",
        "trace": False, "analysis": [], "params": {"n_turns": 2, "judge": False, "topic_mode": "keyword"},
        "models": {"crs": "none", "user": "none", "judge": "none"}})
    run_dir = run(cfg, analyze=False)
    (r,) = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert "simulator_judge_failed" not in r["dialogue_metrics"]
    summary = json.loads((run_dir / "summary.json").read_text())["variants"]
    (v,) = summary.values()
    assert v["dataset"]["simulator_judge_failed_total"] is None and v["dataset"]["simulator_judge_sessions"] == 0
