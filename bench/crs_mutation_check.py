"""Apply each CRS metric mutation to a copy of the project and run the tests that should kill it.

    python bench/crs_mutation_check.py [--only NAME ...]

The mutations a review found surviving the suite and those of the paper recovery
search, TF-IDF modes and retraction handling. Each is applied to a temporary copy of the tree
(``runs/`` and ``.git`` left out), never to the working tree; the copy's tests run with
``PYTHONPATH`` set to it. A mutation is *killed* when a test fails. The unmutated copy is run first:
its tests must pass. docs/crs_shift.md "Mutation tests" quotes the output.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUT = "tests/test_crs_mutations.py"
PAPER = "tests/test_crs_paper_recovery.py"
NEG = "tests/test_crs_negation.py"

# (name, file, old, new, occurrence (1-based), tests)
MUTATIONS = [
    ("recovery fed CR instead of CC", "evaluation/crs/nodes.py",
     'if t <= n], [r.get("cc") for r in ordered],', 'if t <= n], [r.get("cr") for r in ordered],', 1, [MUT]),
    (">= -> > in recovery (cc rule)", "evaluation/crs/tas.py",
     "return cc is not None and cc >= tau", "return cc is not None and cc > tau", 1, [MUT]),
    (">= -> > in recovery (original rule, CC floor)", "evaluation/crs/tas.py",
     "(cc is not None and cc >= cc_floor)", "(cc is not None and cc > cc_floor)", 1, [MUT]),
    (">= -> > in recovery (original rule, CR)", "evaluation/crs/tas.py",
     "(cr is not None and cr >= tau)", "(cr is not None and cr > tau)", 1, [MUT]),
    ("SIM_TOPIC_SHIFT 0.55 -> 0.45", "evaluation/crs/tas_cas.py",
     "SIM_TOPIC_SHIFT = 0.55", "SIM_TOPIC_SHIFT = 0.45", 1, [MUT]),
    ("TOPIC_JACCARD_SHIFT 0.35 -> 0.25", "evaluation/crs/tas_cas.py",
     "TOPIC_JACCARD_SHIFT = 0.35", "TOPIC_JACCARD_SHIFT = 0.25", 1, [MUT]),
    ("consecutive detector Jaccard(empty, empty) 0 -> 1", "evaluation/crs/tas_cas.py",
     "topical = (j if j is not None else 0.0)", "topical = (j if j is not None else 1.0)", 1, [MUT]),
    ("detector AND instead of OR (consecutive)", "evaluation/crs/tas_cas.py",
     "else (lexical or topical)", "else (lexical and topical)", 1, [MUT]),
    ("detector AND instead of OR (segment)", "evaluation/crs/tas_cas.py",
     "else (lexical or topical)", "else (lexical and topical)", 2, [MUT]),
    ("interference / |O| instead of |O \\ N|", "evaluation/crs/tas_cas.py",
     '"interference": len(leaked) / len(stale) if stale else None',
     '"interference": len(leaked) / len(old) if old else None', 1, [MUT]),
    ("interference / |N| instead of |O \\ N|", "evaluation/crs/tas_cas.py",
     '"interference": len(leaked) / len(stale) if stale else None',
     '"interference": len(leaked) / len(new) if new else None', 1, [MUT]),
    ("CAS context retention user->system (u[i-1], s[i])", "evaluation/crs/tas_cas.py",
     "cr = context_retention([sim(s[i - 1], s[i])", "cr = context_retention([sim(u[i - 1], s[i])", 1, [MUT]),
    ("CAS context retention user->system (u[i], s[i])", "evaluation/crs/tas_cas.py",
     "cr = context_retention([sim(s[i - 1], s[i])", "cr = context_retention([sim(u[i], s[i])", 1, [MUT]),
    ("honest-not-flagged threshold 0.1 -> 1.1", "evaluation/crs/validity.py",
     "HONEST_SHARE = 0.1", "HONEST_SHARE = 1.1", 1, [MUT]),
    # the paper's recovery search (shift_outcomes_to_end)
    ("paper search stops at the segment's end", "evaluation/crs/tas_cas.py",
     "        for t in range(i, n):\n            seen += 1",
     "        for t in range(i, bounds[k + 1]):\n            seen += 1", 1, [PAPER]),
    ("paper delay skips topic-less replies", "evaluation/crs/tas_cas.py",
     "            seen += 1\n            sys_t = set(system_topics[t])\n            if not sys_t:\n                continue\n",
     "            sys_t = set(system_topics[t])\n            if not sys_t:\n                continue\n            seen += 1\n",
     1, [PAPER]),
    ("paper search starts after the shift's reply", "evaluation/crs/tas_cas.py",
     "        for t in range(i, n):\n            seen += 1", "        for t in range(i + 1, n):\n            seen += 1",
     1, [PAPER]),
    (">= -> > in the paper's alignment threshold", "evaluation/crs/tas_cas.py",
     "if paper_alignment(sys_t, new, sim=sim) >= threshold:", "if paper_alignment(sys_t, new, sim=sim) > threshold:",
     1, [PAPER]),
    ("paper alignment max(jaccard, sim) instead of sim", "evaluation/crs/tas_cas.py",
     '        return sim(" ".join(sorted(system_topics)), " ".join(sorted(target_topics)))',
     '        return max(j, sim(" ".join(sorted(system_topics)), " ".join(sorted(target_topics))))', 1, [PAPER]),
    ("paper interference denominator min(seen, 4) -> seen", "evaluation/crs/tas_cas.py",
     "denom = max(1, delay if delay is not None else min(seen, NON_RECOVERY_WINDOW))",
     "denom = max(1, delay if delay is not None else seen)", 1, [PAPER]),
    ("recovery_search ignored (always the segment)", "evaluation/crs/tas_cas.py",
     '    if recovery_search == "to_end":\n        seg_topics = None',
     '    if False:\n        seg_topics = None', 1, [PAPER]),
    # TF-IDF
    ("paper TF-IDF sublinear", "evaluation/crs/tas_cas_eval.py",
     "return make_embedder(spec, corpus=corpus, sublinear_tf=False)",
     "return make_embedder(spec, corpus=corpus, sublinear_tf=True)", 1, [PAPER]),
    ("embedder ignores sublinear_tf", "convsim/providers/embedders.py",
     'stop_words="english", sublinear_tf=sublinear_tf,', 'stop_words="english", sublinear_tf=True,', 1, [PAPER]),
    # retracted values
    ("retractions kept in E(U) and E(S) (drop mode does nothing)", "evaluation/crs/nodes.py",
     'u, s = affirmed_concepts(user["text"], u), affirmed_concepts(system["text"], s)', 'u, s = u, s', 1, [NEG]),
    ("retractions kept in E(S)", "evaluation/crs/nodes.py",
     'u, s = affirmed_concepts(user["text"], u), affirmed_concepts(system["text"], s)',
     'u, s = affirmed_concepts(user["text"], u), s', 1, [NEG]),
    ("retraction cue before the value ignored", "evaluation/crs/negation.py",
     "return bool(_BEFORE.search(clause) or _AFTER.match(text[m.end():]))",
     "return bool(_AFTER.match(text[m.end():]))", 1, [NEG]),
    ("retraction read from the first mention, not the last", "evaluation/crs/negation.py",
     "    m = matches[-1]", "    m = matches[0]", 1, [NEG]),
    ("rejected attributes kept in E(U)", "evaluation/crs/nodes.py",
     '        u = [c for c in u if not rejected(user["text"], c[1])]', '        u = u', 1, [NEG]),
    ("rejection read without the turning-down sentence check", "evaluation/crs/negation.py",
     "    return bool(_TURNS_DOWN.search(sentence))", "    return True", 1, [NEG]),
    ("paper config drops retracted values", "configs/crs_paper001.yaml",
     "user_negation: keep", "user_negation: drop", 1, [PAPER]),
]


def _copy(dst: Path) -> None:
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns("runs", ".git", "__pycache__", "*.pyc"))


def _mutate(tree: Path, file: str, old: str, new: str, occurrence: int) -> None:
    path = tree / file
    text = path.read_text()
    start = -1
    for _ in range(occurrence):
        start = text.find(old, start + 1)
        if start < 0:
            raise SystemExit(f"{file}: occurrence {occurrence} of {old!r} not found (the code moved: update the mutation)")
    path.write_text(text[:start] + new + text[start + len(old):])


def _tests_fail(tree: Path, tests: list[str]) -> bool:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    return proc.returncode != 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="run the mutations whose name contains one of these")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or any(o in m[0] for o in args.only)]
    with tempfile.TemporaryDirectory(prefix="crs_mut_") as tmp:
        base = Path(tmp) / "base"
        _copy(base)
        files = sorted({t for m in chosen for t in m[5]})
        if _tests_fail(base, files):
            print(f"the unmutated tests fail ({' '.join(files)}): fix them first", file=sys.stderr)
            return 1
        survived = 0
        for name, file, old, new, occ, tests in chosen:
            tree = Path(tmp) / "m"
            shutil.rmtree(tree, ignore_errors=True)
            shutil.copytree(base, tree)
            _mutate(tree, file, old, new, occ)
            killed = _tests_fail(tree, tests)
            survived += not killed
            print(f"{'killed  ' if killed else 'SURVIVED'}  {name}  ({file}; {' '.join(tests)})", flush=True)
        print(f"{len(chosen) - survived} of {len(chosen)} mutations killed")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
