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
from convsim.config import config_from_dict
from convsim.models import ModelUnavailable
from convsim.plan import check_roles, graph_params
from convsim.store import FINAL_STATUSES
from convsim.textio import iter_jsonl, load_json, load_yaml, make_dir

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
        tr, turn_no = [dict(t) if isinstance(t, dict) else t for t in tr], 0
        for i, t in enumerate(tr):
            if not isinstance(t, dict) or not isinstance(t.get("text"), str) or not isinstance(t.get("speaker"), str):
                _fail("every transcript turn needs string speaker and text", path, line, f"transcript[{i}]")
            turn_no += t["speaker"].lower() == "user"
            t.setdefault("turn", turn_no)
            t["meta"] = dict(t.get("meta") or {}) if isinstance(t.get("meta", {}), (dict, type(None))) else \
                _fail("meta must be an object", path, line, f"transcript[{i}].meta")
            if not isinstance(t["turn"], int) or isinstance(t["turn"], bool):
                _fail("turn must be an integer", path, line, f"transcript[{i}].turn")
            if t["speaker"].lower() == "user" and not isinstance(t["meta"].setdefault("constraints", {}), dict):
                _fail("meta.constraints must be an object", path, line, f"transcript[{i}].meta.constraints")
        trial = obj.get("trial", 0)
        if not isinstance(trial, int) or isinstance(trial, bool):
            _fail("trial must be an integer", path, line, "trial")
        return {"variant": str(obj.get("variant", "imported")), "session_id": str(obj.get("session_id", f"line{line}")),
                "trial": trial, "seed": obj.get("seed"), "transcript": tr,
                "source_status": obj.get("status")}  # set: a run's own record (a re-run attempt may follow it)
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
    """Every record of a JSONL file (streamed line by line) or of a ``.json`` list, validated; the
    file is read through convsim.textio (UTF-8 only, bounded nesting, errors naming file and line)."""
    path = Path(path)
    head = read_bytes_head(path)
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
        items = load_json(path, what="transcripts")
        out = [import_record(o, path, i) for i, o in enumerate(items, 1)]
    else:
        out = [import_record(obj, path, lineno)
               for lineno, obj in iter_jsonl(path, what="transcripts", numbered=True)]
    if not out:
        raise ConvsimError("no records", file=str(path))
    return _one_per_session(out, path)


def _one_per_session(records: list[dict], path: Path) -> list[dict]:
    """A run's own results.jsonl may hold a failed attempt before its re-run: the last record of a
    session is the one (as every reader of a run takes it). In an imported file, an id seen twice is
    bad input: keeping both would score one conversation twice."""
    last: dict[tuple, int] = {}
    for i, rec in enumerate(records):
        key = (rec["variant"], rec["session_id"], rec["trial"])
        if key in last and rec.get("source_status") is None:
            raise ConvsimError(f"session {rec['session_id']!r} (variant {rec['variant']}, trial {rec['trial']}) "
                               "appears twice", file=str(path), record=f"record {i + 1}", field="session_id")
        last[key] = i
    return [records[i] for i in sorted(last.values())]


def read_bytes_head(path: Path, size: int = 4096) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except FileNotFoundError:
        raise ConvsimError("cannot read transcripts: not found", file=str(path)) from None
    except OSError as exc:
        raise ConvsimError(f"cannot read transcripts: {exc.strerror or exc}", file=str(path)) from None


def source_config(path: Path) -> dict:
    """The config.yaml of the run that wrote ``path`` (beside it), or {} when there is none."""
    cfg_path = path.parent / "config.yaml"
    if not cfg_path.is_file():
        return {}
    cfg = load_yaml(cfg_path)
    if not isinstance(cfg, dict):
        raise ConvsimError("config.yaml must be a YAML mapping", file=str(cfg_path))
    config_from_dict(cfg, file=cfg_path)  # a run's own checks: params a mapping, variants a list...
    return cfg


def _variant_params(cfg: dict) -> dict[str, dict]:
    out = {}
    for i, v in enumerate(cfg.get("variants") or []):
        if isinstance(v, dict) and isinstance(v.get("params", {}), dict):
            out[str(v.get("name"))] = v.get("params") or {}
        else:
            raise ConvsimError("a variant must be a mapping with a params mapping", field=f"variants[{i}]")
    return out


def record_params(rec: dict, cfg: dict, overrides: dict) -> dict:
    """The params a record was produced with: the source run's params and its variant's (from
    config.yaml), else the record's own ``params``; then ``--set`` overrides on top."""
    if cfg:
        base = dict(cfg.get("params") or {})
        base.update(_variant_params(cfg).get(rec["variant"], {}))
    else:
        base = dict(rec.get("params") or {}) if isinstance(rec.get("params"), dict) else {}
    base.update(overrides)
    return base


def _make_params(module, values: dict, where: str):
    """The graph's Params, as a run makes them: an unknown key (a --set typo) or a bad value is one
    line naming where it came from."""
    return graph_params(module, values, where)


