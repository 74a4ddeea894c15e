"""Reading a run directory and pulling metrics out of result records, for any graph.

Metric discovery is generic: every numeric leaf of ``dialogue_metrics`` (nested dicts flattened
as ``a.b``, booleans as 0/1), the same names the engine's metrics.csv uses. Judge metrics are the
ones named ``judge_<criterion>`` (agents/judge.py), minus the bookkeeping flags.
"""

from __future__ import annotations

import csv
import math
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from convsim import ConvsimError, flatten_metrics
from convsim.results.aggregate import record_sort_key, session_means_by_index
from convsim.results.recordset import RECORD_FIELDS, RecordSet, check_record  # noqa: F401 — re-exported
from convsim.results.summary import SCORED_STATUSES
from convsim.textio import load_json, load_yaml

JUDGE_PREFIX = "judge_"
# bookkeeping that shares the judge_ prefix but is not a judge score (never correlated or tested)
JUDGE_FLAGS = ("judge_failed", "judge_heuristic", "judge_failures", "judge_calls", "judge_failure_rate")


# the engine's flattening, so the report sees exactly the metrics of metrics.csv
flat_numeric = flatten_metrics


def sort_records(records: Sequence[Mapping]) -> Sequence[Mapping]:
    """Records in (variant, session id, trial) order; a RecordSet is in that order already."""
    return records if isinstance(records, RecordSet) else sorted(records, key=record_sort_key)


def scored(records: Sequence[Mapping]) -> Sequence[Mapping]:
    """The records agent scores are computed over: ``ok`` and ``agent_failure`` (scored as the
    metric defines); simulator failures and errors are counted elsewhere, never scored."""
    if isinstance(records, RecordSet):
        return records.where(statuses=SCORED_STATUSES)
    return [r for r in records if r.get("status", "ok") in SCORED_STATUSES]


def slim_records(records: Sequence[Mapping]) -> list[dict]:
    """Each record's identity, status and numeric dialogue metrics only (a few KB where the record
    may hold 50 KB of transcript): for figures that pass over the metrics many times."""
    return [{"variant": r.get("variant"), "session_id": r.get("session_id"), "trial": r.get("trial", 0),
             "seed": r.get("seed"), "status": r.get("status", "ok"),
             "dialogue_metrics": {k: v for k, v in (r.get("dialogue_metrics") or {}).items()
                                  if v is None or isinstance(v, (int, float))}} for r in records]


@dataclass
class RunData:
    """A loaded run. ``records`` is a :class:`~convsim.results.recordset.RecordSet` when read from disk
    (an index; each pass reads the file again), or any sequence of dicts built in memory."""
    run_dir: Path
    config: dict = field(default_factory=dict)
    records: Sequence[dict] = field(default_factory=list)
    summary: dict | None = None
    metrics_rows: list[dict] = field(default_factory=list)
    _table: "MetricTable | None" = field(default=None, repr=False)

    @property
    def ok_records(self) -> Sequence[dict]:
        """The scored records (:func:`scored`)."""
        return scored(self.records)

    @property
    def table(self) -> "MetricTable":
        """The :class:`MetricTable` of the scored records, built once (one pass over the file)."""
        if self._table is None:
            self._table = metric_table(self.ok_records)
        return self._table

    @property
    def variants(self) -> list[str]:
        """The run's variants in the config's order (its first is the default baseline), then any
        other variant found in the records, by name; never the order sessions happened to finish in."""
        found = set(self.records.variants) if isinstance(self.records, RecordSet) else \
            {r.get("variant") for r in self.records}
        configured = [v.get("name") for v in (self.config or {}).get("variants") or [] if isinstance(v, dict)]
        ordered = [v for v in configured if v in found]
        return ordered + sorted((v for v in found if v not in ordered), key=str)


def load_run(run_dir: str | Path) -> RunData:
    """config.yaml, results.jsonl, summary.json and metrics.csv of a run (the last two optional).

    Records are indexed, not held (a :class:`~convsim.results.recordset.RecordSet`, one per session, sorted
    by (variant, session id, trial)); every file goes through convsim.textio (UTF-8, bounded
    nesting, one-line errors naming the file)."""
    run_dir = Path(run_dir)
    results = run_dir / "results.jsonl"
    if not results.exists():
        raise ConvsimError("not a run directory: results.jsonl is missing", file=str(run_dir))
    records = RecordSet.scan(results, check=check_record)
    if not records:
        raise ConvsimError("results.jsonl holds no records", file=results)
    data = RunData(run_dir=run_dir, records=records)
    cfg = run_dir / "config.yaml"
    if cfg.exists():
        data.config = load_yaml(cfg) or {}
        if not isinstance(data.config, dict):
            raise ConvsimError("config.yaml must be a YAML mapping", file=cfg)
    summary = run_dir / "summary.json"
    if summary.exists():
        data.summary = load_json(summary)
        if not isinstance(data.summary, dict):
            raise ConvsimError("summary.json must be a JSON object", file=summary)
    csv_path = run_dir / "metrics.csv"
    if csv_path.exists():
        try:
            with open(csv_path, encoding="utf-8", newline="") as fh:
                data.metrics_rows = list(csv.DictReader(fh))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ConvsimError(f"unreadable CSV: {str(exc).splitlines()[0]}", file=csv_path) from None
    return data


