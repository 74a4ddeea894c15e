"""Safe readers for every input file: UTF-8 only, bounded nesting, errors that name the file and where.

Every loader of the project (catalogs, databases, configs, transcripts, results) reads through
these functions, so a malformed input always ends as one :class:`~convsim.errors.ConvsimError`
(one line, exit code 2 on the command line), never a traceback:

* ``read_text(path)``: the file as text. Not UTF-8 (or binary: a NUL byte) -> an error naming the
  file, the line and the column of the first bad byte. A UTF-8 byte-order mark is accepted.
* ``load_json(path, max_depth=...)``: JSON whose nesting is at most ``max_depth`` containers deep;
  syntax errors name line and column; a too-deep document names where it got too deep (the parser
  never recurses without bound: its own recursion error is caught and located too).
* ``load_yaml(path, max_depth=...)``: the same for YAML (safe loader; recursive aliases refused).
* ``read_jsonl(path)`` / ``iter_jsonl(path)`` / ``iter_jsonl_at(path)``: one JSON object per line,
  streamed line by line (a 50 MB line costs about its own size, not the file's); errors name the
  line. ``iter_jsonl_at`` also gives each line's byte offset (convsim.results.recordset reads lines back).
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from convsim.errors import ConvsimError

DEFAULT_MAX_DEPTH = 100  # containers inside containers; project files use fewer than 15
_BOM = b"\xef\xbb\xbf"
# a JSON string (skipped whole) or one bracket: enough to follow nesting without parsing
_JSON_TYPE = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
              type(None): "null"}
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON ``true`` reads as a bool, and bool is a subclass of int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    nl = "\n" if isinstance(data, str) else b"\n"
    line = data.count(nl, 0, offset) + 1
    start = data.rfind(nl, 0, offset) + 1
    return line, offset - start + 1


def read_bytes(path: str | Path, *, what: str = "file") -> bytes:
    """The file's bytes; a missing or unreadable file is a ConvsimError naming it."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConvsimError(f"cannot read {what}: not found", file=path) from None
    except IsADirectoryError:
        raise ConvsimError(f"{what} is a directory, expected a file", file=path) from None
    except OSError as exc:
        raise ConvsimError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None


def decode_utf8(data: bytes, *, file: object, record: object = None) -> str:
    """``data`` as UTF-8 text, or a ConvsimError naming the first bad byte's line and column."""
    if b"\x00" in data[:8192]:
        raise ConvsimError("binary data, expected UTF-8 text", file=file, record=record)
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        where = f"line {line}, column {col}" if record is None else f"column {col}"
        raise ConvsimError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at {where}); "
                           "convert the file to UTF-8", file=file, record=record) from None


