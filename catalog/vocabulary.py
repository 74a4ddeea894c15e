"""The English words of the data the project ships (catalog/data/): the vocabulary the answer
check's language test (convsim.providers.answer_language) knows besides English stop words.

:func:`shipped_vocabulary` reads every string of the shipped JSON files (films, their plots and
people; the service databases, schema and held-out paraphrases; the travel database; the course
catalog and its test set) once per process: about 15,000 words.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from convsim.providers.answer_language import english_words
from convsim.lazy import cached_once

DATA_DIR = Path(__file__).resolve().parent / "data"


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


@cached_once(maxsize=1)
def shipped_vocabulary() -> frozenset[str]:
    """The casefolded words of every string in catalog/data/**/*.json."""
    words: set[str] = set()
    for path in sorted(DATA_DIR.rglob("*.json")):
        words |= english_words(_strings(json.loads(path.read_text(encoding="utf-8"))))
    return frozenset(words)
