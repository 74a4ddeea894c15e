"""`convsim trace` and `convsim fork` on a real run: filters, --at, --json, one-line errors."""
import json

import pytest
from typer.testing import CliRunner

from convsim import ExperimentConfig, run
from convsim.cli import app

cli = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    cfg = ExperimentConfig(name="hello_chat", graph="hello_chat", sessions=2, checkpoint=True,
                           out_dir=str(out), run_id="r", analysis=[])
    return run(cfg, analyze=False)


def _json(args):
    res = cli.invoke(app, ["trace", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_trace_filters(run_dir):
    everything = _json([str(run_dir), "s000"])["steps"]
    assert [s["node"] for s in everything[:4]] == ["user", "agent", "evaluate_turn", "user"]
    agent = _json([str(run_dir), "s000", "--node", "agent"])["steps"]
    assert [s["node"] for s in agent] == ["agent"] * 3
    turn2 = _json([str(run_dir), "s000", "--turn", "2"])["steps"]
    assert [s["node"] for s in turn2] == ["user", "agent", "evaluate_turn"] and {s["turn"] for s in turn2} == {2}
    # a dotted path: only the step that set the 4th utterance's text, with just that change
    text = _json([str(run_dir), "s000", "--key", "transcript.3.text"])["steps"]
    assert len(text) == 1 and text[0]["node"] == "agent" and text[0]["step"] == 4
    assert text[0]["changed"]["transcript.3.text"]["before"] is None
    assert "is" in text[0]["changed"]["transcript.3.text"]["after"]
    turn_key = _json([str(run_dir), "s000", "--key", "turn", "--node", "user"])["steps"]
    assert [(s["changed"]["turn"]["before"], s["changed"]["turn"]["after"]) for s in turn_key] == [(0, 1), (1, 2), (2, 3)]


def test_trace_at_prints_the_state(run_dir):
    res = cli.invoke(app, ["trace", str(run_dir), "s000", "--at", "4", "--json"])
    state = json.loads(res.stdout)
    assert state["turn"] == 2 and len(state["transcript"]) == 4 and len(state["turn_metrics"]) == 1
    res = cli.invoke(app, ["trace", str(run_dir), "s000", "--at", "2", "--key", "turn_metrics.0.correct", "--json"])
    assert json.loads(res.stdout) == {"turn_metrics.0.correct": 1.0}


def test_trace_timeline_renders(run_dir):
    res = cli.invoke(app, ["trace", str(run_dir), "s001", "--turn", "1"])
    assert res.exit_code == 0
    assert "evaluate_turn" in res.stdout and "3 of 10 steps" in res.stdout


@pytest.mark.parametrize("args,needle", [
    (["s999"], "no trace for session"),
    (["s000", "--node", "nosuch"], "no step of node"),
    (["s000", "--at", "500"], "--at must be in"),
    (["s000", "--at", "1", "--key", "nosuch.key"], "no key"),
])
def test_trace_bad_input_is_one_line_exit_2(run_dir, args, needle):
    res = cli.invoke(app, ["trace", str(run_dir), *args])
    assert res.exit_code == 2
    assert needle in res.output and "Traceback" not in res.output


def test_trace_unknown_run_exit_2(tmp_path):
    res = cli.invoke(app, ["trace", str(tmp_path / "nope"), "s000"])
    assert res.exit_code == 2 and "not a run directory" in res.output


def test_fork_command(run_dir):
    res = cli.invoke(app, ["fork", str(run_dir), "s000", "--step", "3", "--set", "n_turns=2",
                           "--run-id", "cli_fork", "--no-analysis"])
    assert res.exit_code == 0, res.output
    assert "diverges at turn 3" in res.stdout
    fork_trace = _json([str(run_dir.parent / "cli_fork"), "s000"])
    assert fork_trace["fork"]["step"] == 3 and fork_trace["steps"][-1]["node"] == "evaluate_dialogue"
    res = cli.invoke(app, ["fork", str(run_dir), "s000", "--step", "-1", "--no-analysis"])
    assert res.exit_code == 2


def test_trace_with_several_variants_needs_variant(run_dir, tmp_path):
    import shutil
    two = tmp_path / "two"
    shutil.copytree(run_dir, two)
    shutil.copytree(two / "traces" / "default", two / "traces" / "other")
    res = cli.invoke(app, ["trace", str(two), "s000"])
    assert res.exit_code == 2 and "choose one with --variant" in res.output
    assert _json([str(two), "s000", "--variant", "other", "--turn", "1"])["steps"][0]["node"] == "user"
