"""Bad input at the command line: one clear line naming file, record and field; exit code 2."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convsim import embeddings_available, make_embedder

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "convsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd)})


def test_malformed_catalog_is_one_clear_line(tmp_path):
    good = json.loads((ROOT / "catalog" / "data" / "movies.json").read_text())
    title = sorted(good)[3]
    good[title]["actor"] = "Tom Hanks"  # must be a list
    bad = tmp_path / "movies.json"
    bad.write_text(json.dumps(good))
    proc = run_cli("run", "crs_shift", "--sessions", "2", "--set", f"catalog_path={bad}", "--out",
                   str(tmp_path / "runs"), "--no-analysis", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "Traceback" not in proc.stderr
    assert str(bad) in err[0] and title in err[0] and "actor" in err[0]


def test_catalog_that_is_not_json(tmp_path):
    bad = tmp_path / "movies.json"
    bad.write_text("{not json")
    proc = run_cli("run", "crs_shift", "--sessions", "1", "--set", f"catalog_path={bad}", "--out",
                   str(tmp_path / "runs"), "--no-analysis", cwd=tmp_path)
    assert proc.returncode == 2 and str(bad) in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(not embeddings_available(), reason="the embeddings extra is not installed")
def test_bundled_minilm_embeds_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    e = make_embedder("st:minilm")
    assert e.name == "st:all-MiniLM-L6-v2"
    assert e.encode(["a film about space"]).shape == (1, 384)
    assert e.similarity("a space adventure film", "a movie set among the stars") > \
        e.similarity("a space adventure film", "a recipe for lemon cake")
