"""crs_shift's recommender slot through the command line: the researcher's recommender replies;
the films it recommends are the ids it reports (``recommended_ids``), else the titles read from its
reply through the catalog, as ``convsim eval`` reads an imported turn; a built-in named as an
agent spec runs the built-in."""
import json
import textwrap

import pytest

from cli_helpers import cli

RECOMMENDERS = textwrap.dedent('''
    def from_text(inputs):
        return "You might enjoy The Matrix (1999) or Toy Story (1995), and also Zorblax Returns."

    def reporting(inputs):
        return {"content": "Here is one for you.", "structured": {"recommended_ids": ["Toy Story", "no-such-film"]}}
''')


@pytest.fixture
def recommenders(tmp_path):
    path = tmp_path / "my_crs.py"
    path.write_text(RECOMMENDERS)
    return path


def _run(tmp_path, run_id, spec):
    code, out, exc = cli("run", "crs_shift", "--sessions", 1, "--set", "n_turns=2", "--agent", f"crs={spec}",
                         "--out", tmp_path / "runs", "--run-id", run_id, "-q", "--no-analysis")
    assert code == 0, (out, exc)
    rec = json.loads((tmp_path / "runs" / run_id / "results.jsonl").read_text().splitlines()[0])
    assert rec["status"] == "ok", rec["error"]
    return rec, [t for t in rec["transcript"] if t["speaker"] == "system"]


def test_films_are_read_from_the_reply_when_the_agent_reports_none(tmp_path, recommenders):
    rec, system = _run(tmp_path, "text", f"{recommenders}:from_text")
    assert rec["agents"] == {"crs": f"{recommenders}:from_text"}
    meta = system[0]["meta"]
    assert meta["rec_ids_source"] == "reply text" and meta["structured"] == {}
    assert meta["mentioned_ids"] == meta["rec_ids"] == ["The Matrix", "Toy Story"]
    assert meta["off_catalog_titles"] == ["Zorblax Returns"]
    assert rec["turn_metrics"][0]["n_recommended"] == 2 and rec["turn_metrics"][0]["off_catalog_titles"] == 1


def test_reported_ids_are_the_recommendation(tmp_path, recommenders):
    rec, system = _run(tmp_path, "ids", f"{recommenders}:reporting")
    meta = system[0]["meta"]
    assert meta["rec_ids_source"] == "agent" and meta["rec_ids"] == meta["mentioned_ids"] == ["Toy Story"]
    assert meta["unknown_ids"] == ["no-such-film"]  # kept, never scored as a film
    assert meta["structured"] == {"recommended_ids": ["Toy Story", "no-such-film"]}


def test_a_builtin_named_as_a_spec_runs_the_builtin(tmp_path):
    rec, system = _run(tmp_path, "echo", "echo")
    assert rec["agents"] == {"crs": "echo"} and rec["params"]["crs_agent"] == "echo"
    assert "agent_spec" not in system[0]["meta"]  # the scenario's own recommender ran
