"""METRIC_RANGES: a graph file's declared metric ranges clip a mean's interval (and a difference's) in
summary.json, metrics.csv, stats.json, the report's headline and compare, with ``ci_clipped`` set
only when an end moved; a value outside its range is a warning; a malformed declaration is bad input
(exit 2, one line); and the shipped graphs' declarations hold on real runs of the shipped configs."""
import csv
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from convsim.config import config_from_dict
from convsim.running.requirements import config_needs
import yaml

import convsim
from cli_helpers import one_line
from convsim import ConvsimError, load_graph_module
from convsim.results.aggregate import mean_ci, mean_diff_ci
from convsim.results.metric_ranges import check_metric_ranges, metric_ranges, outside, range_of
from convsim.running.store import RunStore
from convsim.results.summary import flatten_metrics, summarise_run
from convsim.evaluation.reporting import stats
from convsim.evaluation.reporting.compare import compare_runs
from convsim.evaluation.reporting.compare_text import format_comparison
from convsim.evaluation.reporting.headline import headline_table
from convsim.evaluation.reporting.run_stats import run_statistics

ROOT = Path(__file__).resolve().parents[1]
HIGH = [0.9, 1.0, 1.0, 0.95]  # a share near 1: its Student t interval ends at 1.039
RANGES = {"share": (0.0, 1.0), "words": (0.0, None)}


def _records(variant, values, **other):
    return [{"variant": variant, "session_id": f"s{i}", "trial": 0, "seed": i, "status": "ok",
             "dialogue_metrics": {"share": x, **{k: v[i] for k, v in other.items()}}}
            for i, x in enumerate(values)]


