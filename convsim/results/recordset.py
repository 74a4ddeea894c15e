"""A run's result records as a sequence that holds an index, not the records.

A record of a rule-based CRS or group-planning session is 30–50 KB of JSON (transcript, turn
details, trace summaries); 10,000 of them held as Python dicts take gigabytes. Everything that
reads a whole run (the end-of-run summary, ``dataset_metrics``, stats.json, the figures, the
report) reads it through :class:`RecordSet` instead: one pass over ``results.jsonl`` keeps, per
session, its sort key, its status and the byte offset of its line (about 250 bytes), and each
iteration reads the lines back one at a time. Memory is then flat in the number of sessions; the
price is parsing the file once per pass, so consumers that need one column many times should
collect it once (``convsim.evaluation.reporting.records.MetricTable``).

The sequence has the properties every aggregation relies on:

* **one record per session**: the last line written for a (variant, session, trial) wins, as in
  :meth:`convsim.running.store.RunStore.records` (a re-run replaces a failed attempt);
* **a fixed order**: (variant, session id, trial), whatever order the executor wrote them in;
* **checked input**: every line goes through :mod:`convsim.textio` on the first pass (UTF-8,
  bounded nesting, errors naming the file and line), and an optional ``check`` per record.

It is a ``collections.abc.Sequence``: ``len``, indexing (a slice is again a RecordSet),
iteration, ``bool``. Records are parsed afresh on every access, so changing one changes nothing.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path

from convsim import textio
from convsim.results.aggregate import record_sort_key
from convsim.errors import ConvsimError

Entry = tuple[tuple[str, str, int], int, str]  # (sort key, byte offset of the line, status)


class RecordSet(Sequence):
    """Records of one results file, read on demand in (variant, session id, trial) order."""

    __slots__ = ("path", "_entries")

    def __init__(self, path: str | Path, entries: list[Entry]) -> None:
        self.path = Path(path)
        self._entries = entries

    @classmethod
    def scan(cls, path: str | Path, *, check: Callable[..., None] | None = None) -> "RecordSet":
        """Index ``path`` in one streaming pass, its text checked by :mod:`convsim.textio`
        (``check(record, file=, record=)`` per line). The runner does not scan what it wrote: its
        store keeps this index as it appends (:meth:`convsim.running.store.RunStore.record_set`)."""
        last: dict[tuple[str, str, int], tuple[int, str]] = {}
        for offset, lineno, rec in textio.iter_jsonl_at(path, what="results", torn_tail=True):
            if check is not None:
                check(rec, file=path, record=f"line {lineno}")
            key = record_sort_key(rec)
            key = (sys.intern(key[0]), key[1], key[2])
            last[key] = (offset, sys.intern(str(rec.get("status", "ok"))))
        return cls(path, sorted((k, off, status) for k, (off, status) in last.items()))

    # --------------------------------------------------------------------- the sequence
    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return RecordSet(self.path, self._entries[i])
        with open(self.path, "rb") as fh:
            return self._read(fh, self._entries[i][1])

    def __iter__(self) -> Iterator[dict]:
        if not self._entries:
            return
        with open(self.path, "rb") as fh:
            for _, offset, _ in self._entries:
                yield self._read(fh, offset)

    def __repr__(self) -> str:
        return f"RecordSet({str(self.path)!r}, {len(self)} records)"

    @staticmethod
    def _read(fh, offset: int) -> dict:
        fh.seek(offset)
        line = fh.readline()
        if offset == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        return json.loads(line)  # checked by textio on the first pass

    # --------------------------------------------------------------------- what the index knows
    @property
    def keys(self) -> list[tuple[str, str, int]]:
        """(variant, session id, trial) of every record, in order."""
        return [e[0] for e in self._entries]

    @property
    def statuses(self) -> list[str]:
        """Every record's status, in order (read from the index, not the file)."""
        return [e[2] for e in self._entries]

    @property
    def variants(self) -> list[str]:
        """The variants present, in sorted order."""
        return list(dict.fromkeys(e[0][0] for e in self._entries))

    def take(self, positions: Sequence[int]) -> "RecordSet":
        """The records at ``positions`` (in that order)."""
        return RecordSet(self.path, [self._entries[i] for i in positions])

    def where(self, *, variant: str | None = None, statuses: Collection[str] | None = None) -> "RecordSet":
        """The records of one variant and/or with one of ``statuses`` (filtered on the index)."""
        return RecordSet(self.path, [e for e in self._entries
                                     if (variant is None or e[0][0] == variant)
                                     and (statuses is None or e[2] in statuses)])


