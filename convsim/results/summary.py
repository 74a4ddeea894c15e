"""Dataset-level summary of a run: ``metrics.csv`` (a row per variant) and ``summary.json``.

Per variant: how every session ended (``ok``, ``agent_failure``, ``simulator_failure``,
``infra_error``, ``code_error``; ``errors`` = the last two), and mean, n and 95% CI of every
dialogue metric (:func:`convsim.results.aggregate.mean_ci`, its ``ci_method`` beside it in summary.json) over
the scored sessions (``ok`` and ``agent_failure``, convsim.running.status.SCORED), a session's trials
averaged first (n: sessions; ``n_values``, ``trials_per_session``: its trials; metrics.csv:
``<metric>_n`` and ``<metric>_trials_per_session``).
Top level: the run's totals, the first error message, and warnings: ``run_warnings`` are those the
run raised (e.g. a capped session count), kept when the summary is rebuilt (``convsim report``);
``warnings`` adds those of the summary itself (a metric value beyond ±1e100 or outside the range the
graph declares for it, a dataset hook that raised).

A graph's ``METRIC_RANGES`` (convsim.results.metric_ranges) clip each declared metric's interval to its
range, ``ci_clipped`` beside ``ci_method`` (true when an end moved; metrics.csv:
``<metric>_ci_clipped``); a session with a value outside the range is warned of, naming the metric,
the variant and the sessions, and that variant's interval is left unclipped.
"""
from __future__ import annotations

import csv
import json
import math
import traceback
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from convsim.results.aggregate import mean_ci, session_means_of_columns, trials_info
from convsim.errors import ConvsimError, HookError
from convsim.results.metric_ranges import Range, metric_ranges, out_of_range_warning, outside, range_of
from convsim.results.recordset import RecordSet, check_record, statuses_of
from convsim.running.status import SCORED, Status
from convsim.running.store import RunStore
from convsim.textio import is_int
from convsim.providers.usage import UsageTally

SCORED_STATUSES = frozenset(s.value for s in SCORED)
ERROR_STATUSES = (Status.INFRA_ERROR.value, Status.CODE_ERROR.value)


def hook_failure(hook: str, exc: BaseException, *, file: object = None, run_dir: object = None,
                 kept: str = "results.jsonl is") -> HookError:
    """The one-line HookError for ``hook`` (defined in ``file``) having raised ``exc``: the exception's
    first line, the last line of ``file`` it passed through and the innermost frame, if elsewhere."""
    frames = traceback.extract_tb(exc.__traceback__)
    src = None if file is None else str(Path(file).resolve())
    own = [f for f in frames if src is not None and str(Path(f.filename).resolve()) == src]
    places = [f"line {own[-1].lineno}"] if own else []
    if frames and (not own or own[-1] is not frames[-1]):
        places.append(f"raised at {frames[-1].filename}:{frames[-1].lineno}")
    at = f" ({', '.join(places)})" if places else ""
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    where = f" in {run_dir}" if run_dir is not None else ""
    message = (f"{hook} raised {what}{at}; {kept} kept{where}: fix the code, then `convsim report` "
               "rebuilds the summary and the analysis")
    return HookError(f"{file}: {message}" if file is not None else message, hook=hook, file=file, run_dir=run_dir)


# a metric beyond this magnitude is not applicable, as NaN and infinity are: sums, squares and products
# of such values overflow float64 (inf, NaN, numpy's overflow warnings, figures with no axis); no real
# rate, count, score or duration comes near it, so one is a bug in the metric, and the summary says so
METRIC_LIMIT = 1e100


def flatten_metrics(d: Mapping | None, prefix: str = "", *,
                    out_of_range: list[str] | None = None) -> dict[str, float | None]:
    """Numeric leaves of a nested metrics dict as ``{"a.b": value}``.

    Booleans count as 0/1, ``None``, non-finite numbers and numbers beyond ±``METRIC_LIMIT`` (1e100)
    stay as ``None`` (not applicable), strings and lists are left out. ``out_of_range``: a list the
    names of the numbers beyond the limit are appended to (the summary warns of them).
    """
    out: dict[str, float | None] = {}
    for key, value in (d or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_metrics(value, name + ".", out_of_range=out_of_range))
        elif isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            try:
                x = float(value)
            except OverflowError:  # an integer beyond float's range (JSON allows any number of digits)
                x = math.inf
            if math.isfinite(x) and abs(x) <= METRIC_LIMIT:
                out[name] = x
            else:
                out[name] = None
                if out_of_range is not None and (math.isfinite(x) or isinstance(value, int)):
                    out_of_range.append(name)
        elif value is None:
            out.setdefault(name, None)
    return out


