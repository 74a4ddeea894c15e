"""``convsim eval <file>``: evaluate transcripts that already exist, without simulating.

Input, one JSON object per line (JSONL; a ``.json`` file holding a list works too):

* the project's own ``results.jsonl`` records (they have ``transcript``); variant and session id are kept;
* the import format for external logs::

    {"session_id": "d1", "variant": "my-crs",              # both optional
     "turns": [{"speaker": "user", "text": "...", "user_meta": {...}},     # user_meta optional
               {"speaker": "system", "text": "...", "top_k": ["id1", ...]}]}  # top_k optional

  ``speaker`` is ``user`` or ``system`` (``assistant``/``recommender`` are read as system);
  ``user_meta`` may carry the simulator's ``focus_field``, ``focus_value``, ``constraints``,
  ``shift_event``, ``anchor`` (then shift-detection and coverage metrics apply).

The graph must define ``evaluate_transcript(transcript, ctx) -> {"turn_metrics", "dialogue_metrics", ...}``
(graphs/crs_shift.py does). The output is a run directory (config.yaml, results.jsonl,
metrics.csv, summary.json, stats.json, figures/, report.html).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from convsim import ChatModel, ConvsimError, load_graph_module, parse_model_spec

SYSTEM_SPEAKERS = ("system", "assistant", "recommender", "crs", "agent")


def _fail(msg: str, path: Path, line: int, field: str | None = None):
    raise ConvsimError(msg, file=str(path), record=f"line {line}", field=field)


def import_record(obj: Any, path: Path, line: int) -> dict:
    """One line of the file as a record with a ``transcript`` (validated; errors name line and field)."""
    if not isinstance(obj, dict):
        _fail("a record must be a JSON object", path, line)
    if "transcript" in obj:
        tr = obj["transcript"]
        if not isinstance(tr, list):
            _fail("transcript must be a list of turns", path, line, "transcript")
        for i, t in enumerate(tr):
            if not isinstance(t, dict) or not isinstance(t.get("text"), str) or not isinstance(t.get("speaker"), str):
                _fail("every transcript turn needs string speaker and text", path, line, f"transcript[{i}]")
        return {"variant": str(obj.get("variant", "imported")), "session_id": str(obj.get("session_id", f"line{line}")),
                "trial": obj.get("trial", 0), "seed": obj.get("seed"), "transcript": tr}
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        _fail("a record needs a non-empty 'turns' list (or a 'transcript')", path, line, "turns")
    transcript, turn_no = [], 0
    for i, t in enumerate(turns):
        where = f"turns[{i}]"
        if not isinstance(t, dict):
            _fail("a turn must be an object with speaker and text", path, line, where)
        speaker, text = t.get("speaker"), t.get("text")
        if not isinstance(speaker, str) or speaker.lower() not in ("user", *SYSTEM_SPEAKERS):
            _fail(f"speaker must be 'user' or 'system', got {speaker!r}", path, line, f"{where}.speaker")
        if not isinstance(text, str):
            _fail("text must be a string", path, line, f"{where}.text")
        is_user = speaker.lower() == "user"
        if is_user:
            turn_no += 1
            meta = t.get("user_meta", {})
            if not isinstance(meta, dict):
                _fail("user_meta must be an object", path, line, f"{where}.user_meta")
            meta = {"constraints": {}, **meta, "turn": turn_no}
            if not isinstance(meta["constraints"], dict):
                _fail("user_meta.constraints must be an object", path, line, f"{where}.user_meta.constraints")
        else:
            if turn_no == 0:
                _fail("the first turn must be the user's", path, line, f"{where}.speaker")
            top_k = t.get("top_k", [])
            if not isinstance(top_k, list):
                _fail("top_k must be a list of item ids", path, line, f"{where}.top_k")
            meta = {"rec_ids": [str(x) for x in top_k]}
        transcript.append({"turn": turn_no, "speaker": "user" if is_user else "system", "text": text, "meta": meta})
    sid = obj.get("session_id", f"line{line}")
    return {"variant": str(obj.get("variant", "imported")), "session_id": str(sid), "trial": 0, "seed": None,
            "transcript": transcript}


def read_transcripts(path: str | Path) -> list[dict]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConvsimError(f"cannot read transcripts: {exc.strerror}", file=str(path)) from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConvsimError(f"not valid JSON: {exc.msg}", file=str(path), record=f"line {exc.lineno}") from None
        return [import_record(o, path, i) for i, o in enumerate(items, 1)]
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConvsimError(f"not valid JSON: {exc.msg}", file=str(path), record=f"line {lineno}") from None
        out.append(import_record(obj, path, lineno))
    if not out:
        raise ConvsimError("no records", file=str(path))
    return out


def evaluate_transcripts(path: str | Path, *, graph: str = "crs_shift", out: str | Path | None = None,
                         params: dict | None = None, models: dict | None = None, embedder: str = "tfidf",
                         analyze: bool = True) -> Path:
    """Evaluate every transcript of ``path`` with ``graph``'s evaluation; returns the run directory."""
    path = Path(path)
    module = load_graph_module(graph)
    hook = getattr(module, "evaluate_transcript", None)
    if not callable(hook):
        raise ConvsimError(f"graph {graph!r} has no evaluate_transcript(transcript, ctx) hook", field="graph")
    records = read_transcripts(path)
    run_dir = Path(out) if out is not None else Path("runs") / f"eval-{path.stem}"
    run_dir.mkdir(parents=True, exist_ok=True)
    model_specs = {role: parse_model_spec(spec, where=f"models.{role}") for role, spec in (models or {}).items()}
    p = module.Params(**(params or {}))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({
        "name": f"eval-{path.stem}", "graph": graph, "source": str(path), "params": p.model_dump(),
        "models": {r: s.settings for r, s in model_specs.items()}, "embedder": embedder,
        "analysis": ["evaluation.analysis:analyze_run"]}, sort_keys=False), encoding="utf-8")
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for rec in records:
            handles = {r: ChatModel(spec=s, role=r) for r, s in model_specs.items()}
            ctx = module.Context(params=p, models=handles, embedder_spec=embedder, seed=0,
                                 session_id=rec["session_id"], trial=rec["trial"], run_dir=str(run_dir))
            evaluated = hook(rec["transcript"], ctx)
            row = {"run_id": run_dir.name, **rec, "status": "ok", "error": None,
                   "models": {r: s.settings for r, s in model_specs.items()}, "params": p.model_dump(),
                   "llm_calls": ctx.llm_calls(), **evaluated}
            fh.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
            fh.flush()
    _summarise(run_dir, module)
    if analyze:
        from evaluation.analysis import analyze_run
        analyze_run(run_dir)
    return run_dir


def _summarise(run_dir: Path, module) -> None:
    """metrics.csv and summary.json exactly as the engine writes them after a run."""
    from convsim import summarise_run  # the engine's writer, so the files match a run's
    summarise_run(run_dir, module)