def metric_names(records: Sequence[Mapping] | "MetricTable") -> list[str]:
    """Numeric dialogue metrics that have at least one value, in first-seen order."""
    if isinstance(records, MetricTable):
        return records.names
    return metric_names_of(flat_numeric(r.get("dialogue_metrics")) for r in records)


def is_judge_metric(name: str) -> bool:
    return name.startswith(JUDGE_PREFIX) and name not in JUDGE_FLAGS


def is_heuristic_metric(name: str) -> bool:
    """A heuristic judge's score (model ``none``): ``heuristic_<metric>`` or ``judge_heuristic_*``.
    Labelled as such everywhere, and kept out of correlations: it is no judge's verdict to
    validate an automatic metric against (nor an automatic metric to validate)."""
    return name.startswith("heuristic_") or name.startswith(f"{JUDGE_PREFIX}heuristic_")


def pair_key(record: Mapping) -> str:
    """One session attempt: session id and trial (the engine derives the seed from them). Tests and
    intervals never treat these as units: trials of one session are averaged first
    (:meth:`MetricTable.units`)."""
    return f"{record.get('session_id')}#{record.get('trial', 0)}"


def seeds_match(x, y) -> bool:
    """Whether two units ran with the same seeds: True when either records none; for session
    signatures (tuples of ``(trial, seed)``, :meth:`MetricTable.units`) when they share a trial and
    agree on every trial they share (a seed None matches any); otherwise plain equality."""
    if x is None or y is None:
        return True
    if isinstance(x, tuple) and isinstance(y, tuple):
        dx, dy = dict(x), dict(y)
        common = dx.keys() & dy.keys()
        return bool(common) and all(dx[t] is None or dy[t] is None or dx[t] == dy[t] for t in common)
    return x == y


@dataclass
class MetricTable:
    """Every record's numeric dialogue metrics, flattened once: a column (float array, NaN where a
    session has no value) per metric, beside each record's variant, pair key, session id and seed.
    Building it costs one flatten per record (and one pass over a RecordSet), where asking the
    records metric by metric cost one per metric; it holds a few numbers per session, never the
    records."""
    variants: list[str]
    keys: list[str]
    seeds: list
    columns: dict[str, np.ndarray]
    sessions: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)  # metrics the records name with no finite value
    trials: list[int] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def units(self, metric: str, variant: str | None = None) -> dict[tuple[str, str], tuple[float, object, int]]:
        """The statistical units: ``{(variant, session id): (mean over its trials, seeds, trials)}``
        over the records that have the metric (only ``variant``'s when given), sorted by key.

        A session's trials replay the same customer with the same inputs but the trial, so they are
        not independent observations: every test and interval is over sessions, each the mean of its
        trials (summed in trial order). ``seeds`` is the tuple of ``(trial, seed)`` of the trials
        averaged (None when no trial records a seed), for :func:`seeds_match`."""
        col = self.columns.get(metric)
        groups: dict[tuple[str, str], list[tuple[int, float, object]]] = {}
        if col is not None:
            trials = self.trials or [0] * len(self.keys)
            for i, (v, s) in enumerate(zip(self.variants, self.sessions)):
                if (variant is None or v == variant) and not np.isnan(col[i]):
                    groups.setdefault((v, s), []).append((trials[i], float(col[i]), self.seeds[i]))
        out = {}
        for key in sorted(groups):
            rows = sorted(groups[key], key=lambda r: r[0])
            vals = [x for _, x, _ in rows]
            seeds = tuple((t, seed) for t, _, seed in rows)
            out[key] = (vals[0] if len(vals) == 1 else float(np.mean(vals)),
                        None if all(seed is None for _, seed in seeds) else seeds, len(vals))
        return out

    def session_keys(self, variant: str | None = None) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The sorted ``(variant, session id)`` units (only ``variant``'s when given) and, per record,
        its unit's index in that list (-1: another variant's record)."""
        keys = sorted({(v, s) for v, s in zip(self.variants, self.sessions) if variant is None or v == variant})
        where = {k: i for i, k in enumerate(keys)}
        codes = np.fromiter((where.get((v, s), -1) for v, s in zip(self.variants, self.sessions)),
                            dtype=np.int64, count=len(self.sessions))
        return keys, codes

    def session_column(self, metric: str, codes: np.ndarray, n_keys: int) -> np.ndarray:
        """The metric's value per unit of :meth:`session_keys` (``codes``, ``n_keys``), each the mean of
        its trials as :meth:`units` gives it, NaN where the unit has none: one float array, not a
        dict of tuples (what the correlations hold for every metric at once)."""
        out = np.full(n_keys, np.nan)
        col = self.columns.get(metric)
        if col is None or n_keys == 0:
            return out
        mine = codes >= 0
        trials = np.asarray(self.trials or [0] * len(self.keys), dtype=np.int64)
        means, _, index = session_means_by_index(codes[mine], trials[mine], col[mine])
        out[index] = means
        return out

    def by_session(self, metric: str) -> dict[str, dict[str, float]]:
        """``{variant: {session id: mean over its trials}}``: what every test and interval is over."""
        return self.sessions_and_trials(metric)[0]

    def trial_counts(self, metric: str) -> dict[str, list[int]]:
        """``{variant: [trials averaged per session]}`` (sessions in :meth:`by_session` order)."""
        return self.sessions_and_trials(metric)[1]

    def sessions_and_trials(self, metric: str) -> tuple[dict[str, dict[str, float]], dict[str, list[int]]]:
        """:meth:`by_session` and :meth:`trial_counts` from one pass of :meth:`units`."""
        means: dict[str, dict[str, float]] = {v: {} for v in dict.fromkeys(self.variants)}
        counts: dict[str, list[int]] = {v: [] for v in means}
        for (v, s), (x, _, k) in self.units(metric).items():
            means[v][s] = x
            counts[v].append(k)
        return means, counts

    def by_variant(self, metric: str) -> dict[str, dict[str, float]]:
        """``{variant: {pair_key: value}}``, one value per trial (pair keys: :func:`pair_key`): for
        figures of every record; tests and intervals use :meth:`by_session`."""
        out: dict[str, dict[str, float]] = {}
        col = self.columns.get(metric)
        for i, (v, k) in enumerate(zip(self.variants, self.keys)):
            bucket = out.setdefault(v, {})
            if col is not None and not np.isnan(col[i]):
                bucket[k] = float(col[i])
        return out

    def values(self, metric: str, variant: str | None = None) -> list[float | None]:
        """One value per record (None where missing), optionally only ``variant``'s records."""
        col = self.columns[metric]
        return [None if np.isnan(x) else float(x) for x, v in zip(col, self.variants)
                if variant is None or v == variant]


