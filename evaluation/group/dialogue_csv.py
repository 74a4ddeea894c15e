"""Dialogue CSV of group travel planning (the metric definitions' columns): export, and evaluation of CSVs
produced elsewhere.

Columns: ``turn, speaker, intent, slot, utterance, meta, constraint_state, plan,
ref_info_accommodations, ref_info_restaurants, ref_info_attractions, ref_info_events``.
Only ``speaker``, ``intent`` and ``utterance`` are required when reading. JSON cells: ``meta``
(turn metadata: ``has_conflict``, ``resolution_explanation``, ``resolution_strategy``; on the first
row also the condition flags and ``member_count``), ``constraint_state`` (slot -> decided options),
``plan`` (the itinerary; the last non-empty cell is the plan) and ``ref_info_*`` (the reference
catalog rows in the TripCraft schema; all rows of a column are pooled).
The spec's own format is read as written: any other column is a metadata column whose cell
(JSON-parsed when it parses) joins the row's meta (``meta`` wins where both give a key), so
``has_conflict``, ``resolution_explanation``, ``resolution_strategy`` and, on the first row, the
condition flags and ``member_count`` can be plain columns; plans may use the spec's literal keys
(``meals``, ``accommodations``, ``attractions``, ``events``, ``poi_list``;
``convsim.evaluation.group.plan_parse.normalize_plan``). The condition flags and ``member_count`` are
read where the group metric reference puts them: the first row's metadata, else its ``constraint_state``; flags missing
there are taken from a ``C1``–``C5`` in the file name, else inferred from the dialogue; whatever was
taken from the file name, inferred or missing, and first-row flags that disagree with the file name
(the first row's win), are reported in one warning line per file (stderr and ``warnings`` in the
result). ``ref_info_*`` records need a ``name`` alone (``convsim.evaluation.group.ref_info``: unknown
fields kept, missing optional ones defaulted and counted). A malformed file raises ``ConvsimError``
with the line.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from convsim.catalog.travel import KINDS, TravelDB, load_travel_db
from convsim import ConvsimError
from convsim.textio import parse_json, read_text
from convsim.evaluation.group.evaluate import dialogue_embedder, evaluate_group_dialogue, transcript_to_turns
from convsim.evaluation.group.plan_parse import intent_slot, normalize_plan

COLUMNS = ("turn", "speaker", "intent", "slot", "utterance", "meta", "constraint_state", "plan",
           *(f"ref_info_{k}" for k in KINDS))
REQUIRED = ("speaker", "intent", "utterance")
STRUCTURAL = frozenset(COLUMNS)


def _metadata_cell(value: str):
    """A metadata cell: JSON, or the words True/False as pandas and Python write booleans
    (``"False"`` is not JSON, and as a string it was truthy: M2 read every "False" conflict
    flag as a reported conflict)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    try:
        return _booleans(json.loads(value))
    except json.JSONDecodeError:
        return value


def _booleans(value):
    """``"True"`` / ``"False"`` strings inside a JSON meta object read as booleans too."""
    if isinstance(value, dict):
        return {k: _booleans(v) for k, v in value.items()}
    if isinstance(value, str) and value.strip() in ("True", "False", "true", "false"):
        return value.strip().lower() == "true"
    return value
_CONDITIONS = {"C1": (False, False, False, False), "C2": (True, False, False, False),
               "C3": (True, True, False, False), "C4": (True, True, True, False),
               "C5": (True, True, True, True)}
_FLAGS = ("multi_user", "enable_synthesis", "use_social_theory", "enable_feedback")


def export_group_csv(record: dict, path: str | Path, *, db: TravelDB | None = None) -> Path:
    """Write one finished session (a result record or final State) as a dialogue CSV."""
    db = db or load_travel_db()
    transcript, decisions = record["transcript"], record.get("decisions") or {}
    last_row = {}
    for i, t in enumerate(transcript):
        slot = (t.get("meta") or {}).get("slot")
        if slot:
            last_row[slot] = i
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for i, t in enumerate(transcript):
            meta = {k: v for k, v in (t.get("meta") or {}).items() if k not in ("plan", "intent", "slot")}
            state = {s: {sub: d["selected"] for sub, d in decisions[s].items()}
                     for s, last in last_row.items() if last <= i and s in decisions}
            row = {"turn": t.get("turn", i + 1), "speaker": t["speaker"], "intent": t["meta"].get("intent", ""),
                   "slot": t["meta"].get("slot", ""), "utterance": t["text"], "meta": json.dumps(meta),
                   "constraint_state": json.dumps(state),
                   "plan": json.dumps(t["meta"]["plan"]) if t["meta"].get("plan") else ""}
            if i == 0:
                city = record.get("city")
                for kind, rows in db.ref_info(city).items():
                    row[f"ref_info_{kind}"] = json.dumps(rows)
            w.writerow(row)
    return path


