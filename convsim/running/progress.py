"""A rich progress bar with live running means of the turn metrics (LangGraph custom stream)."""
from __future__ import annotations

import math
from collections import defaultdict

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from convsim.results.summary_text import sig3

MAX_SHOWN = 4


def turn_metrics_event(event: object) -> dict | None:
    """What :meth:`LiveProgress.observe` reads of a custom-stream event, as plain data (a turn
    event's finite numeric metrics), or None: what a worker process sends its driver for the
    progress bar. A graph's events may hold anything (they go to the trace as JSON); this crosses
    a process boundary whatever they hold."""
    if not isinstance(event, dict) or event.get("kind") != "turn" or not isinstance(event.get("metrics"), dict):
        return None
    metrics = {}
    for k, v in event["metrics"].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                v = float(v)  # an int too large for a float is left out
            except OverflowError:
                continue
            if math.isfinite(v):
                metrics[str(k)] = v
    return {"kind": "turn", "metrics": metrics}


class LiveProgress:
    def __init__(self, *, total: int, done: int = 0, enabled: bool = True, label: str = "run") -> None:
        self.enabled = enabled
        self.total, self.done, self.failed = total, done, 0
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._progress = None
        self._task = None
        self.label = label

    def __enter__(self) -> "LiveProgress":
        if self.enabled:
            self._progress = Progress(TextColumn("[bold]{task.fields[label]}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(),
                                      TextColumn("{task.fields[metrics]}"), transient=False)
            self._progress.start()
            self._task = self._progress.add_task("run", total=self.total, completed=self.done,
                                                 label=self.label, metrics="")
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._refresh()
            self._progress.stop()

    def observe(self, event: object) -> None:
        """Fold a ``{"kind": "turn", "metrics": {...}}`` event into the running means."""
        event = turn_metrics_event(event)
        for key, value in (event or {}).get("metrics", {}).items():
            self.sums[key] += value
            self.counts[key] += 1

    def running_means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.counts[k] for k in self.sums if self.counts[k]}

    def advance(self, *, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        self._refresh()

    def _refresh(self) -> None:
        if self._progress is None:
            return
        means = list(self.running_means().items())[:MAX_SHOWN]
        text = "  ".join(f"{k}={sig3(v)}" for k, v in means)  # 3 significant digits, as every printed number
        if self.failed:
            text += f"  [red]failed={self.failed}[/red]"
        self._progress.update(self._task, completed=self.done, metrics=text)


# The analysis after a run (statistics, figures, report.html) takes 10-40 s on a laptop; a spinner
# with the current step and the elapsed time is shown meanwhile (``analysis_status``). Analysis code
# names its steps with ``analysis_step("figures")``: a no-op when no status is shown (a library caller,
# ``--quiet``, ``convsim report``).
_STATUS: list = []


class analysis_status:
    """Context manager: a transient status line "analysis: <step> (12 s)" on stderr while it is open."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._status = None
        self._start = 0.0
        self._step = "starting"

    def __enter__(self) -> "analysis_status":
        if self.enabled:
            import time

            from rich.console import Console
            self._start = time.monotonic()
            self._status = Console(stderr=True).status(self)  # rendered each refresh: the time runs on
            self._status.__enter__()
            _STATUS.append(self)
        return self

    def _text(self) -> str:
        import time
        elapsed = time.monotonic() - self._start if self._start else 0.0
        return f"analysis: {self._step} ({elapsed:.0f} s)"

    def __rich__(self) -> str:
        return self._text()

    def step(self, text: str) -> None:
        self._step = text

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            _STATUS.remove(self)
            self._status.__exit__(*exc)


def analysis_step(text: str) -> None:
    """Name the analysis step now running on the open status line, if any."""
    for status in _STATUS[-1:]:
        status.step(text)
