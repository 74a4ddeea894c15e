"""One conformance test, run over every graph file in graphs/: the contract of docs/ENGINE_API.md."""
import json
from pathlib import Path

import pytest

import convsim
from convsim import SessionContext, list_graphs, load_graph_module
from convsim.config import config_from_dict
from convsim.running.store import RunStore

GRAPHS = sorted(list_graphs())


def test_graphs_are_found():
    assert {"hello_chat", "crs_shift"} <= set(GRAPHS)


@pytest.mark.parametrize("name", GRAPHS)
def test_contract(name):
    mod = load_graph_module(name)
    params = mod.Params()
    assert issubclass(mod.Context, SessionContext)
    ctx = mod.Context(params=params, seed=1)
    compiled = mod.build(params).compile()
    assert compiled.get_graph().nodes
    assert "graph TD" in compiled.get_graph().draw_mermaid()
    first = next(iter(mod.sessions(params, ctx)))
    assert first["session_id"]
    json.dumps(first)
    assert isinstance(mod.dataset_metrics([]), dict)
    # the roles a config may name (unknown roles are refused) and the optional preflight hook
    assert isinstance(mod.MODEL_ROLES, tuple) and all(isinstance(r, str) for r in mod.MODEL_ROLES)
    if hasattr(mod, "preflight"):
        mod.preflight(params, ctx)


@pytest.mark.parametrize("name", GRAPHS)
def test_runs_one_session_with_model_none(name, tmp_path):
    cfg = config_from_dict({"name": name, "graph": name, "sessions": 1, "seed": 5, "analysis": [],
                            "out_dir": str(tmp_path)})
    run_dir = convsim.run(cfg)
    (rec,) = RunStore(run_dir).records()
    assert rec["status"] == "ok", rec["error"]
    assert rec["transcript"] and rec["dialogue_metrics"]
    assert all("turn" in m for m in rec["turn_metrics"])
    assert all(m["spec"] == "none" for m in rec["models"].values())
    assert (Path(run_dir) / "metrics.csv").exists()
    steps = list((Path(run_dir) / "traces").rglob("*.jsonl"))
    assert len(steps) == 1
