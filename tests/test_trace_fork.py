"""Forking a session from a checkpoint: same models reproduce it, another param diverges."""
import json
import os

import pytest
import yaml

from convsim import ConvsimError, ExperimentConfig, load_graph_module, read_trace, run
from convsim.traces.time_travel import compare_sessions, fork_run


def _run(tmp_path, graph="hello_chat", checkpoint=True, sessions=2, run_id="orig"):
    cfg = ExperimentConfig(name=graph, graph=graph, sessions=sessions, checkpoint=checkpoint,
                           out_dir=str(tmp_path), run_id=run_id, analysis=[])
    return run(cfg, analyze=False)


def _records(run_dir):
    return {r["session_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def _signature(steps, start):
    return [(s["step"], s["node"], s["turn"], s["changed"]) for s in steps if s["step"] >= start]


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fork"))


def test_fork_with_same_models_reproduces_the_session(original):
    src = read_trace(original / "traces" / "default" / "s001.jsonl")
    for step in (0, 4, len(src["steps"]) - 1):
        fork_dir = fork_run(original, "s001", step=step, run_id=f"same{step}", analyze=False)
        forked = read_trace(fork_dir / "traces" / "default" / "s001.jsonl")
        assert forked["fork"]["step"] == step and forked["fork"]["run_id"] == "orig"
        assert _signature(forked["steps"], 0) == _signature(src["steps"], 0)
        a, b = _records(original)["s001"], _records(fork_dir)["s001"]
        for key in ("transcript", "turn_metrics", "dialogue_metrics", "seed"):
            assert a[key] == b[key], key
        comp = json.loads((fork_dir / "fork_comparison.json").read_text())
        assert comp["identical"] is True and comp["first_divergent_turn"] is None
        assert comp["steps_compared"] == len(src["steps"]) - step
        cfg = yaml.safe_load((fork_dir / "config.yaml").read_text())
        assert cfg["fork"]["session_id"] == "s001" and cfg["fork"]["step"] == step
        assert cfg["fork"]["checkpoint_id"]
        assert b["forked_from"]["step"] == step


def test_fork_with_another_param_diverges_where_it_should(original):
    fork_dir = fork_run(original, "s000", step=3, set_params=["n_turns=2"], run_id="short", analyze=False)
    comp = json.loads((fork_dir / "fork_comparison.json").read_text())
    assert comp["identical"] is False
    # turns 1-2 are as before; the original asked a third question, the fork stops after two
    assert comp["first_divergent_turn"] == 3
    assert [r["same_text"] for r in comp["turns"]] == [True, True, False]
    assert comp["turns"][2]["forked"] == []
    first = comp["first_divergent_step"]
    assert first["step"] == 6 and first["original"]["node"] == "user"
    assert first["forked"]["node"] == "evaluate_dialogue"
    assert comp["dialogue_metrics"]["turns"] == {"original": 3, "forked": 2}
    cfg = yaml.safe_load((fork_dir / "config.yaml").read_text())
    assert cfg["params"]["n_turns"] == 2 and cfg["fork"]["set"] == ["n_turns=2"]
    # the original run is untouched
    assert len(_records(original)["s000"]["transcript"]) == 6


def test_fork_rejects_bad_input(original, tmp_path):
    with pytest.raises(ConvsimError, match="step must be in"):
        fork_run(original, "s000", step=99, analyze=False)
    with pytest.raises(ConvsimError, match="no trace for session"):
        fork_run(original, "nope", step=1, analyze=False)
    plain = _run(tmp_path, checkpoint=False, sessions=1, run_id="plain")
    with pytest.raises(ConvsimError, match="--checkpoint"):
        fork_run(plain, "s000", step=1, analyze=False)


def test_a_fork_that_did_not_finish_resumes_from_its_checkpoint(original):
    # before, the same fork again was refused ("exists already"), and running its config re-ran every
    # session of the variant from its start, deleting the fork's checkpoint
    fork_dir = fork_run(original, "s001", step=4, run_id="again", analyze=False)
    first = _records(fork_dir)["s001"]
    (fork_dir / "results.jsonl").write_text("")  # killed before its session landed
    (fork_dir / "traces" / "default" / "s001.jsonl").unlink()
    # the source run named by another path to it: still the same fork
    assert fork_run(os.path.relpath(original), "s001", step=4, run_id="again", analyze=False).resolve() == fork_dir
    resumed = _records(fork_dir)
    assert list(resumed) == ["s001"]
    assert {k: v for k, v in resumed["s001"].items() if k != "elapsed_s"} == \
        {k: v for k, v in first.items() if k != "elapsed_s"}
    trace = read_trace(fork_dir / "traces" / "default" / "s001.jsonl")
    assert trace["fork"]["step"] == 4 and [s["step"] for s in trace["steps"]] == list(range(len(trace["steps"])))
    with pytest.raises(ConvsimError, match="another run or fork"):
        fork_run(original, "s001", step=3, run_id="again", analyze=False)
    with pytest.raises(ConvsimError, match=r"a fork of run 'orig'.*convsim fork \S+ s001 --step 4 --run-id again"):
        run(fork_dir / "config.yaml", analyze=False)


def test_compare_sessions_by_hand():
    a = {"transcript": [{"turn": 1, "speaker": "user", "text": "x"}, {"turn": 1, "speaker": "agent", "text": "y"}],
         "turn_metrics": [{"turn": 1, "m": 1.0}], "dialogue_metrics": {"d": 1}}
    b = {"transcript": [{"turn": 1, "speaker": "user", "text": "x"}, {"turn": 1, "speaker": "agent", "text": "z"}],
         "turn_metrics": [{"turn": 1, "m": 0.0}], "dialogue_metrics": {"d": 0}}
    comp = compare_sessions(a, b)
    assert comp["first_divergent_turn"] == 1 and not comp["identical"]
    assert comp["turns"][0]["metrics"] == {"m": {"original": 1.0, "forked": 0.0}}
    assert compare_sessions(a, a)["identical"] is True


@pytest.mark.slow
def test_fork_reproduces_a_customer_service_session(tmp_path):
    try:
        load_graph_module("customer_service")
    except ConvsimError as exc:
        pytest.skip(f"customer_service not available: {exc}")
    src_dir = _run(tmp_path, graph="customer_service", sessions=1)
    sid = next(iter(_records(src_dir)))
    src = read_trace(next((src_dir / "traces" / "default").glob(f"{sid}.jsonl")))
    step = len(src["steps"]) // 2
    fork_dir = fork_run(src_dir, sid, step=step, run_id="cs_fork", analyze=False)
    comp = json.loads((fork_dir / "fork_comparison.json").read_text())
    assert comp["identical"], comp["first_divergent_step"]


def test_a_fork_of_a_run_with_a_record_of_the_wrong_shape_is_one_error(original, tmp_path):
    # before: fork read the original's records unchecked (a trial of "x" was a ValueError traceback)
    import shutil
    copy = tmp_path / "damaged"
    shutil.copytree(original, copy)
    lines = (copy / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    (copy / "results.jsonl").write_text("\n".join([json.dumps({**first, "trial": "x"}), *lines[1:]]) + "\n")
    with pytest.raises(ConvsimError, match="trial must be integer") as err:
        fork_run(copy, first["session_id"], step=1, analyze=False)
    assert err.value.file.endswith("results.jsonl") and err.value.field == "trial"
