"""The report's figures with hostile names and many variants (findings of a browser audit):
a "$" in a name is text, not mathtext; figures grow with the number of variants."""

import json

import pytest

from analysis_runs import make_run
from convsim.evaluation.reporting import plots
from convsim.evaluation.reporting.analysis import analyze_run

MATH = "$\\frac{a$ b_c^d"
DOLLARS = "$5 vs $10"


def _rename(run_dir, metrics: dict, variants: dict):
    path = run_dir / "results.jsonl"
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        r["dialogue_metrics"] = {metrics.get(k, k): v for k, v in r["dialogue_metrics"].items()}
        r["variant"] = variants.get(r["variant"], r["variant"])
        out.append(json.dumps(r))
    path.write_text("\n".join(out) + "\n")
    cfg = run_dir / "config.yaml"
    text = cfg.read_text()
    for a, b in variants.items():
        text = text.replace(f"name: {a}\n", f"name: '{b}'\n")
    cfg.write_text(text)


def test_dollar_signs_in_names_are_text_not_mathtext(tmp_path):
    """matplotlib parsed "$\\frac{a$" as a formula and raised: the analysis hook failed and no
    report was written."""
    run_dir = make_run(tmp_path, variants=("a", "b"), sessions=4)
    _rename(run_dir, {"tas_grounded": MATH, "tas_cas": DOLLARS, "judge_coherence": "judge_$x$"},
            {"a": "v$1", "b": "$b_2$"})
    analyze_run(run_dir)
    html = (run_dir / "report.html").read_text()
    assert "$\\frac{a$ b_c^d" in html and "$5 vs $10" in html
    figures = {p.name for p in (run_dir / "figures").glob("*.png")}
    assert any(name.startswith("headline_") for name in figures) and "distributions.png" in figures


@pytest.mark.parametrize("name", [MATH, DOLLARS])
def test_every_figure_takes_a_dollar_name(tmp_path, name):
    d = {"n": 2, "mean": 1.0, "ci_low": 0.5, "ci_high": 1.5}
    assert plots.headline_figure(name, {name: [1.0, 2.0], "b": [2.0]}, {name: d, "b": d}, tmp_path)
    assert plots.bar_charts({name: {name: d, "b": d}}, tmp_path)
    assert plots.distributions({name: {name: [1.0, 2.0]}}, tmp_path)
    assert plots.judge_radar({name: {f"judge_{name}": 3, "judge_b": 4, "judge_c": 2}}, tmp_path)
    recs = [{"variant": name, "session_id": f"s{i}", "seed": i, "status": "ok",
             "dialogue_metrics": {name: float(i), "m": float(i % 3), "k": float(i * i % 5)},
             "turn_metrics": [{"turn": 1, f"tas_{name}": 0.5}, {"turn": 2, f"tas_{name}": 0.7}],
             "transcript": []} for i in range(6)]
    assert plots.correlation_heatmap(recs, [name, "m", "k"], tmp_path)
    assert plots.scatter_against(recs, [name], ["m"], tmp_path)
    assert plots.tas_timelines(recs, tmp_path)


LONG = ("variant_alpha_with_a_rather_long_descriptive_name", "b2", "c3", "d4", "e5", "f6", "g7",
        "h8_another_variant_with_a_long_name")


def _drawn(monkeypatch):
    """The figures the plots module saves, kept open (drawn) instead of written."""
    figs = []

    def keep(fig, out_dir, stem, **margins):
        fig.subplots_adjust(**{"left": 0.14, "right": 0.97, "bottom": 0.2, "top": 0.88, "wspace": 0.45,
                               "hspace": 0.7, **margins})
        fig.canvas.draw()
        figs.append(fig)
        return stem
    monkeypatch.setattr(plots, "_save", keep)
    return figs


def _overlaps(boxes) -> bool:
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


@pytest.mark.parametrize("k", [2, 5, 8])
def test_tick_labels_and_titles_fit(monkeypatch, tmp_path, k):
    """From about five variants the labels overlapped in the fixed 3.2-inch headline figure, and a
    title longer than about 40 characters was cut at the figure's edge."""
    figs = _drawn(monkeypatch)
    names = LONG[:k]
    values = {v: [float(i), float(i) + 1] for i, v in enumerate(names)}
    d = {v: {"n": 2, "mean": i + 0.5, "ci_low": float(i), "ci_high": i + 1.0} for i, v in enumerate(names)}
    title = "a_metric_with_a_long_name_such_as_judge_proactiveness_mean_over_turns"
    plots.headline_figure(title, values, d, tmp_path)
    plots.bar_charts({title: d}, tmp_path)
    plots.distributions({title: values}, tmp_path)
    for fig in figs:
        renderer = fig.canvas.get_renderer()
        fig_box = fig.bbox
        for ax in fig.axes:
            if not ax.get_visible() or not ax.axison:
                continue
            ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
            assert len(ticks) == k and not _overlaps(ticks), fig.get_size_inches()
            for box in ticks + [ax.title.get_window_extent(renderer)]:
                assert box.x0 >= -1 and box.x1 <= fig_box.x1 + 1 and box.y0 >= -1 and box.y1 <= fig_box.y1 + 1
            assert not any(t.overlaps(ax.title.get_window_extent(renderer)) for t in ticks)
    assert figs[0].get_size_inches()[0] > 3.2 if k >= 5 else figs[0].get_size_inches()[0] == 3.2
