"""A scenario's tools record their calls: ``ToolLog.record(name, args, result)`` appends
``{"name", "args", "result"}`` (deep copies) to ``calls``; a scenario reads them after the agent's
turn and puts them in the transcript turn's ``meta["tool_calls"]``."""
from __future__ import annotations

import copy


class ToolLog:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def record(self, name: str, args: dict, result):
        self.calls.append({"name": name, "args": copy.deepcopy(args), "result": copy.deepcopy(result)})
        return result