def _write_run(run_dir: Path, records, graph=None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if graph is not None:
        (run_dir / "config.yaml").write_text(yaml.safe_dump({"name": "x", "graph": str(graph)}), encoding="utf-8")
    return run_dir


def _graph_file(tmp_path: Path, declaration: str) -> Path:
    """A copy of hello_chat with a METRIC_RANGES line of its own."""
    graph = tmp_path / "graphs" / "ranged.py"
    graph.parent.mkdir(parents=True, exist_ok=True)
    graph.write_text((ROOT / "graphs" / "hello_chat.py").read_text(encoding="utf-8")
                     + f"\nMETRIC_RANGES = {declaration}\n", encoding="utf-8")
    return graph


# ---------------------------------------------------------------- the interval itself

def test_mean_ci_is_clipped_to_the_range_and_says_so():
    free = mean_ci(HIGH)
    assert free["ci_high"] > 1 and "ci_clipped" not in free  # no range: as before, no marker
    ci = mean_ci(HIGH, bounds=(0.0, 1.0))
    assert ci["ci_high"] == 1.0 and ci["ci_low"] == free["ci_low"] and ci["ci_clipped"] is True
    inside = mean_ci([0.4, 0.5, 0.6], bounds=(0.0, 1.0))
    assert inside["ci_clipped"] is False and inside["ci_low"] == mean_ci([0.4, 0.5, 0.6])["ci_low"]
    assert mean_ci([0.0, 0.1, 0.05], bounds=(0.0, None))["ci_low"] == 0.0  # a count near 0: no negative end
    wrong = mean_ci([0.9, 1.0, 1.3, 0.95], bounds=(0.0, 1.0))  # a value outside: the range does not hold
    assert wrong["ci_clipped"] is False and wrong["ci_high"] > 1


def test_a_difference_is_clipped_to_low_minus_high_and_high_minus_low():
    for paired in (True, False):
        free = mean_diff_ci([0.0, 0.0], [0.9, 1.0], paired=paired)
        ci = mean_diff_ci([0.0, 0.0], [0.9, 1.0], paired=paired, bounds=(0.0, 1.0))
        assert free["ci_high"] > 1 and ci["ci_high"] == 1.0 and ci["ci_clipped"] is True
        assert ci["ci_low"] == free["ci_low"]
    # a half-bounded range says nothing about a difference: no clipping, no marker
    assert "ci_clipped" not in mean_diff_ci([0.0, 0.0], [0.9, 1.0], paired=True, bounds=(0.0, None))
    assert mean_diff_ci([0.1, 0.2, 0.3], [0.2, 0.2, 0.5], paired=True, bounds=(0.0, 1.0))["ci_clipped"] is False


def test_names_and_patterns():
    ranges = check_metric_ranges({"W*": (0, 1), "W3_zero_members": (0, None), "*@10": (0, 1), "free": (None, None)})
    assert range_of(ranges, "W2_all_members") == (0.0, 1.0)
    assert range_of(ranges, "W3_zero_members") == (0.0, None)  # the exact name wins over a pattern
    assert range_of(ranges, "ndcg@10") == (0.0, 1.0) and range_of(ranges, "ndcg@100") is None
    assert range_of(ranges, "free") is None and range_of(ranges, "other") is None
    assert range_of(check_metric_ranges({"a.b": (0, 1)}), "axb") is None  # only * is special
    assert outside([1.0000000715, -1e-12, 0.5], (0.0, 1.0)).tolist() == [False, False, False]  # rounding
    assert outside([1.01, float("nan")], (0.0, 1.0)).tolist() == [True, False]


# ---------------------------------------------------------------- where intervals are reported

def test_summary_json_and_metrics_csv_clip_and_mark(tmp_path):
    recs = _records("A", HIGH, words=[3.0, 4.0, 5.0, 4.0], mid=[0.4, 0.5, 0.6, 0.5])
    module = SimpleNamespace(dataset_metrics=lambda records: {}, METRIC_RANGES={**RANGES, "mid": (0.0, 1.0)})
    summary = summarise_run(_write_run(tmp_path, recs), module)
    metrics = summary["variants"]["A"]["metrics"]
    assert metrics["share"]["ci_high"] == 1.0 and metrics["share"]["ci_clipped"] is True
    assert metrics["share"]["ci_method"] == "Student t"
    assert metrics["mid"]["ci_clipped"] is False and metrics["words"]["ci_clipped"] is False
    (row,) = csv.DictReader((tmp_path / "metrics.csv").open(encoding="utf-8"))
    assert float(row["share_ci_high"]) == 1.0 and row["share_ci_clipped"] == "True" and row["mid_ci_clipped"] == "False"
    assert not any("declared range" in w for w in summary["warnings"])
    # undeclared: no marker, the interval as computed
    bare = summarise_run(tmp_path, SimpleNamespace(dataset_metrics=lambda records: {}))["variants"]["A"]["metrics"]
    assert bare["share"]["ci_high"] > 1 and "ci_clipped" not in bare["share"]


def test_a_value_outside_its_range_is_a_warning_naming_metric_variant_and_sessions(tmp_path):
    recs = _records("A", [0.9, 1.2, 1.4, 0.95]) + _records("B", [0.5, 0.6, 0.7, 0.6])
    module = SimpleNamespace(dataset_metrics=lambda records: {}, METRIC_RANGES=RANGES)
    summary = summarise_run(_write_run(tmp_path, recs), module)
    (warning,) = [w for w in summary["warnings"] if "declared range" in w]
    assert "variant A" in warning and "metric share" in warning and "2 sessions" in warning and "[0, 1]" in warning
    share = summary["variants"]["A"]["metrics"]["share"]
    assert share["ci_clipped"] is False and share["ci_high"] > 1  # not clipped: the range did not hold
    # a trial's value outside, its session's mean inside: still a warning (1 session)
    trials = [{"variant": "C", "session_id": "s0", "trial": t, "seed": t, "status": "ok",
               "dialogue_metrics": {"share": x}} for t, x in enumerate((1.5, 0.1))]
    summary = summarise_run(_write_run(tmp_path / "t", trials + _records("C", [0.5, 0.6])[1:]), module)
    assert any("variant C" in w and "1 session with" in w for w in summary["warnings"])
    out = run_statistics(recs, ranges=RANGES)
    assert any("variant A" in w and "metric share" in w for w in out["warnings"])


def test_describe_and_stats_json_clip_and_mark():
    d = stats.describe(HIGH, bounds=(0.0, 1.0))
    assert d["ci_high"] == 1.0 and d["ci_clipped"] is True
    assert stats.describe([0.4, 0.5, 0.6], bounds=(0.0, 1.0))["ci_clipped"] is False
    assert "ci_clipped" not in stats.describe(HIGH) and stats.describe(HIGH)["ci_high"] > 1
    recs = _records("A", HIGH) + _records("B", [0.0, 0.1, 0.0, 0.05])
    out = run_statistics(recs, ranges=RANGES)
    variants = out["metrics"]["share"]["variants"]
    assert variants["A"]["ci_high"] == 1.0 and variants["A"]["ci_clipped"] is True
    assert variants["B"]["ci_low"] == 0.0 and variants["B"]["ci_clipped"] is True
    for pair in out["metrics"]["share"]["tukey"]["pairs"]:
        assert -1.0 <= pair["ci_low"] <= pair["ci_high"] <= 1.0
    free = run_statistics(recs)["metrics"]["share"]["variants"]["A"]
    assert free["ci_high"] > 1 and "ci_clipped" not in free
    # descriptives only (UNCOMPARED_METRICS) are clipped too
    assert run_statistics(recs, ranges=RANGES, uncompared={"share": "why"})["metrics"]["share"]["variants"]["A"][
        "ci_clipped"] is True


def test_the_report_headline_clips_cells_and_differences():
    recs = _records("A", [0.0, 0.0, 0.0, 0.0]) + _records("B", [0.9, 1.0, 1.0, 0.95])
    table = headline_table(recs, ["A", "B"], ["share"], "A", ranges=RANGES)
    (row,) = table["rows"]
    assert row["cells"]["B"]["ci_high"] == 1.0 and row["cells"]["B"]["ci_clipped"] is True
    assert row["cells"]["A"]["ci_clipped"] is False
    diff = row["diffs"]["B"]
    assert diff["ci_method"] == "paired t" and diff["ci_high"] == 1.0 and diff["ci_clipped"] is True


def test_compare_clips_the_difference_and_marks_it(tmp_path):
    graph = _graph_file(tmp_path, '{"share": (0.0, 1.0)}')
    a = _write_run(tmp_path / "a", _records("A", [0.0, 0.0]), graph)
    b = _write_run(tmp_path / "b", _records("A", [0.9, 1.0]), graph)
    (row,) = compare_runs(a, b)["rows"]
    assert row["ci_method"] == "paired t" and row["ci_high"] == 1.0 and row["ci_clipped"] is True
    text = format_comparison(compare_runs(a, b))
    assert "‡" in text and "clipped" in text
    plain = _graph_file(tmp_path / "plain", "{}")
    (row,) = compare_runs(_write_run(tmp_path / "c", _records("A", [0.0, 0.0]), plain),
                          _write_run(tmp_path / "d", _records("A", [0.9, 1.0]), plain))["rows"]
    assert row["ci_high"] > 1 and "ci_clipped" not in row


# ---------------------------------------------------------------- bad declarations

@pytest.mark.parametrize("declaration, words", [
    ('[("accuracy", 0, 1)]', "must be a dict"),
    ('{"accuracy": (1.0, 0.0)}', "low must be below high"),
    ('{"accuracy": (0.0, "1")}', "high bound"),
    ('{"accuracy": 1.0}', "must be a pair"),
    ('{"accuracy": (0.0, 1.0, 2.0)}', "must be a pair"),
    ('{"accuracy": (float("nan"), 1.0)}', "low bound"),
    ('{"accuracy": (False, 1.0)}', "low bound"),
    ('{"": (0.0, 1.0)}', "non-empty string"),
])
def test_a_malformed_declaration_is_one_line_and_exit_2(tmp_path, declaration, words):
    graph = _graph_file(tmp_path, declaration)
    one_line(["run", graph, "--sessions", "1", "--out", tmp_path / "runs"], "ranged.py", "METRIC_RANGES", words)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("results.jsonl"))
    with pytest.raises(ConvsimError, match="METRIC_RANGES"):
        load_graph_module(str(graph))