def _json_cell(value: str, *, file: str, line: int, column: str):
    if not value.strip():
        return None
    try:
        return parse_json(value, file=file, record=f"line {line}")  # bounded nesting
    except ConvsimError as exc:
        raise ConvsimError(f"invalid JSON in column {column!r}: {exc.message}", file=file,
                           record=f"line {line}", field=column) from None


def read_group_csv(path: str | Path) -> dict:
    """``{"turns", "plan", "ref_info", "flags"}`` from a dialogue CSV (validated)."""
    file = str(path)
    # UTF-8 only, binary refused, errors naming the file (convsim.textio); dialogue CSVs are small
    fh = io.StringIO(read_text(path, what="dialogue CSV"), newline="")
    with fh:
        reader = csv.DictReader(fh)
        try:
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        except csv.Error as exc:
            raise ConvsimError(f"malformed CSV: {exc}", file=file, record="line 1") from None
        if missing:
            raise ConvsimError(f"missing column(s) {missing}", file=file, record="line 1", field=missing[0])
        turns, plan, ref, first_meta, first_state = [], None, {k: [] for k in KINDS}, None, None
        try:
            for row in reader:
                line = reader.line_num
                for col in REQUIRED:
                    if row.get(col) is None:
                        raise ConvsimError(f"row has too few cells (no {col!r})", file=file,
                                           record=f"line {line}", field=col)
                meta = _json_cell(row.get("meta") or "", file=file, line=line, column="meta") or {}
                if not isinstance(meta, dict):
                    raise ConvsimError("meta is not a JSON object", file=file, record=f"line {line}", field="meta")
                meta = _booleans(meta)
                extra = {k: _metadata_cell(v) for k, v in row.items()
                         if k and k not in STRUCTURAL and v is not None and str(v).strip() != ""}
                meta = {**extra, **meta}
                if first_meta is None:
                    first_meta = meta
                state = _json_cell(row.get("constraint_state") or "", file=file, line=line,
                                   column="constraint_state")
                if state is not None and not isinstance(state, dict):
                    raise ConvsimError("constraint_state is not a JSON object", file=file,
                                       record=f"line {line}", field="constraint_state")
                if first_state is None:
                    first_state = state or {}
                p = _json_cell(row.get("plan") or "", file=file, line=line, column="plan")
                if p is not None:
                    if not isinstance(p, dict):
                        raise ConvsimError("plan is not a JSON object", file=file, record=f"line {line}", field="plan")
                    for key in ("days", "itinerary"):  # {"days": 5} ended in a TypeError traceback
                        if key in p and not isinstance(p[key], list):
                            raise ConvsimError(f"plan {key} must be a list of days, got {p[key]!r}"[:200], file=file,
                                               record=f"line {line}", field=f"plan.{key}")
                    plan = p
                for kind in KINDS:
                    col = f"ref_info_{kind}"
                    rows = _json_cell(row.get(col) or "", file=file, line=line, column=col)
                    if rows is not None:
                        if not isinstance(rows, list):
                            raise ConvsimError(f"{col} is not a JSON list", file=file, record=f"line {line}", field=col)
                        ref[kind] += rows
                turns.append({"speaker": row["speaker"], "intent": row["intent"].strip(),
                              "utterance": row["utterance"], "meta": meta, "line": line})
        except csv.Error as exc:
            raise ConvsimError(f"malformed CSV: {exc}", file=file, record=f"line {reader.line_num}") from None
    if not turns:
        raise ConvsimError("dialogue CSV has no rows", file=file)
    # the condition flags where the group metric reference puts them: the first turn's metadata, or its constraint_state
    stated = {k: v for k, v in (first_state or {}).items() if k in (*_FLAGS, "member_count")}
    flags, notes = _flags(file, {**stated, **(first_meta or {})}, turns)
    plan, plan_notes = normalize_plan(plan)
    if not any(t["intent"].startswith("sys_synthesize_") and "resolution_explanation" in t["meta"] for t in turns) \
            and any(t["intent"].startswith("sys_synthesize_") for t in turns):
        notes.append("no resolution_explanation metadata: M3 and M14 read the synthesis utterances "
                     "(M3_reported counts those of >= 6 tokens)")
    notes += plan_notes
    return {"turns": turns, "plan": plan, "ref_info": ref, "flags": flags,
            "warnings": [f"{file}: " + "; ".join(notes)] if notes else []}


