"""The command line as the bad-input tests drive it: ``cli`` runs a command in-process, ``one_line``
asserts the rule every bad input follows (one line naming what was wrong, the exit code, no traceback)."""
from typer.testing import CliRunner

from convsim.cli import app


def cli(*args):
    """``(exit code, output, exception)`` of ``convsim <args>`` (paths may be Path objects)."""
    result = CliRunner().invoke(app, [str(a) for a in args], terminal_width=400)
    return result.exit_code, result.output, result.exception


def one_line(args, *words, code=2):
    """Run ``args``; assert exit ``code``, no traceback, and one output line holding every word."""
    exit_code, out, exc = cli(*args)
    assert exit_code == code, (out, exc)
    assert "Traceback" not in out and not (exc and not isinstance(exc, SystemExit)), (out, exc)
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), out
    return lines[0]
