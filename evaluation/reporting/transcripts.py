"""``convsim eval <file>``: evaluate transcripts that already exist, without simulating.

Input, one JSON object per line (JSONL; a ``.json`` file holding a list works too):

* the project's own ``results.jsonl`` records (they have ``transcript``); variant and session id are kept;
* the import format for external logs::

    {"session_id": "d1", "variant": "my-crs",              # both optional
     "turns": [{"speaker": "user", "text": "...", "user_meta": {...}},     # user_meta optional
               {"speaker": "system", "text": "...", "top_k": ["id1", ...]}]}  # top_k optional

  ``speaker`` is ``user`` or ``system`` (``assistant``/``recommender`` are read as system);
  ``user_meta`` may carry the simulator's ``focus_field``, ``focus_value``, ``constraints``,
  ``shift_event``, ``anchor``, ``hidden_targets`` (then shift-detection and coverage metrics
  apply), typed as docs/analysis.md defines them; no other record or turn key is read.

Session ids and variants name files in the output run: one path component each, as ``convsim run``
requires. Every bad record is a ConvsimError naming the file, ``line N`` and the field.

The graph must define ``evaluate_transcript(transcript, ctx) -> {"turn_metrics", "dialogue_metrics", ...}``
(graphs/crs_shift.py does). The output is a new run directory (config.yaml, results.jsonl,
metrics.csv, summary.json, stats.json, figures/, report.html): one that holds a run already is
refused (:func:`output_dir`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from convsim import ChatModel, ConvsimError, load_graph_module, parse_model_spec
from convsim.config import config_from_dict, path_component
from convsim.providers.models import ModelUnavailable
from convsim.running.plan import check_roles, graph_params
from convsim.running.status import Status
from convsim.running.store import FINAL_STATUSES
from convsim.textio import is_int, iter_jsonl, load_json, load_yaml, make_dir

SYSTEM_SPEAKERS = ("system", "assistant", "recommender", "crs", "agent")
# every status a run writes: the final ones are evaluated, the others (infra_error, code_error: a
# partial transcript, re-run on resume) are skipped with a warning
STATUSES = tuple(s.value for s in Status)
IMPORT_KEYS = ("session_id", "variant", "turns")
IMPORT_TURN_KEYS = ("speaker", "text", "user_meta", "top_k")


def _fail(msg: str, path: Path, line: int, field: str | None = None):
    raise ConvsimError(msg, file=str(path), record=f"line {line}", field=field)


def _name(obj: dict, key: str, default: str, path: Path, line: int, *, ints: bool = False) -> str:
    """A variant or session id: a string (a session id may be an integer) that is one path
    component, as ``convsim run`` requires: both name files in the output run directory."""
    value = obj.get(key, default)
    if ints and is_int(value):
        value = str(value)
    if not isinstance(value, str):
        _fail(f"{key} must be a string{' or an integer' if ints else ''}, got {value!r}", path, line, key)
    try:
        return path_component(value, key.replace("_", " "))
    except ValueError as exc:
        _fail(str(exc), path, line, key)


def _item_ids(value: Any, path: Path, line: int, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) or is_int(x) for x in value):
        _fail(f"{field.rsplit('.', 1)[-1]} must be a list of item ids (strings or integers), got {value!r}",
              path, line, field)
    return [str(x) for x in value]


def _check_user_meta(meta: dict, path: Path, line: int, where: str) -> dict:
    """The simulator's keys of a user turn's meta, typed as docs/analysis.md defines them (other keys
    are kept as they are): a mistyped one would silently change the shift and coverage metrics."""
    from convsim.catalog.movies.catalog import FIELDS
    from convsim.evaluation.crs.excluded_fields import EXCLUDED_FIELDS, split_constraints
    meta = dict(meta)
    if "shift_event" in meta and not isinstance(meta["shift_event"], bool):
        _fail(f"shift_event must be true or false, got {meta['shift_event']!r}", path, line, f"{where}.shift_event")
    if "focus_field" in meta and meta["focus_field"] not in FIELDS + EXCLUDED_FIELDS:
        _fail(f"focus_field must be one of {', '.join(FIELDS + EXCLUDED_FIELDS)}, got {meta['focus_field']!r}",
              path, line, f"{where}.focus_field")
    excluded_focus = meta.get("focus_field") in EXCLUDED_FIELDS  # the CRS living spec: name and plot are no TAS fields
    if "focus_value" in meta and not (isinstance(meta["focus_value"], str) or excluded_focus and _strings(
            meta["focus_value"])):
        _fail(f"focus_value must be a string, got {meta['focus_value']!r}", path, line, f"{where}.focus_value")
    if excluded_focus:
        meta["focus_excluded"] = True
    constraints = meta.setdefault("constraints", {})
    if not isinstance(constraints, dict):
        _fail("constraints must be an object", path, line, f"{where}.constraints")
    constraints, excluded = split_constraints(constraints)
    for key, value in excluded.items():  # kept, out of TAS and the DST gold (evaluation/crs/excluded_fields.py)
        if not (isinstance(value, str) or _strings(value)):
            _fail(f"a {key} constraint must be a string or a list of strings, got {value!r}", path, line,
                  f"{where}.constraints.{key}")
    meta["constraints"] = constraints
    if excluded:
        meta["excluded_constraints"] = excluded
    for key, value in constraints.items():
        if key not in FIELDS:
            _fail(f"a constraint's field must be one of {', '.join(FIELDS)}, got {key!r}", path, line,
                  f"{where}.constraints.{key}")
        if not isinstance(value, str):
            _fail(f"a constraint's value must be a string, got {value!r}", path, line, f"{where}.constraints.{key}")
    if "anchor" in meta and not (isinstance(meta["anchor"], str) or is_int(meta["anchor"])):
        _fail(f"anchor must be an item id (a string or an integer), got {meta['anchor']!r}", path, line,
              f"{where}.anchor")
    if "hidden_targets" in meta:
        meta["hidden_targets"] = _item_ids(meta["hidden_targets"], path, line, f"{where}.hidden_targets")
    return meta


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _run_record(obj: dict, path: Path, line: int) -> dict:
    """A record of a run's own results.jsonl (or of the same shape): checked as the run wrote it."""
    tr = obj["transcript"]
    if not isinstance(tr, list) or not tr:
        _fail("transcript must be a non-empty list of turns", path, line, "transcript")
    out = []
    for i, t in enumerate(tr):
        where = f"transcript[{i}]"
        if not isinstance(t, dict):
            _fail("a transcript turn must be an object with turn, speaker and text", path, line, where)
        t = dict(t)
        speaker = t.get("speaker")
        if not isinstance(speaker, str) or speaker.lower() not in ("user", *SYSTEM_SPEAKERS):
            _fail(f"speaker must be 'user' or 'system', got {speaker!r}", path, line, f"{where}.speaker")
        t["speaker"] = "user" if speaker.lower() == "user" else "system"
        if not isinstance(t.get("text"), str):
            _fail("text must be a string", path, line, f"{where}.text")
        if "turn" not in t:
            _fail("a transcript turn needs its turn number", path, line, f"{where}.turn")
        if not is_int(t["turn"]):
            _fail("turn must be an integer", path, line, f"{where}.turn")
        meta = t.get("meta")
        if not isinstance(meta, (dict, type(None))):
            _fail("meta must be an object", path, line, f"{where}.meta")
        t["meta"] = dict(meta or {})
        if t["speaker"] == "user":
            t["meta"] = _check_user_meta(t["meta"], path, line, f"{where}.meta")
        out.append(t)
    hidden = obj.get("user_hidden")  # a simulated user's targets valid at the end (crs_shift keeps them out of
    # the transcript, where an agent could read them): the offline evaluation reads them from the first
    # user turn's meta.hidden_targets, as for an imported transcript
    if isinstance(hidden, dict) and hidden.get("targets"):
        first = next((t for t in out if t["speaker"] == "user"), None)
        if first is not None and "hidden_targets" not in first["meta"]:
            first["meta"]["hidden_targets"] = _item_ids(hidden["targets"], path, line, "user_hidden.targets")
    trial = obj.get("trial", 0)
    if not is_int(trial) or trial < 0:
        _fail(f"trial must be a non-negative integer, got {trial!r}", path, line, "trial")
    seed = obj.get("seed")
    if seed is not None and not is_int(seed):
        _fail(f"seed must be an integer, got {seed!r}", path, line, "seed")
    status = obj.get("status")
    if "status" in obj and status not in STATUSES:
        _fail(f"status must be one of {', '.join(STATUSES)}, got {status!r}", path, line, "status")
    params = obj.get("params")
    if "params" in obj and not isinstance(params, dict):
        _fail(f"params must be an object, got {params!r}", path, line, "params")
    rec = {"variant": _name(obj, "variant", "imported", path, line),
           "session_id": _name(obj, "session_id", f"line{line}", path, line, ints=True),
           "trial": trial, "seed": seed, "transcript": out,
           "source_status": status,  # set: a run's own record (a re-run attempt may follow it)
           "source_line": line}
    if params is not None:
        rec["params"] = params
    return rec


