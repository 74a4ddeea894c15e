"""Malformed input to every loader and command: one line naming the file, exit code 2, no traceback,
nothing already written lost.

Loaders are called in-process over every kind of malformed file (fast, exhaustive); the commands
(`run` with a broken catalog path param, `eval`, `report`, `compare`) run as subprocesses over one
file of each reader family, a few at a time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from convsim.catalog.courses import load_courses, load_test_set
from convsim.catalog.movies.catalog import MovieCatalog
from convsim.catalog.service.db import load_service_db, load_service_schema
from convsim.catalog.service.multiwoz import load_dialogues
from convsim.catalog.travel import load_travel_db, load_travelplanner_ref_info
from convsim import ConvsimError
from convsim.config import load_config
from convsim.running.store import read_jsonl
from convsim.evaluation.group.dialogue_csv import read_group_csv
from convsim.evaluation.reporting.records import load_run
from convsim.evaluation.reporting.transcripts import read_transcripts

ROOT = Path(__file__).resolve().parents[1]

# kind -> bytes. Every one must be refused by every loader.
MALFORMED = {
    "non_utf8": '{"title": "Amélie"}\n'.encode("latin-1"),
    "binary": bytes(range(256)) * 4,
    "truncated": b'{"a": [1, 2, {"b": "c',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep_object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "empty": b"",
    "wrong_type": b"42",
    "wrong_inner_types": b'[42, "x", null]',
    "missing_fields": b'[{}]',
    "missing_fields_object": b'{"x": {}}',
}
CSV_MALFORMED = {
    "non_utf8": "speaker,intent,utterance\nUser1,user_provide_budget,caf\u00e9\n".encode("latin-1"),
    "binary": bytes(range(256)) * 4,
    "empty": b"",
    "missing_fields": b"speaker,utterance\nUser1,hello\n",
    "deep_cell": b'speaker,intent,slot,utterance,meta\nUser1,user_provide_budget,,hi,"' + b"[" * 50_000 + b'"\n',
}


def _file(tmp: Path, name: str, data: bytes) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    p = tmp / name
    p.write_bytes(data)
    return p


def _folder(tmp: Path, names: list[str], data: bytes, *, good_from: Path | None = None) -> Path:
    """A folder of ``names`` where the first file is malformed and the rest are the project's own."""
    tmp.mkdir(parents=True, exist_ok=True)
    for i, n in enumerate(names):
        (tmp / n).write_bytes(data if i == 0 else (good_from / n).read_bytes())
    return tmp


SERVICE_DB = ROOT / "catalog" / "data" / "service"
TRAVEL_DB = ROOT / "catalog" / "data" / "travel"

# loader name -> (build the input from malformed bytes in a folder, call the loader)
LOADERS = {
    "movie catalog": lambda d, b: MovieCatalog.load(_file(d, "movies.json", b)),
    "service schema": lambda d, b: load_service_schema(_file(d, "schema.json", b)),
    "service database": lambda d, b: load_service_db(
        _folder(d, sorted(p.name for p in SERVICE_DB.glob("*_db.json")), b, good_from=SERVICE_DB)),
    "MultiWOZ dialogues": lambda d, b: load_dialogues(_file(d, "dialogues.json", b)),
    "travel database": lambda d, b: load_travel_db(
        _folder(d, sorted(p.name for p in TRAVEL_DB.glob("*.json")), b, good_from=TRAVEL_DB)),
    "TravelPlanner ref_info": lambda d, b: load_travelplanner_ref_info(_file(d, "ref_info.jsonl", b)),
    "course catalog": lambda d, b: load_courses(_file(d, "courses.json", b)),
    "course test set": lambda d, b: load_test_set(_file(d, "test_set.json", b)),
    "experiment config": lambda d, b: load_config(_file(d, "config.yaml", b)),
    "transcripts": lambda d, b: read_transcripts(_file(d, "transcripts.jsonl", b)),
    "results.jsonl": lambda d, b: read_jsonl(_file(d, "results.jsonl", b)),
    "run directory": lambda d, b: load_run(_file(d, "results.jsonl", b).parent),
}


def _one_line_naming(exc: ConvsimError, tmp: Path) -> None:
    text = str(exc)
    assert "\n" not in text, text
    assert str(tmp) in text, text  # names the file (or the folder's file)


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_every_loader_refuses_every_malformed_file(loader, tmp_path):
    failures = []
    for kind, data in MALFORMED.items():
        if loader == "results.jsonl" and kind in ("empty", "missing_fields_object"):
            continue  # the store's reader: an empty file is a run with no session yet; fields are the run's
        d = tmp_path / kind
        try:
            LOADERS[loader](d, data)
        except ConvsimError as exc:
            _one_line_naming(exc, d)
        except Exception as exc:  # noqa: BLE001 - the point: anything else is a bug
            failures.append(f"{kind}: {type(exc).__name__}: {str(exc)[:120]}")
        else:
            failures.append(f"{kind}: accepted")
    assert not failures, f"{loader}: " + "; ".join(failures)


