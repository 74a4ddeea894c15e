"""The command line: bad input gives one clear line and exit code 2."""
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from convsim.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def invoke(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "convsim.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                                "HOME": str(ROOT)})


def assert_clean_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr


def test_unknown_graph():
    assert_clean_error(invoke("run", "no_such_graph"), "unknown graph", "no_such_graph")


def test_bad_model_spec(tmp_path):
    assert_clean_error(invoke("run", "hello_chat", "--model", "agent=gpt5:whatever", "--out", str(tmp_path)),
                       "bad model spec", "models.agent")


def test_bad_config_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("graph: hello_chat\nsessions: [1, 2\n")
    assert_clean_error(invoke("run", str(bad)), "invalid YAML", str(bad))


def test_bad_config_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("graph: hello_chat\nsessions: many\n")
    assert_clean_error(invoke("run", str(bad)), "sessions", str(bad))
    bad.write_text("graph: hello_chat\nsesions: 3\n")
    assert_clean_error(invoke("run", str(bad)), "sesions")


def test_list_and_draw():
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0 and "hello_chat" in res.output
    res = runner.invoke(app, ["draw", "hello_chat"])
    assert res.exit_code == 0
    assert "evaluate_turn" in res.output and "graph TD" in res.output


def test_run_prints_summary(tmp_path):
    res = runner.invoke(app, ["run", "hello_chat", "--sessions", "2", "--out", str(tmp_path), "--run-id", "x",
                              "--no-analysis"])
    assert res.exit_code == 0, res.output
    assert "accuracy" in res.output
    assert (tmp_path / "x" / "results.jsonl").exists()