def evaluate_transcripts(path: str | Path, *, graph: str | None = None, out: str | Path | None = None,
                         params: dict | None = None, models: dict | None = None, embedder: str = "tfidf",
                         analyze: bool = True) -> Path:
    """Evaluate every transcript of ``path`` with ``graph``'s evaluation; returns the run directory.

    When ``path`` lies in a run directory (a config.yaml beside it), its records are evaluated with
    that run's params (per variant) and, unless ``graph`` is given, that run's graph; ``params``
    (``--set``) override on top. The output directory is itself a run directory that ``convsim
    report`` and ``convsim compare`` accept (its config.yaml is a valid experiment config).
    """
    path = Path(path)
    cfg = source_config(path)
    graph = graph or (cfg.get("graph") if isinstance(cfg.get("graph"), str) else None) or "crs_shift"
    module = load_graph_module(graph)
    hook = getattr(module, "evaluate_transcript", None)
    if not callable(hook):
        raise ConvsimError(f"graph {graph!r} has no evaluate_transcript(transcript, ctx) hook", field="graph")
    records = read_transcripts(path)
    # a run's unfinished attempts (infra_error, code_error: never scored, re-run on resume) hold a
    # partial transcript: scoring it would score half a conversation
    unfinished = [r for r in records if r.get("source_status") not in (None, *FINAL_STATUSES)]
    records = [r for r in records if r not in unfinished]
    if not records:
        raise ConvsimError(f"no finished session to evaluate ({len(unfinished)} unfinished attempts)", file=str(path))
    eval_warnings = ([f"{len(unfinished)} unfinished attempt(s) of the source run (infra_error, code_error) were "
                      "not evaluated: resume that run first"] if unfinished else [])
    overrides = dict(params or {})
    where = str(path.parent / "config.yaml") if cfg else "--set"
    base = _make_params(module, {**(cfg.get("params") or {}), **overrides}, where)
    by_variant = {}
    for rec in records:  # validated before anything is written
        if rec["variant"] not in by_variant:
            by_variant[rec["variant"]] = _make_params(module, record_params(rec, cfg, overrides), where)
    model_specs = {role: parse_model_spec(spec, where=f"models.{role}") for role, spec in (models or {}).items()}
    check_roles(module, model_specs, "command line", "eval")
    run_dir = Path(out) if out is not None else Path("runs") / f"eval-{path.stem}"
    make_dir(run_dir, what="output directory", field="out")
    base_dump = base.model_dump()
    variants = [{"name": v, "params": {k: x for k, x in p.model_dump().items() if base_dump.get(k) != x}}
                for v, p in by_variant.items()]
    header = f"# convsim eval of {path} (graph {graph}; params from {where})\n"
    (run_dir / "config.yaml").write_text(header + yaml.safe_dump({
        "name": f"eval-{path.stem}", "graph": graph, "params": base_dump,
        "models": {r: s.settings for r, s in model_specs.items()}, "embedder": embedder, "variants": variants,
        "analysis": ["evaluation.analysis:analyze_run"]}, sort_keys=False), encoding="utf-8")
    partial = run_dir / "results.jsonl.partial"  # renamed when every record is evaluated
    with open(partial, "w", encoding="utf-8") as fh:
        for i, rec in enumerate(records, 1):
            p = by_variant[rec["variant"]]
            unavailable: list[str] = []
            handles = {r: ChatModel(spec=s, role=r, unavailable=unavailable) for r, s in model_specs.items()}
            ctx = module.Context(params=p, models=handles, embedder_spec=embedder, seed=0,
                                 session_id=rec["session_id"], trial=rec["trial"], run_dir=str(run_dir))
            try:
                evaluated = hook(rec["transcript"], ctx)
            except ModelUnavailable as exc:
                unavailable.append(str(exc))
            if unavailable:  # raised, or caught by the hook, which went on without the model
                partial.unlink()
                raise ModelUnavailable(f"{path} record {i} (session {rec['session_id']}): {unavailable[0]}; "
                                       "nothing of this evaluation was kept: run the same command again")
            status = rec.get("source_status") if rec.get("source_status") in FINAL_STATUSES else "ok"
            row = {"run_id": run_dir.name, **{k: v for k, v in rec.items() if k != "source_status"},
                   "status": status, "error": None,
                   "models": {r: s.settings for r, s in model_specs.items()}, "params": p.model_dump(),
                   "llm_calls": ctx.llm_calls(), **evaluated}
            fh.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
    partial.replace(run_dir / "results.jsonl")
    _summarise(run_dir, module, warnings=eval_warnings)
    if analyze:
        from evaluation.analysis import analyze_run
        analyze_run(run_dir)
    return run_dir


def _summarise(run_dir: Path, module, warnings: list[str] | None = None) -> None:
    """metrics.csv and summary.json exactly as the engine writes them after a run."""
    from convsim import summarise_run  # the engine's writer, so the files match a run's
    summarise_run(run_dir, module, warnings=warnings or [])
