"""A graceful stop of a run: the first SIGTERM / SIGINT of the command line asks the run to stop.

Once asked (:func:`request`), no new session and no new model call starts (:func:`check` raises
:class:`RunStopped` where a call, a retry or a wait for a server slot would begin), the HTTP calls in
flight are cancelled (their sockets shut down: ``convsim.providers.httpjson``; streamed answers
mid-stream too), an in-process llama.cpp call is abandoned before its next token
(``convsim.providers.llamacpp``), a session still running is abandoned at its next node boundary
(never written: it runs again on resume), and
the sessions that finished are written with the run's summary. Process and Ray workers hear of
the driver's stop (``convsim.running.process_executor``, ``convsim.running.ray_executor``) and
request it in their own process: the same happens there, and the driver drops what they abandon.
The CLI then exits 143 (SIGTERM) or 130 (SIGINT); a second signal stops at once
(docs/real_models.md).

``RunStopped`` is a ``BaseException`` (as ``KeyboardInterrupt``): graph code's ``except
Exception`` (a rule fallback, a recorded agent failure) never swallows it.
"""
from __future__ import annotations

import threading
import time

_asked = threading.Event()
_why: list[str] = []
_hooks: list = []  # called on a stop request (on_request)
_active = [0]  # runs in progress in this process that honour a stop request (convsim.running.runner)


class RunStopped(BaseException):
    """The run was asked to stop: what was in flight is abandoned (not an outcome of the session)."""


def request(why: str = "stop requested") -> None:
    """Ask the run to stop: set the flag, wake every wait, cancel the HTTP calls in flight."""
    if not _asked.is_set():
        _why.append(why)
    _asked.set()
    for hook in list(_hooks):  # convsim.providers.httpjson: cancel the HTTP calls in flight
        hook()


def on_request(hook) -> None:
    """Call ``hook()`` when a stop is requested (in the thread that requested it: a signal handler)."""
    _hooks.append(hook)


def forget(hook) -> None:
    """No longer call ``hook`` on a stop request (the end of what registered it)."""
    try:
        _hooks.remove(hook)
    except ValueError:
        pass


def requested() -> bool:
    return _asked.is_set()


def reason() -> str | None:
    return _why[0] if _why else None


def check() -> None:
    """Raise :class:`RunStopped` when the run was asked to stop (before a call, a retry, a session)."""
    if _asked.is_set():
        raise RunStopped(reason())


def sleep(seconds: float) -> None:
    """``time.sleep`` that a stop cuts short (then raises :class:`RunStopped`) while a run is in
    progress; a plain ``time.sleep`` outside one."""
    if not active():
        time.sleep(seconds)
    elif _asked.wait(max(0.0, seconds)):
        raise RunStopped(reason())


def acquire(lock, poll: float = 0.25) -> None:
    """Take ``lock`` (a semaphore), giving up with :class:`RunStopped` once the run is asked to stop."""
    while not lock.acquire(timeout=poll):
        check()


def reset() -> None:
    """Forget an earlier stop (a new command in the same process, a test)."""
    _asked.clear()
    _why.clear()


class running:
    """Marks a run in progress (a stop request is honoured): ``with stopping.running(): ...``."""

    def __enter__(self):
        _active[0] += 1
        return self

    def __exit__(self, *exc) -> None:
        _active[0] -= 1


def active() -> bool:
    """Whether a run in this process honours a stop request (else a signal stops as KeyboardInterrupt)."""
    return _active[0] > 0