def import_record(obj: Any, path: Path, line: int) -> dict:
    """One line of the file as a record with a ``transcript`` (validated; errors name line and field)."""
    if not isinstance(obj, dict):
        _fail("a record must be a JSON object", path, line)
    if "transcript" in obj:
        return _run_record(obj, path, line)
    unknown = [k for k in obj if k not in IMPORT_KEYS]
    if unknown:
        _fail(f"unknown key {unknown[0]!r}: an imported record has {', '.join(IMPORT_KEYS)} "
              "(or is a run's record, with 'transcript')", path, line, str(unknown[0]))
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        _fail("a record needs a non-empty 'turns' list (or a 'transcript')", path, line, "turns")
    transcript, turn_no = [], 0
    for i, t in enumerate(turns):
        where = f"turns[{i}]"
        if not isinstance(t, dict):
            _fail("a turn must be an object with speaker and text", path, line, where)
        unknown = [k for k in t if k not in IMPORT_TURN_KEYS]
        if unknown:
            _fail(f"unknown key {unknown[0]!r}: a turn has {', '.join(IMPORT_TURN_KEYS)}", path, line,
                  f"{where}.{unknown[0]}")
        speaker, text = t.get("speaker"), t.get("text")
        if not isinstance(speaker, str) or speaker.lower() not in ("user", *SYSTEM_SPEAKERS):
            _fail(f"speaker must be 'user' or 'system', got {speaker!r}", path, line, f"{where}.speaker")
        if not isinstance(text, str):
            _fail("text must be a string", path, line, f"{where}.text")
        is_user = speaker.lower() == "user"
        if is_user:
            turn_no += 1
            if "top_k" in t:
                _fail("top_k is a system turn's", path, line, f"{where}.top_k")
            meta = t.get("user_meta", {})
            if not isinstance(meta, dict):
                _fail("user_meta must be an object", path, line, f"{where}.user_meta")
            meta = {**_check_user_meta(meta, path, line, f"{where}.user_meta"), "turn": turn_no}
        else:
            if turn_no == 0:
                _fail("the first turn must be the user's", path, line, f"{where}.speaker")
            if "user_meta" in t:
                _fail("user_meta is a user turn's", path, line, f"{where}.user_meta")
            meta = {"rec_ids": _item_ids(t.get("top_k", []), path, line, f"{where}.top_k")}
        transcript.append({"turn": turn_no, "speaker": "user" if is_user else "system", "text": text, "meta": meta})
    return {"variant": _name(obj, "variant", "imported", path, line),
            "session_id": _name(obj, "session_id", f"line{line}", path, line, ints=True),
            "trial": 0, "seed": None, "transcript": transcript, "source_line": line}


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
        base = dict(rec.get("params") or {})
    base.update(overrides)
    return base


