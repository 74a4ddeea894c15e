"""executor: ray lands the same results as the asyncio executor, in-process and on a two-node cluster."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import convsim
from convsim.running.store import RunStore

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = ("run_id", "elapsed_s")


def write_config(tmp_path, **over):
    cfg = {"name": "t", "graph": "crs_shift", "sessions": 4, "seed": 11, "out_dir": str(tmp_path / "runs"),
           "analysis": [], "params": {"n_turns": 4}}
    cfg.update(over)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def stable(run_dir: Path) -> list[str]:
    """results.jsonl without what may differ between runs (ids, timings), one canonical line each."""
    out = []
    for rec in RunStore(run_dir).records():
        rec = {k: v for k, v in rec.items() if k not in VOLATILE}
        rec["llm_calls"] = [{k: v for k, v in c.items() if k != "latency_s"} for c in rec.get("llm_calls", [])]
        out.append(json.dumps(rec, sort_keys=True))
    return sorted(out)


def assert_same_run(a: Path, b: Path) -> None:
    assert stable(a) == stable(b)
    assert (a / "summary.json").read_bytes() == (b / "summary.json").read_bytes()
    assert sorted(p.relative_to(a).as_posix() for p in (a / "traces").rglob("*.jsonl")) == \
        sorted(p.relative_to(b).as_posix() for p in (b / "traces").rglob("*.jsonl"))


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, object_store_memory=100_000_000, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_in_process_matches_async_and_resumes(tmp_path, local_ray):
    cfg = write_config(tmp_path)
    a = convsim.run(cfg, run_id="async")
    # a first ray run of 2 sessions, then the same run extended to 4: only the 2 missing ones run
    b = convsim.run(cfg, run_id="ray", executor="ray", workers=2, sessions=2)
    assert len(RunStore(b).records()) == 2
    first = (b / "results.jsonl").read_text().splitlines()
    b = convsim.run(cfg, run_id="ray", executor="ray", workers=2)
    lines = (b / "results.jsonl").read_text().splitlines()
    assert lines[:2] == first and len(lines) == 4
    assert_same_run(a, b)


@pytest.mark.slow
def test_more_workers_than_the_cluster_has_cpus_run_on_the_cpus_it_has(tmp_path, local_ray, capfd):
    """Before, --workers 3 on a 2-CPU cluster (a node died, say) waited forever for a CPU, with no
    word: every actor asks for one. Now it runs 2 workers and says so; the records are the same."""
    cfg = write_config(tmp_path, graph="hello_chat", sessions=3, params={"n_turns": 2})
    b = convsim.run(cfg, run_id="three", executor="ray", workers=3, analyze=False)
    err = capfd.readouterr().err
    assert "ray: --workers 3, but the cluster has 2 CPU(s) (each worker takes one): running 2" in err
    assert "ray: 2 workers on 1 node(s)" in err
    a = convsim.run(cfg, run_id="async3", analyze=False)
    assert stable(a) == stable(b)


def test_worker_count():
    from convsim.running.ray_executor import worker_count
    assert worker_count(None, 4) == 4 and worker_count(2, 4) == 2 and worker_count(6, 4) == 4


@pytest.mark.slow
def test_ray_actors_keep_the_concurrency_in_flight_at_the_server(tmp_path, local_ray):
    """--concurrency 8 on 2 actors: 4 sessions at once in each (a threaded actor), so the model
    server sees 8 calls at a time, as with the async executor; before, each actor ran one."""
    sys.path.insert(0, str(ROOT / "bench"))
    from latency_server import LatencyServer
    with LatencyServer(latency_s=0.4) as server:
        cfg = write_config(tmp_path, graph="hello_chat", sessions=8, params={"n_turns": 2}, concurrency=8,
                           models={"agent": f"openai:fake@{server.base_url}"})
        b = convsim.run(cfg, run_id="ray8", executor="ray", workers=2, analyze=False)
        assert server.max_in_flight == 8
        a = convsim.run(cfg, run_id="async8", analyze=False)
    assert stable(a) == stable(b)


@pytest.mark.slow
def test_ray_actors_share_the_runs_limits(tmp_path, local_ray):
    """One actor holds the run's limits and every session thread of both workers asks it: max_in_flight
    3 holds across the two actors, and the call budget is spent to its last call, then the run stops
    with exit code 3's BudgetReached and resumes to the async executor's records."""
    from convsim.providers.limits import BudgetReached
    sys.path.insert(0, str(ROOT / "bench"))
    from latency_server import LatencyServer
    with LatencyServer(latency_s=0.1) as server:
        common = dict(graph="hello_chat", sessions=8, params={"n_turns": 2}, concurrency=8,
                      models={"agent": f"openai:fake@{server.base_url}"})
        convsim.run(write_config(tmp_path, **common, limits={"max_in_flight": 3}), run_id="cap", executor="ray",
                    workers=2, analyze=False)
        assert server.requests == 16 and server.max_in_flight == 3
        server.reset()
        with pytest.raises(BudgetReached, match=r"\(max_calls=7 reached; this attempt: 7 calls"):
            convsim.run(write_config(tmp_path, **common, limits={"max_calls": 7}), run_id="b", executor="ray",
                        workers=2, analyze=False)
        assert server.requests == 7
        b = convsim.run(write_config(tmp_path, **common), run_id="b", executor="ray", workers=2, analyze=False)
        a = convsim.run(write_config(tmp_path, **common), run_id="a", analyze=False)
    assert stable(a) == stable(b)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    exe = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    if not Path(exe).exists():
        pytest.skip("the `ray` command is not installed")
    return exe


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory):
    """A head and a second node on this machine, 1 CPU each; torn down by killing what it started.

    Each node runs ``ray start --block`` in its own process group with its own temp dir, so the
    teardown stops exactly these processes (not another Ray on the machine, as ``ray stop`` would).
    """
    if ray.is_initialized():
        ray.shutdown()
    exe, port = _ray_cli(), _free_port()
    temp = tmp_path_factory.mktemp("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus", "1", "--object-store-memory", "100000000", "--block", "--disable-usage-stats"]
    head = subprocess.Popen([exe, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                             "--include-dashboard=false", "--temp-dir", str(temp), *common],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [head]
    try:
        address = f"127.0.0.1:{port}"
        _wait_for_cpus(exe, address, 1, env)
        procs.append(subprocess.Popen([exe, "start", "--address", address, "--node-ip-address", "127.0.0.1",
                                       *common], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_cpus(exe, address, 2, env)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _wait_for_cpus(exe: str, address: str, cpus: int, env: dict, timeout: float = 90) -> None:
    probe = ("import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
             "print(int(ray.cluster_resources().get('CPU', 0)), len([n for n in ray.nodes() if n['Alive']]))")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-c", probe, address], env=env, capture_output=True, text=True)
        last = out.stdout.strip() or out.stderr.strip()[-300:]
        if out.returncode == 0 and last.split()[:1] == [str(cpus)]:
            return
        time.sleep(1)
    pytest.fail(f"the local Ray cluster did not reach {cpus} CPUs: {last}")


@pytest.mark.slow
def test_ray_two_node_cluster_matches_async(tmp_path, two_node_cluster):
    cfg = write_config(tmp_path, params={"n_turns": 3})
    a = convsim.run(cfg, run_id="async")
    # the CLI path, as a user runs it against a cluster: results land in the driver's run dir
    done = subprocess.run([sys.executable, "-m", "convsim", "run", str(cfg), "--run-id", "ray", "--executor", "ray",
                           "--address", two_node_cluster, "--workers", "2", "--no-analysis", "-q"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    b = tmp_path / "runs" / "ray"
    assert_same_run(a, b)
    assert "ray: 2 workers on 2 node(s)" in done.stderr  # one actor per node (1 CPU each)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_sigterm_to_a_ray_driver_stops_it_with_one_line(tmp_path):
    """Before, ray.init's core worker took SIGTERM: a C++ stack dump on stderr and exit 15. Now the
    CLI's handler is put back after ray.init: the run stops as on Ctrl-C, exit 143."""
    from test_engine_workers import stop_a_run
    code, err, _ = stop_a_run(tmp_path, "ray", "sigterm")
    assert code == 143
    assert err[-1] == ("terminated (SIGTERM): the sessions that finished are kept; run the same command "
                       "(same --run-id) again to resume")
    assert not any("SIGTERM received" in line or "logging.cc" in line for line in err), err
    assert RunStore(tmp_path / "int").records()
