"""Trace files read back: a damaged step is one line naming it; a stale compressed trace never hides the session's."""
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import convsim
from convsim import ConvsimError, read_trace
from convsim.traces.time_travel import locate_trace

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    out = tmp_path_factory.mktemp("traced")
    return convsim.run({"name": "t", "graph": "hello_chat", "sessions": 2, "out_dir": str(out), "analysis": [],
                        "checkpoint": True, "params": {"n_turns": 2}}, run_id="r", analyze=False)


DAMAGE = {  # a step line still a JSON object, damaged: (change, the field the error names)
    "no node": (lambda d: d.pop("node"), "node"),
    "no superstep": (lambda d: d.pop("superstep"), "superstep"),
    "step is text": (lambda d: d.update(step="3"), "step"),
    "change without after": (lambda d: d.update(changed={"turn": {"before": 1}}), "changed.turn"),
    "appended not a list": (lambda d: d.update(changed={"transcript": {"appended": 5, "before_len": 1,
                                                                        "after_len": 2}}), "changed.transcript"),
    "change not an object": (lambda d: d.update(changed={"turn": [1, 2]}), "changed.turn"),
    "calls not a list": (lambda d: d.update(llm_calls="none"), "llm_calls"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_step_is_one_error_naming_the_line_and_field(traced, tmp_path, damage):
    # before, these passed read_trace and failed later with KeyError/TypeError tracebacks in
    # `convsim trace`, `trace --at` and `fork` (a fork also left a run directory behind)
    lines = (traced / "traces" / "default" / "s000.jsonl").read_text().split("\n")
    step = json.loads(lines[3])
    change, field = DAMAGE[damage]
    change(step)
    lines[3] = json.dumps(step)
    path = tmp_path / "s000.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(ConvsimError) as err:
        read_trace(path)
    assert err.value.record == "line 4" and err.value.field == field


def test_an_event_with_a_text_step_is_one_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "initial", "state": {}}\n{"type": "event", "step": "x", "event": {}}\n')
    with pytest.raises(ConvsimError, match="event's step"):
        read_trace(path)


def test_the_cli_says_one_line_for_a_damaged_trace(traced, tmp_path):
    run_dir = tmp_path / "copy"
    (run_dir / "traces" / "default").mkdir(parents=True)
    for name in ("config.yaml", "results.jsonl"):
        (run_dir / name).write_bytes((traced / name).read_bytes())
    lines = (traced / "traces" / "default" / "s000.jsonl").read_text().split("\n")
    step = json.loads(lines[3])
    step.pop("node")
    lines[3] = json.dumps(step)
    (run_dir / "traces" / "default" / "s000.jsonl").write_text("\n".join(lines))
    for args in (["trace", str(run_dir), "s000"], ["trace", str(run_dir), "s000", "--at", "3"]):
        done = subprocess.run([sys.executable, "-m", "convsim", *args], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "line 4" in done.stderr, done.stderr


def test_a_compressed_trace_of_an_earlier_attempt_never_hides_the_new_one(tmp_path):
    # the user gzips a run's traces; a session then runs again on resume. Before, the .gz of the
    # earlier attempt stayed and was the one `convsim trace` and `fork` read
    cfg = {"name": "t", "graph": "hello_chat", "sessions": 2, "out_dir": str(tmp_path), "analysis": [],
           "params": {"n_turns": 2}}
    run_dir = convsim.run(cfg, run_id="g", analyze=False)
    trace = run_dir / "traces" / "default" / "s001.jsonl"
    earlier = trace.read_text().split("\n")[:3]  # an attempt that stopped early
    with gzip.open(trace.with_name("s001.jsonl.gz"), "wt") as fh:
        fh.write("\n".join(earlier) + "\n")
    trace.unlink()
    results = run_dir / "results.jsonl"
    results.write_text("".join(line + "\n" for line in results.read_text().splitlines()
                               if json.loads(line)["session_id"] != "s001"))  # s001 runs again
    convsim.run(cfg, run_id="g", analyze=False)
    assert trace.exists() and not trace.with_name("s001.jsonl.gz").exists()
    assert locate_trace(run_dir, "s001") == trace and len(read_trace(trace)["steps"]) == 7  # 3 per turn, then evaluate_dialogue


def test_with_both_files_the_newer_is_the_sessions(tmp_path):
    folder = tmp_path / "traces" / "default"
    folder.mkdir(parents=True)
    plain, packed = folder / "s000.jsonl", folder / "s000.jsonl.gz"
    plain.write_text("")
    packed.write_bytes(gzip.compress(b""))
    os.utime(plain, (1_000, 1_000))
    assert locate_trace(tmp_path, "s000") == packed
    os.utime(packed, (500, 500))
    assert locate_trace(tmp_path, "s000") == plain
