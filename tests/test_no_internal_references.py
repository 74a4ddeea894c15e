"""User-facing text names the systems, never internal references: no issue numbers, no spec
file names ("spec 003", "003_0123456789abcdef.txt"), no path into the specs folder, no
development timeline ("this round", "the development workspace").

Scanned: the code and docs a user reads (graphs, configs, the packages, prompts, docs, README,
bench, pyproject, langgraph.json). Shipped data (catalog/data) and the tests are not scanned.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["graphs", "configs", "convsim", "agents", "evaluation", "catalog", "prompts", "docs", "bench",
           "README.md", "pyproject.toml", "langgraph.json"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".txt", ".toml", ".json", ".j2", ".html", ".jinja"}
PATTERNS = [
    re.compile(r"\bspec\s+0\d\d\b", re.IGNORECASE),        # "spec 003"
    re.compile(r"\b\d{3}_[0-9a-f]{16}(?:\.txt)?\b"),         # a spec file name
    re.compile(r"\bissues?\s+#?\d+\b", re.IGNORECASE),       # "issue 12", "issue #3"
    re.compile(r"shared/spec\b"),                            # the specs folder
    # the development's own timeline ("this round", "the round's first commit"): say what changed
    re.compile(r"\b(?:this|earlier|previous|later|last|next) round\b|\bthe round's\b", re.IGNORECASE),
    re.compile(r"\bdevelopment workspace\b", re.IGNORECASE),
]


def scanned_files(root: Path = ROOT) -> list[Path]:
    out = []
    for name in SCANNED:
        path = root / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in SUFFIXES
                       and "__pycache__" not in p.parts and not p.relative_to(root).parts[:2] == ("catalog", "data"))
    return out


def internal_references(path: Path) -> list[str]:
    hits = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        for pattern in PATTERNS:
            m = pattern.search(line)
            if m:
                hits.append(f"{path}:{n}: {m.group(0)}")
    return hits


def test_no_issue_numbers_or_spec_file_names_in_user_facing_text():
    hits = [h for f in scanned_files() for h in internal_references(f)]
    assert not hits, "internal references in user-facing text:\n" + "\n".join(hits)


def test_the_scan_finds_planted_mentions(tmp_path):
    (tmp_path / "docs").mkdir()
    planted = tmp_path / "docs" / "x.md"
    planted.write_text("Fine text.\nAs in spec 004 and 002_0123456789abcdef.txt.\nSee issue 12.\n"
                       "Reference: ../shared/spec/\nUpstream langgraph#8136 is fine.\n"
                       "Measured this round.\nA vote round's tally is fine.\n")
    (tmp_path / "catalog" / "data").mkdir(parents=True)
    (tmp_path / "catalog" / "data" / "d.json").write_text('{"text": "issue 3"}')
    files = scanned_files(tmp_path)
    assert files == [planted]
    hits = internal_references(planted)
    assert [h.split(": ", 1)[1] for h in hits] == ["spec 004", "002_0123456789abcdef.txt", "issue 12", "shared/spec",
                                                        "this round"]
