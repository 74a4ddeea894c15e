"""Every shipped config runs on the base install, or is refused before anything is written.

The base install is simulated in a subprocess whose import system cannot find the optional extras
(llama.cpp, sentence-transformers, Ray): a ``sitecustomize`` puts a finder first on ``sys.meta_path``
that raises ``ModuleNotFoundError`` for them, as a machine without them would. Each config then runs
with two sessions; it must exit 0, or exit 2 with one line that names the config and says what
installs or provides what it lacks, and leave no run directory behind.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from convsim.running.requirements import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
BLOCKED = sorted({name for names, _ in EXTRAS.values() for name in names})
DEFAULTS = ("crs_shift.yaml", "service_sim.yaml", "group_conditions.yaml", "courses.yaml")  # each system's default

SITECUSTOMIZE = f'''
import sys
BLOCKED = {BLOCKED!r}
class _NoExtras:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (a base install)", name=name)
        return None
sys.meta_path.insert(0, _NoExtras)
'''


@pytest.fixture(scope="module")
def base_install(tmp_path_factory) -> dict:
    site = tmp_path_factory.mktemp("base_install")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    env["COLUMNS"] = "100"
    env["CONVSIM_PREFLIGHT_MODELS"] = "1"  # a user's run asks each model server first (conftest turns it off)
    return env


def test_the_base_install_blocks_the_extras(base_install):
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "from convsim.running.requirements import extra_installed as e; "
                            "print(e('local'), e('embeddings'), e('ray'))"],
                           capture_output=True, text=True, env=base_install, cwd=ROOT)
    assert probe.stdout.split() == ["False", "False", "False"], probe.stderr


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_a_shipped_config_runs_or_is_refused_before_writing(config, base_install, tmp_path):
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "convsim", "run", str(config), "--sessions", "2",
                           "--no-analysis", "-q", "--out", str(out), "--run-id", "r"],
                          capture_output=True, text=True, env=base_install, cwd=tmp_path, timeout=900)
    if done.returncode == 0:
        assert (out / "r" / "results.jsonl").is_file()
        return
    assert config.name not in DEFAULTS, f"{config.name} is a system's default config: it must run on the base " \
                                        f"install\n{done.stderr[-1500:]}"
    assert done.returncode == 2, (done.returncode, done.stderr[-1500:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert config.name in lines[0], lines[0]
    assert "pip install -e '.[" in lines[0] or "data" in lines[0] or "server" in lines[0] or "model" in lines[0], lines[0]
    assert not (out / "r").exists(), f"{config.name} was refused but wrote {sorted(os.listdir(out / 'r'))}"