# ---------------------------------------------------------------- the shipped declarations

def _offline(cfg: dict) -> dict | None:
    """The config with only the variants that run offline (model none, the TF-IDF embedder); None
    when nothing is left."""
    def offline(part) -> bool:
        text = json.dumps(part or {})
        return not any(k in text for k in ("ollama:", "openai:", "llamacpp:", "st:"))
    if not offline({k: cfg.get(k) for k in ("models", "embedder", "params")}):
        return None
    variants = [v for v in cfg.get("variants") or [] if offline(v)]
    if cfg.get("variants") and not variants:
        return None
    return {**cfg, "variants": variants} if variants else cfg


SHIPPED = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))


def test_every_shipped_graph_declares_ranges():
    for name in ("hello_chat", "crs_shift", "customer_service", "group_planning", "course_retrieval"):
        assert metric_ranges(load_graph_module(name)), name


@pytest.mark.slow
@pytest.mark.parametrize("config", SHIPPED)
def test_shipped_declarations_hold_on_a_real_run(config, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = _offline(yaml.safe_load((ROOT / "configs" / config).read_text(encoding="utf-8")))
    if cfg is None:
        pytest.skip(f"{config} needs a model server or a sentence embedder")
    missing = [n.what for n in config_needs(config_from_dict(cfg)) if n.kind == "data" and n.met is False]
    if missing:
        pytest.skip(f"{config} reads data that is not here: {', '.join(missing)}")
    run_dir = convsim.run(cfg, sessions=2, out=tmp_path, run_id="r", analyze=False, trace=False)
    ranges = metric_ranges(load_graph_module(cfg["graph"]))
    checked = 0
    for rec in RunStore(run_dir).records():
        for name, value in flatten_metrics(rec.get("dialogue_metrics")).items():
            bounds = range_of(ranges, name)
            if bounds is not None and value is not None:
                checked += 1
                assert not outside([value], bounds).any(), (rec["variant"], rec["session_id"], name, value, bounds)
    assert checked
    summary = json.loads((Path(run_dir) / "summary.json").read_text(encoding="utf-8"))
    assert not [w for w in summary["warnings"] if "declared range" in w]