@pytest.mark.parametrize("kind", sorted(CSV_MALFORMED))
def test_dialogue_csv_refuses_malformed_files(kind, tmp_path):
    with pytest.raises(ConvsimError) as err:
        read_group_csv(_file(tmp_path, "dialogue.csv", CSV_MALFORMED[kind]))
    _one_line_naming(err.value, tmp_path)


def test_a_50mb_jsonl_line_is_streamed_not_multiplied(tmp_path):
    """The reader holds one line at a time: a 50 MB line costs a small multiple of itself."""
    big = tmp_path / "big.jsonl"
    with open(big, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"variant": "a", "text": "x" * 50_000_000}) + "\n")
        fh.write(json.dumps({"variant": "b"}) + "\n")
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork/exec, so a child of a big pytest
    # process would report the parent's peak; VmHWM belongs to the child's own address space
    code = ("import re, sys; from convsim.textio import iter_jsonl\n"
            "n = sum(1 for _ in iter_jsonl(sys.argv[1]))\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "print(n, int(hwm) // 1024)")
    out = subprocess.run([sys.executable, "-c", code, str(big)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    n, peak_mb = map(int, out.stdout.split())
    assert n == 2 and peak_mb < 400, peak_mb


# ---------------------------------------------------------------- commands

def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convsim", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="400"), timeout=300)


def _good_run(run_dir: Path, n: int = 3) -> Path:
    run_dir.mkdir(parents=True)
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"variant": "a", "session_id": f"s{i}", "trial": 0, "seed": i, "status": "ok",
                                 "dialogue_metrics": {"m": float(i)}}) + "\n")
    (run_dir / "config.yaml").write_text("name: r\ngraph: hello_chat\n", encoding="utf-8")
    return run_dir


def test_commands_on_malformed_files_exit_2_with_one_line(tmp_path):
    cases = []  # (args, file the message must name, files that must be unchanged)
    for kind in ("non_utf8", "deep", "truncated"):
        cat = _file(tmp_path / f"cat_{kind}", "movies.json", MALFORMED[kind])
        cases.append((["run", "crs_shift", "--sessions", "1", "--set", f"catalog_path={cat}", "--out",
                       str(tmp_path / f"runs_{kind}"), "--no-analysis", "-q"], cat, []))
    for kind in ("binary", "deep", "wrong_inner_types"):
        tr = _file(tmp_path / f"eval_{kind}", "t.jsonl", MALFORMED[kind])
        cases.append((["eval", str(tr), "--out", str(tmp_path), "--run-id", f"ev_{kind}", "--no-analysis"], tr, []))
    csv_file = _file(tmp_path / "csv", "dialogue.csv", CSV_MALFORMED["non_utf8"])
    cases.append((["eval", str(csv_file)], csv_file, []))
    cfg = _file(tmp_path / "cfg", "exp.yaml", MALFORMED["binary"])
    cases.append((["run", str(cfg)], cfg, []))
    # report: a run whose results hold a truncated line in the middle; nothing of it may be lost
    broken = _good_run(tmp_path / "broken_run")
    lines = (broken / "results.jsonl").read_bytes().splitlines(keepends=True)
    (broken / "results.jsonl").write_bytes(lines[0] + b'{"variant": "a", "session_id": "x", "dial\n' + lines[1])
    cases.append((["report", str(broken)], broken / "results.jsonl", [broken / "results.jsonl"]))
    # compare: results of the right JSON but wrong types
    good = _good_run(tmp_path / "good_run")
    wrong = _good_run(tmp_path / "wrong_run")
    (wrong / "results.jsonl").write_text(json.dumps({"variant": "a", "session_id": "s0", "status": "ok",
                                                      "dialogue_metrics": [1, 2]}) + "\n", encoding="utf-8")
    cases.append((["compare", str(good), str(wrong)], wrong / "results.jsonl", [wrong / "results.jsonl"]))
    nonutf = _good_run(tmp_path / "nonutf_run")
    (nonutf / "results.jsonl").write_bytes(MALFORMED["non_utf8"])
    cases.append((["compare", str(nonutf), str(good)], nonutf / "results.jsonl", [nonutf / "results.jsonl"]))

    before = {p: p.read_bytes() for _, _, keep in cases for p in keep}
    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = list(pool.map(lambda c: _cli(c[0], tmp_path), cases))
    failures = []
    for (args, named, _), proc in zip(cases, procs):
        out = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        if proc.returncode != 2 or len(out) != 1 or "Traceback" in proc.stderr or str(named) not in out[0]:
            failures.append(f"{args[0]} {named.name}: exit {proc.returncode}, output {out[:3]}")
    assert not failures, "\n".join(failures)
    for p, data in before.items():
        assert p.read_bytes() == data, f"{p} changed"
