"""The library a researcher installs: build the wheel, install it into a fresh virtualenv, and from
an empty directory list the scenarios, run every shipped graph for one short session, run a config
by name, and run a user's own graph file written there.

The virtualenv sees this interpreter's site-packages for the dependencies (installing LangGraph,
numpy and the rest again would only test the package index), but convsim itself comes from the
wheel: the test checks the import path, and that no other top-level name (``agents``,
``evaluation``, ``catalog``, ``graphs``) is installed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# one short session of each shipped graph, with the params that keep it short
SHORT = {
    "hello_chat": ["--set", "n_turns=1"],
    "crs_shift": ["--set", "n_turns=3"],
    "customer_service": [],
    "group_planning": [],
    "course_retrieval": [],
}

USER_GRAPH = '''"""A user's own graph file, outside any convsim folder: hello_chat with another agent."""
from convsim.graphs.hello_chat import *  # noqa: F401,F403
from convsim.graphs import hello_chat as _base


def build(params):
    def shout(state):
        question = state["transcript"][-1]["text"]
        return {"transcript": [{"role": "agent", "text": question.upper()}]}
    return _base.build(params, agent_node=shout)


graph = build(Params()).compile()
'''


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(ROOT)], capture_output=True, text=True, cwd=base)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(dist.glob("convsim-*.whl"))
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    inst = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
                           str(wheel)], capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    return {"python": py, "wheel": wheel, "site": env_dir}


def _run(venv, *args, cwd, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["COLUMNS"] = "120"
    return subprocess.run([str(venv["python"]), *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def test_the_wheel_installs_one_top_level_name(venv):
    names = zipfile.ZipFile(venv["wheel"]).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"convsim", f"{venv['wheel'].name.split('-')[0]}-{venv['wheel'].name.split('-')[1]}.dist-info"}
    # the scenarios, their configs, prompts and shipped data are in it
    for part in ("convsim/graphs/crs_shift.py", "convsim/configs/crs_shift.yaml", "convsim/prompts/crs_respond.txt",
                 "convsim/catalog/data/movies.json", "convsim/evaluation/reporting/templates/report.html.j2"):
        assert part in names, part
    # every package folder of the repository is in the wheel
    for folder in ("convsim", "agents", "evaluation", "catalog"):
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.relative_to(ROOT).as_posix()
            inside = rel if folder == "convsim" else f"convsim/{rel}"
            assert inside in names, inside


def test_old_top_level_names_do_not_import(venv, tmp_path):
    for name in ("agents", "evaluation", "catalog", "graphs"):
        done = _run(venv, "-c", f"import {name}", cwd=tmp_path)
        assert done.returncode != 0, f"import {name} worked in the fresh virtualenv"
    where = _run(venv, "-c", "import convsim, convsim.agents.crs; print(convsim.__file__); "
                 "print(convsim.agents.crs.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(str(venv["site"]) in line for line in where.stdout.split()), where.stdout


def test_every_shipped_graph_runs_from_an_empty_directory(venv, tmp_path):
    listed = _run(venv, "-m", "convsim", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for graph in SHORT:
        assert graph in listed.stdout
    assert "crs_shift.yaml" in listed.stdout
    for graph, extra in SHORT.items():
        done = _run(venv, "-m", "convsim", "run", graph, "--sessions", "1", "--no-analysis", "-q",
                    "--out", "runs", "--run-id", graph, *extra, cwd=tmp_path)
        assert done.returncode == 0, (graph, done.stdout[-1500:], done.stderr[-1500:])
        assert (tmp_path / "runs" / graph / "results.jsonl").is_file(), graph
    assert not (tmp_path / "graphs").exists()


def test_a_config_by_name_and_a_user_graph_file_run_from_any_directory(venv, tmp_path):
    done = _run(venv, "-m", "convsim", "run", "crs_shift.yaml", "--sessions", "1", "--set", "n_turns=2",
                "--no-analysis", "-q", "--run-id", "cfg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1500:]
    assert (tmp_path / "runs" / "cfg" / "results.jsonl").is_file()
    (tmp_path / "my_agent.py").write_text(USER_GRAPH, encoding="utf-8")
    done = _run(venv, "-m", "convsim", "run", "my_agent.py", "--sessions", "1", "--no-analysis", "-q",
                "--out", "elsewhere", "--run-id", "mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1500:]
    text = (tmp_path / "elsewhere" / "mine" / "results.jsonl").read_text(encoding="utf-8")
    assert '"agent"' in text