def metric_columns(records: Iterable[Mapping], *,
                   out_of_range: list[str] | None = None) -> dict[str, list[float | None]]:
    """Every numeric dialogue metric of ``records`` as a column (one entry per record that has the
    metric; names in first-seen order), flattened one record at a time: only the columns are held,
    never the records. ``out_of_range``: as in :func:`flatten_metrics`."""
    columns: dict[str, list[float | None]] = {}
    for r in records:
        if without_metrics is not None and not r.get("dialogue_metrics"):
            without_metrics[0] += 1
        for name, value in flatten_metrics(r.get("dialogue_metrics") or {}, out_of_range=out_of_range).items():
            columns.setdefault(name, []).append(value)
    return columns


def variant_summary(records: Iterable[Mapping], *, ranges: Mapping[str, Range] | None = None) -> dict[str, dict]:
    """Mean, n and 95% CI (:func:`convsim.results.aggregate.mean_ci`: Wilson for 0/1 metrics, else Student t;
    ``ci_method`` says which) of every numeric dialogue metric over scored sessions: the unit
    is the session, its trials averaged first (n counts sessions; ``n_values`` the trial values and
    ``trials_per_session`` the trials each, see :func:`convsim.results.aggregate.session_means`).
    ``ranges``: the graph's checked ``METRIC_RANGES`` (:func:`convsim.results.metric_ranges.metric_ranges`):
    a declared metric's interval is clipped to its range (``ci_clipped``)."""
    return _metrics_and_usage(records, ranges=ranges)[0]


def _metrics_and_usage(records: Iterable[Mapping], *, out_of_range: list[str] | None = None,
                       ranges: Mapping[str, Range] | None = None,
                       outside_range: dict[str, int] | None = None,
                       without_metrics: list[int] | None = None) -> tuple[dict[str, dict], dict]:
    """One read of a variant's records (every status): its metric CIs over the scored sessions and its
    model usage over all of them (convsim.providers.usage); ``out_of_range`` as in :func:`flatten_metrics`.
    ``ranges``: as in :func:`variant_summary`; ``outside_range``: a dict that gets ``{metric: sessions
    with a value outside its declared range}`` (each trial's value is checked, not only the mean);
    ``without_metrics``: a one-item list that counts the scored records with no dialogue metrics."""
    tally = UsageTally()

    def scored():
        for r in records:
            tally.add(r)
            if r.get("status", "ok") in SCORED_STATUSES:
                yield r
    # per metric three compact columns (session index, trial, value), never a tuple per value: the
    # summary of 50,000 sessions stays small (memory flat in sessions, bench/analysis_scale.py)
    columns: dict[str, tuple[array, array, array]] = {}
    index: dict[str, int] = {}
    for r in scored():
        session = index.setdefault(str(r.get("session_id")), len(index))
        trial = r.get("trial", 0)
        trial = trial if is_int(trial) else 0
        if without_metrics is not None and not r.get("dialogue_metrics"):
            without_metrics[0] += 1
        for name, value in flatten_metrics(r.get("dialogue_metrics") or {}, out_of_range=out_of_range).items():
            col = columns.get(name)
            if col is None:
                col = columns[name] = (array("q"), array("q"), array("d"))
            col[0].append(session)
            col[1].append(trial)
            col[2].append(math.nan if value is None else value)
    out = {}
    for name, (sessions, trials, values) in columns.items():
        session_column, values = np.frombuffer(sessions, dtype=np.int64), np.frombuffer(values, dtype=float)
        means, counts = session_means_of_columns(session_column, np.frombuffer(trials, dtype=np.int64), values)
        bounds = range_of(ranges or {}, name)
        wrong = outside(values, bounds)  # each trial's value: one outside may average back inside
        if wrong.any():
            ci = {**mean_ci(means), "ci_clipped": False}  # the range does not hold: not clipped
            if outside_range is not None:
                outside_range[name] = int(np.unique(session_column[wrong]).size)
        else:
            ci = mean_ci(means, bounds=bounds)
        out[name] = {**ci, **trials_info(counts.tolist())}
    return out, tally.table()


