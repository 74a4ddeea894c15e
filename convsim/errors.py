"""The one error type for bad input: it names the file, the record and the field."""
from __future__ import annotations


class ConvsimError(Exception):
    """Bad input (catalog, config, transcript, graph file, model spec).

    The command line prints ``str(err)`` as one line and exits with code 2; nothing
    already written is lost because the run store flushes each record as it lands.
    """

    def __init__(self, message: str, *, file: object = None, record: object = None,
                 field: object = None) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.record = record
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.record is not None:
            where.append(f"record {self.record!s}")
        if self.field is not None:
            where.append(f"field {self.field!s}")
        prefix = ": ".join([", ".join(where)]) if where else ""
        return f"{prefix}: {self.message}" if prefix else self.message


class AgentError(Exception):
    """The system under test failed in a way the experiment scores (session status ``agent_failure``).

    Raise it from an agent node when the failure is the agent's: the session is kept, its record is
    scored as the metric defines, and it is not re-run on resume. ``raw``: the agent's raw answer
    when the failure is a garbage answer (an agent slot's adapter keeps it, convsim.slots).
    """

    def __init__(self, *args: object, raw: object = None) -> None:
        super().__init__(*args)
        self.raw = raw


class SimulatorError(Exception):
    """The user simulator or a judge failed, not the agent (session status ``simulator_failure``).

    The session is kept and counted, excluded from agent scores, and not re-run on resume.
    """


class HookError(Exception):
    """Code run on a whole run raised: the graph's ``dataset_metrics`` or an ``analysis:`` hook (a code
    error, not bad input: the CLI's exit code 3). Raised after what was written is kept (results.jsonl,
    and for ``dataset_metrics`` summary.json and metrics.csv); ``str()`` is one line naming the hook's
    file, the hook and the exception; the exception is chained (``__cause__``) for its traceback."""

    def __init__(self, message: str, *, hook: str, file: object = None, run_dir: object = None) -> None:
        super().__init__(message)
        self.hook, self.file = hook, None if file is None else str(file)
        self.run_dir = run_dir