def keys_of(records: Sequence[Mapping]) -> list[tuple[str, str, int]]:
    """Every record's (variant, session id, trial): from the index of a RecordSet, else from the records."""
    if isinstance(records, RecordSet):
        return records.keys
    return [record_sort_key(r) for r in records]


def statuses_of(records: Sequence[Mapping]) -> list[str]:
    """Every record's status (``ok`` when absent): from the index of a RecordSet, else from the records."""
    if isinstance(records, RecordSet):
        return records.statuses
    return [str(r.get("status", "ok")) for r in records]


# field -> the types a result record may hold there (absent is fine): what the analysis relies on
RECORD_FIELDS = {"variant": (str, int), "session_id": (str, int), "trial": (int,), "status": (str,),
                 "dialogue_metrics": (dict, type(None)), "transcript": (list, type(None)),
                 "turn_metrics": (list, type(None)), "llm_calls": (list, type(None))}
# a list field -> the type each of its items must have (the summary and dataset_metrics read them as objects)
RECORD_ITEMS = {"turn_metrics": dict, "llm_calls": dict}
# a field of an llm_calls item -> its types (absent is fine): what the usage table (convsim.providers.usage) reads
CALL_FIELDS = {"prompt_tokens": (int, float, type(None)), "completion_tokens": (int, float, type(None)),
               "total_tokens": (int, float, type(None)), "latency_s": (int, float, type(None)),
               "role": (str, type(None)), "model": (str, type(None))}
_TYPE_NAMES = {"str": "string", "int": "integer", "float": "number", "dict": "object", "list": "array",
               "NoneType": "null"}


def _wanted(types: tuple) -> str:
    if int in types and float in types:  # "number", not "integer or number"
        types = tuple(t for t in types if t is not int)
    return " or ".join(_TYPE_NAMES[t.__name__] for t in types)


def _bad(value: object, types: tuple) -> bool:
    return not isinstance(value, types) or (isinstance(value, bool) and bool not in types)


def check_record(rec: Mapping, *, file: object, record: object = None) -> None:
    """A result record whose fields have the types the analysis reads, else a ConvsimError naming the
    field (``llm_calls[2].total_tokens``): every reader of a run's records (resume, the summary and
    ``convsim report``, ``convsim compare``, the analysis) checks each line with it."""
    if not isinstance(rec, Mapping):
        raise ConvsimError(f"a result record must be a JSON object, got {type(rec).__name__}", file=file,
                           record=record)
    for name in ("variant", "session_id"):
        if name not in rec:
            raise ConvsimError(f"a result record needs {name!r}", file=file, record=record, field=name)
    for name, types in RECORD_FIELDS.items():
        if name in rec and _bad(rec[name], types):
            raise ConvsimError(f"{name} must be {_wanted(types)}, got {type(rec[name]).__name__}", file=file,
                               record=record, field=name)
    for name, item_type in RECORD_ITEMS.items():
        for i, item in enumerate(rec.get(name) or ()):
            if not isinstance(item, item_type):
                raise ConvsimError(f"{name}[{i}] must be {_wanted((item_type,))}, got {type(item).__name__}",
                                   file=file, record=record, field=f"{name}[{i}]")
    for i, call in enumerate(rec.get("llm_calls") or ()):
        for key, value in call.items():  # the first wrong field in the record's order
            if (types := CALL_FIELDS.get(key)) is not None and _bad(value, types):
                raise ConvsimError(f"llm_calls[{i}].{key} must be {_wanted(types)}, got {type(value).__name__}",
                                   file=file, record=record, field=f"llm_calls[{i}].{key}")