def metric_table(records: Sequence[Mapping]) -> MetricTable:
    """The :class:`MetricTable` of ``records`` (metrics in first-seen order, those with a value only),
    built in one streaming pass: a column grows by one float per record."""
    cols: dict[str, array] = {}
    has_value: dict[str, bool] = {}
    variants, keys, seeds, sessions, trials = [], [], [], [], []
    for i, r in enumerate(records):
        for name, value in flat_numeric(r.get("dialogue_metrics")).items():
            col = cols.get(name)
            if col is None:
                col = cols[name] = array("d")
                has_value[name] = False
            if len(col) < i:
                col.extend(_nans(i - len(col)))
            col.append(math.nan if value is None else value)
            has_value[name] = has_value[name] or value is not None
        variants.append(sys.intern(str(r.get("variant", "default"))))
        keys.append(pair_key(r))
        seeds.append(r.get("seed"))
        sessions.append(str(r.get("session_id")))
        trial = r.get("trial", 0)
        trials.append(trial if isinstance(trial, int) and not isinstance(trial, bool) else 0)
    n = len(keys)
    columns = {}
    for name, col in cols.items():
        if has_value[name]:
            col.extend(_nans(n - len(col)))
            columns[name] = np.frombuffer(col, dtype=float) if n else np.empty(0)
    return MetricTable(variants=variants, keys=keys, seeds=seeds, columns=columns, sessions=sessions,
                       empty=[name for name in cols if not has_value[name]], trials=trials)


def _nans(k: int) -> array:
    return array("d", [math.nan]) * k


def metric_names_of(flats: Sequence[Mapping]) -> list[str]:
    names: dict[str, bool] = {}
    for f in flats:
        for k, v in f.items():
            names[k] = names.get(k, False) or v is not None
    return [k for k, has in names.items() if has]


def is_paired(records: Sequence[Mapping] | MetricTable) -> bool:
    """True when at least two variants share sessions and every shared session has the same seed."""
    table = records if isinstance(records, MetricTable) else None
    triples = zip(table.keys, table.variants, table.seeds) if table is not None else \
        ((pair_key(r), r.get("variant"), r.get("seed")) for r in records)
    seeds: dict[str, set] = {}
    variants_by_key: dict[str, set] = {}
    for k, variant, seed in triples:
        seeds.setdefault(k, set()).add(seed)
        variants_by_key.setdefault(k, set()).add(variant)
    shared = [k for k, vs in variants_by_key.items() if len(vs) > 1]
    return bool(shared) and all(len(seeds[k]) == 1 for k in shared)


def reference_variants(run: RunData) -> list[str]:
    """Variants config.yaml marks ``reference: true``: shown beside the others but never compared
    with them (e.g. courses' given_lists, whose fixed lists say nothing about a retriever)."""
    marked = {v.get("name") for v in (run.config or {}).get("variants") or []
              if isinstance(v, Mapping) and v.get("reference") is True}
    return [v for v in run.variants if v in marked]