def _truth(value) -> bool:
    """A flag cell: JSON true/false, or the words True/False/yes/no/1/0 in any case."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)


def _member_count(value, *, file: str, line: int) -> int | None:
    """The first row's ``member_count``: a positive integer (``4``, ``4.0`` or ``"4"``), ``None`` when
    absent or empty; anything else (``"four"``, an object, ``0``, ``-3``) is bad input."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    n = None
    if isinstance(value, bool):  # JSON true is not a count
        pass
    elif isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        n = int(value.strip())
    if n is None or n < 1:
        raise ConvsimError(f"member_count must be a positive integer, got {value!r}", file=file,
                           record=f"line {line}", field="meta.member_count")
    return n


def _flags(file: str, meta: dict, turns: list[dict]) -> tuple[dict, list[str]]:
    speakers = {t["speaker"] for t in turns if t["intent"].startswith("user_provide_")}
    m = re.search(r"(?<![A-Za-z0-9])(C[1-5])(?![0-9])", Path(file).name)
    inferred = dict(zip(_FLAGS, _CONDITIONS[m.group(1)])) if m else {
        "multi_user": len(speakers) > 1,
        "enable_synthesis": any(t["intent"].startswith("sys_synthesize_") for t in turns),
        "use_social_theory": any(str(t["meta"].get("resolution_strategy") or "N/A").upper() not in ("N/A", "")
                                 for t in turns if t["intent"].startswith("sys_synthesize_")),
        "enable_feedback": any(intent_slot(t["intent"]) and "feedback" in t["intent"] for t in turns)}
    flags = {k: _truth(meta.get(k, inferred[k])) for k in _FLAGS}
    given = _member_count(meta.get("member_count"), file=file, line=turns[0]["line"])
    flags["member_count"] = given or max(len(speakers), 1)
    notes = []
    if m and any(k in meta for k in _FLAGS):  # stated in the first turn and named by the file: one line
        named = dict(zip(_FLAGS, _CONDITIONS[m.group(1)]))
        differ = [k for k in _FLAGS if k in meta and flags[k] != named[k]]
        if differ:
            notes.append(f"the first turn's flags {', '.join(f'{k}={flags[k]}' for k in differ)} disagree "
                         f"with {m.group(1)} in the file name: the first turn's are used")
    assumed = [k for k in _FLAGS if k not in meta]
    if assumed:
        how = f"taken from {m.group(1)} in the file name" if m else "inferred from the dialogue"
        notes.append(f"flags {', '.join(f'{k}={flags[k]}' for k in assumed)} {how}")
    if given is None:
        notes.append(f"member_count={flags['member_count']} assumed from the distinct preference speakers")
    return flags, notes


def evaluate_group_csv(path: str | Path, *, embedder_spec: str = "tfidf") -> dict:
    """Every group-planning metric (M1–M16, W1–W3) of one dialogue CSV.

    Returns ``{"file", "n_turns", "flags", "metrics", "settings", "warnings"}``; the catalog is the CSV's
    ``ref_info_*`` rows, or the project database when the CSV has none (noted in settings).
    """
    data = read_group_csv(path)
    if any(data["ref_info"].values()):  # records as the group metric reference describes them (evaluation/group/ref_info.py)
        from convsim.evaluation.group.ref_info import db_from_csv_ref_info
        db, ref_notes = db_from_csv_ref_info(data["ref_info"], source=f"{path} (ref_info_* columns)")
        source = "csv"
        if ref_notes:
            data["warnings"] = [w + "; " + "; ".join(ref_notes) for w in data["warnings"]] or \
                [f"{path}: " + "; ".join(ref_notes)]
    else:
        db, source = load_travel_db(), "project database (the CSV has no ref_info_* rows)"
    embedder = dialogue_embedder(embedder_spec, db, data["turns"])
    metrics, settings = evaluate_group_dialogue(data["turns"], data["plan"], db, flags=data["flags"],
                                                embedder=embedder)
    settings["catalog"] = source
    # the warnings are returned, not printed: `convsim eval` prints them (the API prints nothing)
    return {"file": str(path), "n_turns": len(data["turns"]), "flags": data["flags"],
            "metrics": metrics, "settings": settings, "warnings": data["warnings"]}


__all__ = ["COLUMNS", "export_group_csv", "read_group_csv", "evaluate_group_csv", "transcript_to_turns"]
