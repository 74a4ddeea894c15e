"""The terminal at 80 columns, for every shipped config: the summary (variants as rows, at most four
headline metrics, numbers at 3 significant digits), ``convsim compare`` (headline metrics first,
ordered by the size of the difference, led by the answer sentences) and ``convsim list`` (one line
per config). The runs are synthetic (the config's own variants and graph, metrics of awkward
widths drawn inside each metric's declared range), plus one real run of the demo."""
import io
import json
import re

import numpy as np
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from conftest import ROOT
from convsim import cli, load_graph_module
from convsim.evaluation.reporting.compare import compare_runs
from convsim.evaluation.reporting.compare_text import format_comparison
from convsim.results.metric_ranges import metric_ranges, range_of
from convsim.results.summary import summarise_run
from convsim.results.summary_text import summary_lines

CONFIGS = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
WIDTH = 80


def _value(rng, bounds):
    low, high = bounds or (None, None)
    low = -1000.0 if low is None else low
    high = low + 12345.678 if high is None else high
    return float(rng.uniform(low, high)) * (1e-3 if rng.random() < 0.2 and low >= 0 else 1)


def _synthetic_run(tmp, config: str, seed: int):
    """A run directory of ``config`` (its variants and graph) with 4 sessions per variant."""
    raw = yaml.safe_load((ROOT / "configs" / config).read_text())
    module = load_graph_module(raw["graph"])
    ranges = metric_ranges(module)
    metrics = list(getattr(module, "SUMMARY_METRICS", []) or []) + ["another_metric_with_a_long_name@10"]
    variants = [v["name"] for v in raw.get("variants") or []] or ["default"]
    rng = np.random.default_rng(seed)
    run_dir = tmp / f"{config}-{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(raw))
    with open(run_dir / "results.jsonl", "w") as fh:
        for j, v in enumerate(variants):
            for s in range(4):
                dm = {m: _value(rng, range_of(ranges, m)) for m in metrics}
                if j == 0:
                    dm[metrics[1 % len(metrics)]] = None  # a metric with no value in one variant
                fh.write(json.dumps({"run_id": "w", "variant": v, "session_id": f"s{s}", "trial": 0, "seed": s,
                                     "status": "agent_failure" if (j, s) == (1, 0) else "ok", "error": None,
                                     "models": {}, "params": {}, "llm_calls": [], "elapsed_s": 0.01,
                                     "transcript": [], "turn_metrics": [], "dialogue_metrics": dm}) + "\n")
    summarise_run(run_dir, module)
    return run_dir, module


def _assert_fits(text: str, what: str):
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, f"{what}: lines wider than {WIDTH} columns:\n" + "\n".join(too_wide)


@pytest.mark.parametrize("config", CONFIGS)
def test_summary_and_compare_fit_80_columns(config, tmp_path, monkeypatch):
    run_a, module = _synthetic_run(tmp_path, config, 1)
    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=WIDTH))
    cli.print_summary(run_a)
    text = out.getvalue()
    _assert_fits(text, f"{config} summary")
    summary = json.loads((run_a / "summary.json").read_text())
    _, shown = summary_lines(summary, module.SUMMARY_METRICS, width=WIDTH, module=module)
    assert 1 <= len(shown) <= 4 and shown == [m for m in module.SUMMARY_METRICS if m in shown]
    assert "more metrics in metrics.csv" in text
    assert "…" not in text  # nothing cut (a name too long for its column wraps)
    numbers = re.findall(r"(?<![\w@.])-?\d+\.\d+(?![\w@])", text)
    assert numbers and all(len(n.lstrip("-").replace(".", "").lstrip("0")) <= 3 for n in numbers)  # 3 significant digits
    raw = yaml.safe_load((ROOT / "configs" / config).read_text())
    for v in [v["name"] for v in raw.get("variants") or []] or ["default"]:
        assert re.search(rf"^{re.escape(v[:24])}", text, re.M), f"{v}: no row"  # the variants are the rows
    run_b, _ = _synthetic_run(tmp_path, config, 2)
    comparison = format_comparison(compare_runs(run_a, run_b))
    _assert_fits(comparison, f"{config} compare")


