"""Generic LLM-as-judge machinery: prompt, schema, validation, retries, and an honest record.

Any scenario's judge is a :class:`Judge`: a prompt template (prompts/<name>.txt), a pydantic
schema for the answer, and a heuristic used when the judge model is ``none``. Every verdict
is a dict that carries what is needed to trust or discard it later (group_and_retrieval.md §3c):

    {"judge": name, "method": "llm" | "heuristic", "ok": bool, "scores": {metric: int} | None,
     "raw": str | None, "error": str | None, "attempts": int, "model": {spec, temperature, ...},
     "prompt_version": "sha256:<12 hex>"}

A model answer that does not validate after the retries is ``ok=False`` with its raw text:
recorded as a failure, never dropped and never scored 0 (the original parsed "**Proactiveness**: 4"
into None and silently left the session out of the means, crs.md §1.7).
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from convsim import ChatModel, ConvsimError

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


def prompt_version(text: str) -> str:
    """Content hash of a prompt template: any edit of the wording changes the version."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def load_prompt(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConvsimError(f"cannot read judge prompt: {exc.strerror}", file=str(path)) from exc


def render(template: str, variables: Mapping[str, str], *, name: str = "prompt") -> str:
    """``$name`` substitution (string.Template), so JSON braces in a prompt need no escaping."""
    try:
        return string.Template(template).substitute(variables)
    except KeyError as exc:
        raise ConvsimError(f"prompt variable {exc.args[0]!r} is not given", file=name,
                           field=str(exc.args[0])) from None


def format_transcript(transcript: Sequence[Mapping], *, user_label: str = "User",
                      system_label: str = "Recommender") -> str:
    """``User: ...`` / ``Recommender: ...`` lines, the labels the rubric itself uses."""
    lines = []
    for turn in transcript:
        speaker = str(turn.get("speaker", "")).lower()
        label = user_label if speaker in ("user", "seeker", "customer") else system_label
        lines.append(f"{label}: {turn.get('text', '')}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Judge:
    """A structured judge: ``name``, the prompt file name, the answer schema, the metrics (schema
    fields scored), and the labelled heuristic used with model ``none``."""

    name: str
    prompt_name: str
    schema: type[BaseModel]
    metrics: tuple[str, ...]
    heuristic: Callable[..., dict[str, float]]

    @property
    def template(self) -> str:
        return load_prompt(self.prompt_name)

    @property
    def version(self) -> str:
        return prompt_version(self.template)

    def _record(self, model: ChatModel, **fields: Any) -> dict:
        base = {"judge": self.name, "method": "llm", "ok": False, "scores": None, "raw": None,
                "error": None, "attempts": 0, "model": dict(model.settings),
                "prompt_version": self.version}
        base.update(fields)
        return base

    def judge(self, model: ChatModel, variables: Mapping[str, str], *, retries: int = 2,
              heuristic_inputs: Mapping[str, Any] | None = None) -> dict:
        """One verdict. ``variables`` fill the prompt; ``heuristic_inputs`` go to the heuristic."""
        if model.is_none:
            scores = self.heuristic(**(heuristic_inputs or {}))
            return self._record(model, method="heuristic", ok=True, scores=scores,
                                prompt_version=f"heuristic:{self.name}")
        prompt = render(self.template, variables, name=self.prompt_name)
        res = model.structured([("user", prompt)], self.schema, purpose=f"judge:{self.name}", retries=retries)
        if not res.ok:
            return self._record(model, raw=res.raw, error=res.error, attempts=res.attempts,
                                failed_raws=list(res.raws))  # every answer, not the last alone
        value = res.value.model_dump()
        return self._record(model, ok=True, raw=res.raw, attempts=res.attempts,
                            scores={m: value[m] for m in self.metrics},
                            **({"failed_raws": list(res.raws)} if res.raws else {}))


def verdict_metrics(verdict: Mapping, metrics: Sequence[str], *, prefix: str = "judge_") -> dict:
    """Dialogue-metric entries of a verdict: ``judge_<metric>`` per score (None when the judge failed),
    ``judge_failed`` (0/1) so failures are counted per model, and ``judge_heuristic`` (0/1)."""
    out: dict[str, Any] = {f"{prefix}{m}": None for m in metrics}
    if verdict.get("ok"):
        out.update({f"{prefix}{m}": v for m, v in verdict["scores"].items()})
    out[f"{prefix}failed"] = 0 if verdict.get("ok") else 1
    out[f"{prefix}heuristic"] = 1 if verdict.get("method") == "heuristic" else 0
    return out