def _scalar_items(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_scalar_items(v, f"{prefix}{k}."))
        elif v is None or isinstance(v, (int, float, str, bool)):
            out[f"{prefix}{k}"] = v
    return out


def status_counts(records: Sequence[Mapping]) -> dict[str, int]:
    """Sessions per status (every status listed, zeros included), plus ``errors`` and ``sessions``."""
    counts = {s.value: 0 for s in Status}
    statuses = statuses_of(records)
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    counts["errors"] = sum(counts[s] for s in ERROR_STATUSES)
    counts["sessions"] = len(statuses)
    return counts


def first_error(records: Sequence[Mapping]) -> dict | None:
    """The first infra/code error of the run (variant, session, status, the error's first line)."""
    errors = records.where(statuses=ERROR_STATUSES) if isinstance(records, RecordSet) else records
    for r in errors:
        if r.get("status") in ERROR_STATUSES:
            lines = str(r.get("error") or "").strip().splitlines()
            return {"variant": r.get("variant"), "session_id": r.get("session_id"), "trial": r.get("trial", 0),
                    "status": r["status"], "error": lines[0] if lines else ""}
    return None


def _config_order(run_dir: Path, found: Sequence[str]) -> list[str]:
    """Variants in config order, then any other found in the records (their sorted order): the summary
    must not depend on which session finished first (executors land them in completion order)."""
    if len(found) < 2:  # nothing to order: the config is not read (its YAML parse cost ~5 ms a run)
        return list(found)
    import yaml
    cfg_path = Path(run_dir) / "config.yaml"
    declared = []
    if cfg_path.exists():
        declared = [v.get("name") for v in (yaml.safe_load(cfg_path.read_text()) or {}).get("variants") or []]
    order = {name: i for i, name in enumerate(declared)}
    position = {name: i for i, name in enumerate(found)}
    return sorted(found, key=lambda n: (order.get(n, len(order)), position[n]))


def _from_the_run(path: Path) -> tuple[list[str], dict | None]:
    """What the run itself wrote in an earlier summary.json: its warnings (``run_warnings``) and its
    ``budget``; nothing when there is none or it cannot be read (it is about to be rewritten: a
    damaged one loses nothing that can be recovered)."""
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
        found, budget = earlier.get("run_warnings"), earlier.get("budget")
    except (OSError, ValueError, AttributeError):
        return [], None
    return ([w for w in found if isinstance(w, str)] if isinstance(found, list) else [],
            budget if isinstance(budget, dict) else None)