def _make_params(module, values: dict, where: str):
    """The graph's Params, as a run makes them: an unknown key (a --set typo) or a bad value is one
    line naming where it came from."""
    return graph_params(module, values, where)


def _check_record_params(module, records: list[dict], path: Path, cfg: dict) -> None:
    """A record's own ``params`` must be the graph's (an unknown key or a bad value is bad input,
    even where config.yaml's params are the ones used); without a config.yaml they are the params
    the record is evaluated with, so the records of one variant must agree on them."""
    first: dict[str, tuple[int, dict]] = {}
    for rec in records:
        line = rec["source_line"]
        try:
            dump = _make_params(module, rec.get("params") or {}, str(path)).model_dump()
        except ConvsimError as exc:
            raise ConvsimError(exc.message, file=str(path), record=f"line {line}", field=exc.field) from None
        if cfg:
            continue
        seen = first.setdefault(rec["variant"], (line, dump))
        if seen[1] != dump:
            raise ConvsimError(f"params differ from those of line {seen[0]} (variant {rec['variant']}): the "
                               "records of a variant are evaluated with one set of params",
                               file=str(path), record=f"line {line}", field="params")


def _check_embedder(embedder: str, where: str) -> None:
    """The checks a run's config and preflight make (convsim.config, convsim.running.preflight)."""
    from convsim.running.preflight import check_embedder_dir
    if not isinstance(embedder, str):
        raise ConvsimError(f"unknown embedder {embedder!r}", file=where, field="embedder")
    config_from_dict({"graph": "crs_shift", "embedder": embedder}, file=where)  # the config's own validator
    check_embedder_dir(embedder, file=where)


def output_dir(path: Path, out: str | Path | None, cfg: dict, run_id: str | None = None) -> Path:
    """The run directory ``eval`` writes: ``<out>/<run_id>``, as ``convsim run`` writes its runs
    (``out`` defaults to ``runs``, ``run_id`` to ``eval-<source run>`` for a run's results.jsonl or
    ``eval-<file stem>``). It must not hold a run (a results.jsonl or a config.yaml: the source run,
    another run, an earlier eval) nor be the source file's directory: ``eval`` never overwrites a run."""
    if run_id is not None:
        from convsim.config import path_component
        path_component(run_id, "run_id")
    run_dir = Path(out if out is not None else "runs") / (run_id or f"eval-{_source_name(path, cfg)}")
    source_dir = path.resolve().parent
    if run_dir.resolve() == source_dir:
        raise ConvsimError(f"the output directory is the one the transcripts are read from ({path.name}): "
                           "choose another --out or --run-id", file=run_dir, field="out")
    held = [f for f in ("results.jsonl", "config.yaml") if (run_dir / f).exists()]
    if held:
        raise ConvsimError(f"the output directory holds another run ({held[0]}): choose another --out",
                           file=run_dir, field="out")
    return run_dir


