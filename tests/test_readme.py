"""README.md stays a ten-minute read with the sections a new user looks for; the detail lives in docs/.

The word count is ``wc -w``'s (whitespace-separated tokens, code blocks included).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_WORDS = 2300
SECTIONS = ("Quick start", "Evaluate your own agent", "Write a scenario")
TEST_COMMAND = "pip install -e '.[dev]' && python -m pytest"  # CI (.ci/run) runs this exact line


def readme_problems(text: str) -> list[str]:
    problems = []
    words = len(text.split())
    if words > MAX_WORDS:
        problems.append(f"README.md has {words} words, more than {MAX_WORDS}: move detail to docs/")
    headings = {m.group(1).strip() for m in re.finditer(r"^##\s+(.+)$", text, re.MULTILINE)}
    problems += [f"README.md has no section '## {s}'" for s in SECTIONS if s not in headings]
    if TEST_COMMAND not in text:
        problems.append(f"README.md does not show the test command {TEST_COMMAND!r}")
    return problems


def test_readme_is_short_and_has_the_sections_a_new_user_needs():
    assert readme_problems((ROOT / "README.md").read_text(encoding="utf-8")) == []


def test_ci_runs_the_readme_test_command():
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_check_catches_a_long_readme_and_a_missing_section():
    good = "## Quick start\n" + TEST_COMMAND + "\n## Evaluate your own agent\nx\n## Write a scenario\ny\n"
    assert readme_problems(good) == []
    long = good + "word " * MAX_WORDS
    assert any("words" in p for p in readme_problems(long))
    missing = good.replace("## Write a scenario", "## Writing graphs")
    assert readme_problems(missing) == ["README.md has no section '## Write a scenario'"]
    assert readme_problems(good.replace(TEST_COMMAND, "pytest")) == [
        f"README.md does not show the test command {TEST_COMMAND!r}"]
