"""Counts the fuzzed bad-input cases the bad-input test files run, and how many are clean.

Prints figures, never passes or fails on its own account:

    python bench/bad_input_cases.py                          # the fuzz suite (files below)
    python bench/bad_input_cases.py tests/test_eval_bad_input.py ...

Two counts:

* **command-line cases**: every bad input the files run through the command line with their
  ``one_line`` helper (``tests/cli_helpers.py``, or a file's own). Each is *clean* when it exits 2,
  prints one line holding the words the test expects (the file, record or field) and no
  traceback, and writes nothing: no new file under the ``--out`` folder it names (``./runs``, the
  default, for a command without ``--out``);
* **test cases**: the pytest items of the files (a parametrized case each), passed or failed; the
  ones that call a loader in-process check its ``ConvsimError`` names the file, record and field.

Run with ``PYTHONPATH`` on the tree to measure (``PYTHONPATH=$PWD python bench/bad_input_cases.py``).
"""
from __future__ import annotations

import functools
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZ_SUITE = ("tests/test_bad_input_fuzzed.py", "tests/test_data_files_bad_input.py",
              "tests/test_fuzz_configs_named.py")


def _files(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*")} if folder.exists() else set()


class Recorder:
    """A pytest plugin wrapping each test module's ``one_line`` to record every case it runs."""

    def __init__(self) -> None:
        self.cases: list[dict] = []
        self.items: Counter = Counter()
        self.failed: list[str] = []

    def _wrap(self, module, original):
        @functools.wraps(original)
        def one_line(args, *words, **kw):
            args = [str(a) for a in args]
            named = "--out" in args[:-1]
            # no --out: the default output folder, runs/ under the working directory
            out = Path(args[args.index("--out") + 1]) if named else Path.cwd() / "runs"
            before = _files(out)
            case = {"module": module.__name__, "args": args, "clean": False, "why": None, "out_named": named}
            self.cases.append(case)
            try:
                line = original(args, *words, **kw)
            except AssertionError as exc:
                case["why"] = f"not one line / exit code / words: {str(exc)[:160]}"
                raise
            written = sorted(_files(out) - before)
            if written:
                case["why"] = f"wrote {written[:3]}"
            else:
                case["clean"] = True
            return line
        return one_line

    def pytest_collection_finish(self, session) -> None:
        seen = set()
        for item in session.items:
            module = getattr(item, "module", None)
            if module is None or module.__name__ in seen:
                continue
            seen.add(module.__name__)
            original = getattr(module, "one_line", None)
            if callable(original):
                setattr(module, "one_line", self._wrap(module, original))

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.items[report.outcome] += 1
            if report.outcome == "failed":
                self.failed.append(report.nodeid)


def main(argv: list[str]) -> int:
    files = argv or list(FUZZ_SUITE)
    sys.path.insert(0, str(ROOT / "tests"))
    rec = Recorder()
    code = pytest.main(["-q", "-p", "no:cacheprovider", *files], plugins=[rec])
    clean = sum(c["clean"] for c in rec.cases)
    default_out = sum(not c["out_named"] for c in rec.cases)
    print(f"\nfiles: {' '.join(files)}")
    print(f"command-line cases: {len(rec.cases)}, clean {clean}, unclean {len(rec.cases) - clean} "
          f"({default_out} without --out, checked against ./runs)")
    by_module = Counter(c["module"] for c in rec.cases)
    for m, n in sorted(by_module.items()):
        print(f"  {m}: {n} cases, {sum(c['clean'] for c in rec.cases if c['module'] == m)} clean")
    for c in rec.cases:
        if not c["clean"]:
            print(f"  UNCLEAN {c['module']}: {' '.join(c['args'])[:160]}\n      {c['why']}")
    print(f"test cases: {sum(rec.items.values())}, passed {rec.items['passed']}, failed {rec.items['failed']}, "
          f"skipped {rec.items['skipped']}")
    for nodeid in rec.failed:
        print(f"  FAILED {nodeid}")
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
