"""Every project path that README.md and docs/**/*.md mention exists.

A path is a token that starts with a top-level folder of the project (``agents/crs/user.py``,
``configs/crs_shift.yaml``, ``catalog/data/service/``) or names a top-level file
(``langgraph.json``); markdown links are resolved against the document's folder. Placeholders
(``graphs/<name>.py``, ``runs/<run_id>/``), globs and paths outside the project (``../shared/``)
are not checked; ``runs/`` holds generated output, so only ``runs/README.md`` is.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("agents", "bench", "catalog", "configs", "convsim", "docs", "evaluation", "examples", "graphs",
       "prompts", "tests", "runs")
ROOT_FILES = ("README.md", "pyproject.toml", "langgraph.json")
PATH = re.compile(r"(?<![\w./<>-])((?:%s)/[\w./-]*|(?:%s))(?![\w./<*{-])" % (
    "|".join(TOP), "|".join(re.escape(f) for f in ROOT_FILES)))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


# a last component with a dot names a file only with one of these suffixes
# (``graphs/crs_shift.DIALOGUE_STAGE_NODES`` is an attribute, not a file)
SUFFIXES = {"py", "md", "yaml", "yml", "json", "jsonl", "txt", "toml", "csv", "html", "j2", "gz", "sqlite",
            "png", "svg", "joblib", "sh", "cfg", "ini", "gguf"}


def _clean(token: str) -> str:
    return token.rstrip(".,;:")


def _is_path(token: str) -> bool:
    last = token.rstrip("/").rsplit("/", 1)[-1]
    return "." not in last or last.rsplit(".", 1)[1] in SUFFIXES


def mentioned_paths(doc: Path, root: Path = ROOT) -> list[tuple[int, str, Path]]:
    """(line, text, resolved path) of every project path the document mentions."""
    out = []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for m in PATH.finditer(line):
            token = _clean(m.group(1))
            if not _is_path(token) or token.startswith("runs/") and token != "runs/README.md":
                continue
            out.append((n, token, root / token))
        for m in LINK.finditer(line):
            target = m.group(1)
            if "://" in target or target.startswith(("mailto:", "#")):
                continue
            resolved = (doc.parent / target).resolve()
            if root.resolve() in resolved.parents or resolved == root.resolve():
                out.append((n, target, resolved))
    return out


def missing_paths(doc: Path, root: Path = ROOT) -> list[str]:
    return [f"{doc.relative_to(root)}:{n}: {text}" for n, text, path in mentioned_paths(doc, root)
            if not path.exists()]


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_mentioned_path_exists(doc):
    missing = missing_paths(doc)
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_wrong_path(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "agents" / "crs").mkdir(parents=True)
    (tmp_path / "agents" / "crs" / "user.py").write_text("")
    doc = tmp_path / "docs" / "x.md"
    doc.write_text("See `agents/crs/user.py` and agents/crs/usr.py, [cfg](../configs/x.yaml),\n"
                   "`graphs/<name>.py`, runs/<id>/report.html, ../shared/data/x.json and catalog/data/*.json.\n")
    assert [m.split(": ", 1)[1] for m in missing_paths(doc, tmp_path)] == ["agents/crs/usr.py", "../configs/x.yaml"]