def make_dir(path: str | Path, *, what: str = "directory", field: str | None = None) -> Path:
    """``mkdir -p path``; a path that cannot be a directory (a file on the way, /proc, no
    permission) is a ConvsimError naming it, not a traceback."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConvsimError(f"cannot create the {what}: {exc.strerror or exc}", file=path, field=field) from None
    return path


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same directory, then rename it over
    ``path``: a run killed while writing leaves the old file or the new one, never a cut one (a cut
    config.yaml would make the run refuse to resume). Strings are written losslessly (a lone surrogate
    a model sent becomes its backslash escape, as in the run files)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_text(path: str | Path, *, what: str = "file") -> str:
    """The file as UTF-8 text (see the module docstring for the errors)."""
    return decode_utf8(read_bytes(path, what=what), file=path)


def too_deep_at(text: str, max_depth: int) -> int | None:
    """Offset of the first bracket that opens nesting level ``max_depth + 1``, or None."""
    depth = 0
    for m in _JSON_TOKENS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif tok in "]}" and depth:  # a stray closer does not earn extra depth for what follows
            depth -= 1
    return None


def _depth_exceeds(obj: Any, max_depth: int) -> bool:
    """Whether a parsed document nests containers more than ``max_depth`` deep. Iterative (no
    recursion); a recursive YAML alias nests without end and so is refused here too."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        for child in (node.values() if isinstance(node, dict) else node):
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def parse_json(text: str, *, file: object, record: object = None, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """``json.loads(text)`` with bounded nesting; every failure is a ConvsimError naming file and position."""
    def where(offset: int) -> str:
        line, col = _line_col(text, offset)
        return f"column {col}" if record is not None else f"line {line}, column {col}"

    def too_deep() -> ConvsimError:
        at = too_deep_at(text, max_depth)
        pos = f" at {where(at)}" if at is not None else ""
        return ConvsimError(f"JSON nested more than {max_depth} levels deep{pos}", file=file, record=record)

    if not text.strip():
        raise ConvsimError("empty, expected JSON", file=file, record=record)
    try:
        obj = json.loads(text)
    except RecursionError:
        raise too_deep() from None
    except json.JSONDecodeError as exc:
        raise ConvsimError(f"not valid JSON: {exc.msg} at {where(exc.pos)}", file=file, record=record) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python's digit limit
        raise ConvsimError(f"not valid JSON: {str(exc).splitlines()[0]}", file=file, record=record) from None
    # nesting deeper than max_depth needs more than max_depth opening brackets (two C-level counts;
    # a result record has ~50, so the walk over the parsed document is rarely needed)
    if isinstance(obj, (dict, list)) and text.count("[") + text.count("{") > max_depth \
            and _depth_exceeds(obj, max_depth):
        raise too_deep()
    return obj


def load_json(path: str | Path, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> Any:
    """A JSON file, UTF-8, nested at most ``max_depth`` deep."""
    return parse_json(read_text(path, what=what), file=path, max_depth=max_depth)


def load_yaml(path: str | Path, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> Any:
    """A YAML file (safe loader), UTF-8, nested at most ``max_depth`` deep, no recursive aliases."""
    text = read_text(path, what=what)
    try:
        obj = yaml.safe_load(text)
    except RecursionError:
        raise ConvsimError(f"YAML nested more than {max_depth} levels deep", file=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConvsimError(f"invalid YAML{pos}: {problem}", file=path) from None
    if isinstance(obj, (dict, list)) and _depth_exceeds(obj, max_depth):
        raise ConvsimError(f"YAML nested more than {max_depth} levels deep", file=path)
    return obj


def iter_jsonl(path: str | Path, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file",
               numbered: bool = False) -> Iterator:
    """The JSON objects of a JSONL file, one per non-empty line, read one line at a time
    (``(line number, object)`` pairs when ``numbered``)."""
    for offset, lineno, obj in iter_jsonl_at(path, max_depth=max_depth, what=what):
        yield (lineno, obj) if numbered else obj


def iter_jsonl_at(path: str | Path, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file",
                  torn_tail: bool = False) -> Iterator:
    """``(byte offset, line number, object)`` for every non-empty line of a JSONL file (checked as
    :func:`iter_jsonl` checks it): the offset lets a reader come back to one line later.
    ``torn_tail``: a last line without its newline that is not whole JSON is left out:
    the line a killed writer left half-written (the run store cuts it on resume), not bad input."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise ConvsimError(f"cannot read {what}: not found", file=path) from None
    except OSError as exc:
        raise ConvsimError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    with fh:
        offset = 0
        for lineno, raw in enumerate(fh, 1):
            if torn_tail and not raw.endswith(b"\n") and not _whole_json(raw):
                return
            start, offset = offset, offset + len(raw)
            record = f"line {lineno}"
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            text = decode_utf8(raw, file=path, record=record) if b"\x00" not in raw else None
            if text is None:
                raise ConvsimError("binary data, expected UTF-8 text", file=path, record=record)
            if not text.strip():
                continue
            obj = parse_json(text, file=path, record=record, max_depth=max_depth)
            if not isinstance(obj, dict):
                raise ConvsimError(f"line is a JSON {_JSON_TYPE.get(type(obj), 'value')}, expected an object",
                                   file=path, record=record)
            yield start, lineno, obj


def _whole_json(raw: bytes) -> bool:
    """Whether ``raw`` is one whole JSON value (a torn line is not; a whole one is checked as usual)."""
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


def read_jsonl(path: str | Path, *, max_depth: int = DEFAULT_MAX_DEPTH, what: str = "file") -> list[dict]:
    """All objects of a JSONL file (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path, max_depth=max_depth, what=what))
