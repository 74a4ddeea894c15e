"""The report's numbers are the run's: status counts equal summary.json's for a run with errors,
an interrupted run says what was planned and what landed, metrics with no finite value are shown
as such (findings of a browser audit of report.html)."""

import json
import re

from convsim.config import config_from_dict
from convsim.runner import run
from evaluation.report import build_report


def _status_table(html: str) -> dict[str, list[int]]:
    table = re.search(r'<table id="status-table">(.*?)</table>', html, re.S).group(1)
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


def test_errored_sessions_are_counted_once_as_in_summary_json(tmp_path, monkeypatch):
    """code_error sessions are in results.jsonl and errors.jsonl: the report counted both."""
    from convsim.graphfile import load_graph_module
    module = load_graph_module("hello_chat")
    original = module.agent

    def agent(state, runtime):
        if runtime.context.params.n_turns == 2 or state["session_id"] == "s001":
            raise KeyError("a bug in graph code")
        return original(state, runtime)
    monkeypatch.setattr(module, "agent", agent)
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 3, "out_dir": str(tmp_path), "run_id": "bug",
                            "trace": False, "analysis": [],
                            "variants": [{"name": "fine"}, {"name": "broken", "params": {"n_turns": 2}}]})
    run_dir = run(cfg, analyze=False)
    assert len((run_dir / "errors.jsonl").read_text().splitlines()) == 4  # s001 of fine, all 3 of broken
    summary = json.loads((run_dir / "summary.json").read_text())
    html = build_report(run_dir).read_text()
    table = _status_table(html)
    for v, d in summary["variants"].items():
        c = d["status_counts"]
        assert table[v] == [c["sessions"], c["ok"], c["agent_failure"], c["simulator_failure"], d["errors"]], v
    assert table["fine"][-1] == 1 and table["broken"] == [3, 0, 0, 0, 3]
    assert "3 error(s)" in html and "6 error(s)" not in html  # the lede of the variant with no clean session