def _source_name(path: Path, cfg: dict) -> str:
    return path.resolve().parent.name if cfg and path.resolve().parent.name else path.stem


def evaluate_transcripts(path: str | Path, *, graph: str | None = None, out: str | Path | None = None,
                         params: dict | None = None, models: dict | None = None, embedder: str | None = None,
                         analyze: bool = True, run_id: str | None = None) -> Path:
    """Evaluate every transcript of ``path`` with ``graph``'s evaluation; returns the run directory.

    When ``path`` lies in a run directory (a config.yaml beside it), its records are evaluated with
    that run's params (per variant) and, unless ``graph`` / ``embedder`` are given, that run's
    graph and embedder; ``params`` (``--set``) override on top. The output directory is itself a
    run directory that ``convsim report`` and ``convsim compare`` accept (its config.yaml is a
    valid experiment config); it must not hold a run already (:func:`output_dir`).
    """
    path = Path(path)
    cfg = source_config(path)
    run_dir = output_dir(path, out, cfg, run_id)
    if embedder is None:
        embedder = cfg.get("embedder") or "tfidf"
        _check_embedder(embedder, str(path.parent / "config.yaml") if cfg else "--embedder")
    else:
        _check_embedder(embedder, "--embedder")
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
    _check_record_params(module, records, path, cfg)
    by_variant = {}
    for rec in records:  # validated before anything is written
        if rec["variant"] not in by_variant:
            by_variant[rec["variant"]] = _make_params(module, record_params(rec, cfg, overrides), where)
    model_specs = {role: parse_model_spec(spec, where=f"models.{role}") for role, spec in (models or {}).items()}
    check_roles(module, model_specs, "command line", "eval")
    make_dir(run_dir, what="output directory", field="out")
    base_dump = base.model_dump()
    variants = [{"name": v, "params": {k: x for k, x in p.model_dump().items() if base_dump.get(k) != x}}
                for v, p in by_variant.items()]
    header = f"# convsim eval of {path} (graph {graph}; params from {where})\n"
    config_text = header + yaml.safe_dump({
        "name": f"eval-{_source_name(path, cfg)}", "graph": graph, "params": base_dump,
        "models": {r: s.settings for r, s in model_specs.items()}, "embedder": embedder, "variants": variants,
        "analysis": ["convsim.evaluation.reporting.analysis:analyze_run"]}, sort_keys=False)
    # written when every record is evaluated (results.jsonl.partial renamed, config.yaml beside it):
    # an evaluation stopped half-way leaves no run behind, so the same command can run again
    partial = run_dir / "results.jsonl.partial"
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
                fh.close()
                partial.unlink()
                raise ModelUnavailable(f"{path} record {i} (session {rec['session_id']}): {unavailable[0]}; "
                                       "nothing of this evaluation was kept: run the same command again")
            if isinstance(evaluated.get("dialogue_metrics"), dict) and any(
                    "excluded_constraints" in (e.get("meta") or {}) or (e.get("meta") or {}).get("focus_excluded")
                    for e in rec["transcript"]):  # name/plot constraints and focus: kept, counted
                from convsim.evaluation.crs.excluded_fields import excluded_counts
                evaluated["dialogue_metrics"] = {**evaluated["dialogue_metrics"], **excluded_counts(rec["transcript"])}
            status = rec.get("source_status") if rec.get("source_status") in FINAL_STATUSES else "ok"
            row = {"run_id": run_dir.name,
                   **{k: v for k, v in rec.items() if k not in ("source_status", "source_line")},
                   "status": status, "error": None,
                   "models": {r: s.settings for r, s in model_specs.items()}, "params": p.model_dump(),
                   "llm_calls": ctx.llm_calls(), **evaluated}
            fh.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
    (run_dir / "config.yaml").write_text(config_text, encoding="utf-8")
    partial.replace(run_dir / "results.jsonl")
    _summarise(run_dir, module, warnings=eval_warnings)
    if analyze:
        from convsim.evaluation.reporting.analysis import analyze_run
        analyze_run(run_dir)
    return run_dir


def _summarise(run_dir: Path, module, warnings: list[str] | None = None) -> None:
    """metrics.csv and summary.json exactly as the engine writes them after a run."""
    from convsim import summarise_run  # the engine's writer, so the files match a run's
    summarise_run(run_dir, module, warnings=warnings or [])