def test_compare_orders_by_the_size_of_the_difference_headline_first(tmp_path):
    run_a, module = _synthetic_run(tmp_path, "courses_reference.yaml", 1)
    run_b, _ = _synthetic_run(tmp_path, "courses_reference.yaml", 2)
    result = compare_runs(run_a, run_b)
    text = format_comparison(result)
    block = text.split("\nvariant oracle\n")[1].split("\nvariant ")[0]
    sentences = [line for line in block.splitlines() if re.match(r"^\S+: (A |B |no |the same|not)", line)]
    assert sentences and sentences[0].split(":")[0] in module.SUMMARY_METRICS  # the answer first
    table = block.split("-" * WIDTH)[1].splitlines()
    names = [line.split()[0] for line in table[1:] if line and not line.startswith((" ", "test:", "n:", "‡", "!", "unpaired"))]
    headline = [m for m in names if m in module.SUMMARY_METRICS]
    assert names[:len(headline)] == headline  # headline metrics first
    rows = {r["metric"]: r for r in result["rows"] if r["variant_a"] == "oracle"}
    ranges = metric_ranges(module)
    from convsim.evaluation.reporting.answer import difference_size
    sizes = [difference_size(rows[m], range_of(ranges, m)) for m in headline if m in rows]
    assert sizes == sorted(sizes, reverse=True)


def test_list_prints_one_line_per_config_within_80_columns():
    res = CliRunner().invoke(cli.app, ["list"], env={"COLUMNS": str(WIDTH)})
    assert res.exit_code == 0, res.output
    _assert_fits(res.output, "list")
    for config in CONFIGS:
        assert sum(line.startswith(config + " ") for line in res.output.splitlines()) == 1, config


def test_the_demo_run_prints_within_80_columns(tmp_path):
    res = CliRunner().invoke(cli.app, ["run", str(ROOT / "configs" / "crs_shift.yaml"), "--sessions", "2",
                                       "--set", "n_turns=4", "--out", str(tmp_path), "--run-id", "w",
                                       "--no-analysis"], env={"COLUMNS": str(WIDTH)})
    assert res.exit_code == 0, res.output
    printed = [line for line in res.output.splitlines() if str(tmp_path) not in line]  # a path is as long as it is
    _assert_fits("\n".join(printed), "run")
    assert re.search(r"^template +2 ", res.output, re.M) and re.search(r"^oracle +2 ", res.output, re.M)


def test_fork_never_prints_turn_none_and_rounds_its_metrics():
    """`convsim fork` printed "diverges at turn None" (a fork whose transcripts agree, a later step
    not) and 35 metrics at 17 digits."""
    from convsim.results.summary_text import fork_lines
    comp = {"first_divergent_turn": None,
            "first_divergent_step": {"step": 41, "forked": {"node": "evaluate_dialogue"}, "differing_keys": ["x"]},
            "dialogue_metrics": {f"m{i:02d}": {"original": 0.48524153585499753, "forked": 0.1 + i / 7} for i in range(35)}}
    lines = fork_lines(comp, headline=["m30"])
    assert "None" not in lines[0] and "step 41" in lines[0] and "evaluate_dialogue" in lines[0]
    assert lines[1] == "  m30: 0.485 -> 4.39"  # the headline metric first, 3 significant digits
    assert len(lines) == 1 + 8 + 1 and lines[-1] == "  27 more changed metrics in the comparison file"
    assert all(len(line) <= WIDTH for line in lines)
    assert fork_lines({"first_divergent_turn": 3, "first_divergent_step": {"step": 9}})[0] == "diverges at turn 3, step 9"