def summarise_run(run_dir: Path, module: Any, *, warnings: list[str] | None = None,
                  records: RecordSet | None = None, budget: dict | None = None) -> dict:
    """Write ``summary.json`` and ``metrics.csv`` from ``results.jsonl``; returns the summary.

    The records are read through a :class:`~convsim.results.recordset.RecordSet` (an index, not the records;
    each pass reads the file again), so memory stays flat in the number of sessions.
    ``module.dataset_metrics`` gets each variant's scored records as a RecordSet: a sequence to
    iterate (as often as it needs), index and measure, not a list. ``records``: the run's records
    already indexed (the runner's store keeps the index as it writes, see ``RunStore.record_set``);
    otherwise results.jsonl is indexed here, its text and every record's fields checked
    (:func:`convsim.results.recordset.check_record`: a record of the wrong shape is one ConvsimError naming
    the file, the line and the field). ``warnings``: the run's own (``run_warnings``), and ``budget``:
    what its last attempt spent of its run budget (convsim.providers.limits.Spent.report); with warnings None
    (a rebuild), those of the summary.json being rebuilt are kept."""
    store = RunStore(run_dir)
    if warnings is None:  # a rebuild (``convsim report``): keep what the run itself wrote
        warnings, budget = _from_the_run(Path(run_dir) / "summary.json")
    if records is None:
        store.repair()
        records = RecordSet.scan(store.results_path, check=check_record) \
            if store.results_path.exists() else RecordSet(store.results_path, [])
    summary: dict[str, Any] = {"variants": {}, "status_counts": status_counts(records),
                               "first_error": first_error(records), "warnings": list(warnings),
                               "run_warnings": list(warnings)}
    rows = []
    by_variant = {v: records.where(variant=v) for v in _config_order(run_dir, records.variants)}
    usage = {}
    ranges = metric_ranges(module)
    failed: HookError | None = None  # the first variant whose dataset_metrics raised (raised at the end)
    for variant, recs in by_variant.items():
        scored = recs.where(statuses=SCORED_STATUSES)
        counts = status_counts(recs)
        huge: list[str] = []
        wrong: dict[str, int] = {}
        bare = [0]
        metrics, usage[variant] = _metrics_and_usage(recs, out_of_range=huge, ranges=ranges, outside_range=wrong,
                                                     without_metrics=bare)
        if bare[0]:  # a graph that reached END without its evaluation node (an edge to END too early?)
            summary["warnings"].append(
                f"variant {variant}: {bare[0]} of {len(scored)} scored sessions ended without dialogue metrics "
                "(did the graph reach END before its evaluation node?)")
        for name, count in Counter(huge).items():
            summary["warnings"].append(
                f"variant {variant}: metric {name}: {count} value{'s' * (count > 1)} beyond ±{METRIC_LIMIT:g} "
                "left out as not applicable (a bug in the metric? averaging such values overflows)")
        for name, sessions in wrong.items():
            summary["warnings"].append(out_of_range_warning(variant, name, sessions, range_of(ranges, name)))
        dataset: Any = {}
        if scored:
            try:
                dataset = module.dataset_metrics(scored)
                if not isinstance(dataset, Mapping):
                    raise TypeError(f"dataset_metrics must return a dict, got {type(dataset).__name__}")
            except ConvsimError:
                raise  # bad input (a damaged data file it reads): one line, exit 2
            except Exception as exc:  # a bug in graph code: the summary is written without it, then raised
                error = hook_failure("dataset_metrics", exc, file=getattr(module, "__file__", None),
                                     run_dir=run_dir, kept="results.jsonl, summary.json and metrics.csv are")
                error.__cause__ = exc
                failed = failed or error
                summary["warnings"].append(f"variant {variant}: dataset_metrics raised {type(exc).__name__}: "
                                           "its dataset metrics are missing")
                dataset = {}
        # n: sessions ok; scored: what the metrics average over (ok and agent failures: the system
        # under test failing is its score), each metric's own n lower where it is None
        n_scored = counts["ok"] + counts["agent_failure"]
        summary["variants"][variant] = {"n": counts["ok"], "scored": n_scored, "errors": counts["errors"],
                                        "no_dialogue_metrics": bare[0],
                                        "status_counts": counts, "metrics": metrics, "dataset": dataset}
        row: dict[str, Any] = {"variant": variant, "n": counts["ok"], "scored": n_scored,
                               "agent_failures": counts["agent_failure"],
                               "simulator_failures": counts["simulator_failure"],
                               "errors": counts["errors"]}
        for name, ci in metrics.items():
            row[f"{name}_mean"] = ci["mean"]
            row[f"{name}_ci_low"] = ci["ci_low"]
            row[f"{name}_ci_high"] = ci["ci_high"]
            if "ci_clipped" in ci:  # a metric with a declared range
                row[f"{name}_ci_clipped"] = ci["ci_clipped"]
            row[f"{name}_n"] = ci["n"]
            row[f"{name}_trials_per_session"] = ci["trials_per_session"]
        for name, value in _scalar_items(dataset, "dataset.").items():
            row[name] = value
        rows.append(row)
    summary["usage"] = usage  # calls, tokens, latency (convsim.providers.usage)
    if budget is not None:
        summary["budget"] = budget
    store.write_json("summary.json", summary)
    columns: list[str] = []
    for row in rows:
        for k in row:
            if k not in columns:
                columns.append(k)
    with open(Path(run_dir) / "metrics.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    if failed is not None:
        raise failed
    return summary
