"""Why a process died, in one line: an illegal instruction (SIGILL) is a build of llama.cpp (or of
another native library) for CPU instructions this machine does not enable, not a bug of the run.

llama-cpp-python compiles llama.cpp for the building machine's CPU by default (``GGML_NATIVE``):
on a virtual machine whose CPU advertises instructions the hypervisor does not enable (AMX,
AVX-512), the first inference dies with SIGILL, exit code 132 (-4 for a child process), and no
Python error. The ``local`` extra is built portable with ``CMAKE_ARGS=-DGGML_NATIVE=OFF``
(docs/real_models.md). Two places use this: a process worker that died (the process executor's
error line names the cause), and preflight's probe of an in-process llama.cpp model
(:func:`probe_llamacpp`: one tiny inference in a child process, so a SIGILL is one line, exit 2,
before anything is written, instead of the death of the whole command).
"""
from __future__ import annotations

import signal
import subprocess
import sys

REBUILD = ('CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir '
           '"llama-cpp-python[server]"')


def death_cause(exitcode: int | None) -> str:
    """What a process's exit code says (a negative code: the signal that killed it; 128+n from a shell)."""
    if exitcode is None:
        return "still running"
    sig = -exitcode if exitcode < 0 else exitcode - 128 if exitcode > 128 else None
    if sig == signal.SIGILL:
        return ("killed by an illegal instruction (SIGILL): a native library (llama.cpp) was built for CPU "
                f"instructions this machine does not enable; rebuild it portable: {REBUILD}")
    if sig is not None and 0 < sig < signal.NSIG:
        return f"killed by {signal.Signals(sig).name}"
    return f"exit code {exitcode}"


_PROBE = """
import sys
from convsim.providers.models import parse_model_spec, _make_backend
from langchain_core.messages import HumanMessage
spec = parse_model_spec({"spec": sys.argv[1], "max_tokens": 2})
_make_backend(spec).invoke([HumanMessage("Reply with OK.")], max_tokens=1)
"""


def probe_llamacpp(spec_text: str, timeout: float = 300.0) -> str | None:
    """One tiny inference of an in-process llama.cpp model in a child process: None when it answered,
    else why not (one line). Only a death by a signal is reported; an exception in the child (a
    missing extra...) is left to the run, which reports it as it always did."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, spec_text], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None  # slow, not dead: the run's own calls decide
    if done.returncode < 0:
        return death_cause(done.returncode)
    return None
