"""The answer sentences (evaluation/reporting/answer.py): generated from the statistics, "no reliable
difference" where the CI covers 0, the better variant named by the declared direction, the
reference variants quoted and never tested, everything escaped in report.html."""
import re
import types

from analysis_runs import XSS, make_run
from convsim.evaluation.reporting.answer import headline_sentences, pair_sentence, verdict


def _diff(d, lo, hi, p, n=20):
    return {"diff": d, "ci_low": lo, "ci_high": hi, "p_holm": p, "n_paired": n}


def test_the_verdict_follows_the_ci_the_corrected_p_and_the_direction():
    assert verdict(_diff(0.33, 0.25, 0.41, 0.0004), "higher", 0.05) == "better"
    assert verdict(_diff(0.33, 0.25, 0.41, 0.0004), "lower", 0.05) == "worse"
    assert verdict(_diff(-0.2, -0.3, -0.1, 0.001), "lower", 0.05) == "better"
    assert verdict(_diff(0.33, 0.25, 0.41, 0.0004), None, 0.05) == "higher"
    assert verdict(_diff(0.05, -0.02, 0.12, 0.2), "higher", 0.05) == "unreliable"       # the CI covers 0
    assert verdict(_diff(0.05, 0.01, 0.12, 0.2), "higher", 0.05) == "not significant"   # Holm's p does not agree
    assert verdict(None, "higher", 0.05) == "untested"


def test_a_sentence_states_both_means_the_difference_and_the_test():
    text = pair_sentence("recovery_rate", "template", {"mean": 0.38, "ci_low": 0.31, "ci_high": 0.45},
                         "oracle", {"mean": 0.71, "ci_low": 0.64, "ci_high": 0.78},
                         _diff(0.33, 0.25, 0.41, 0.0004), "higher")
    assert text == ("recovery_rate: oracle better than template: 0.71 [0.64, 0.78] vs 0.38 [0.31, 0.45], "
                    "+0.33 [0.25, 0.41] (paired, p < 0.001, Holm)")
    text = pair_sentence("m", "a", {"mean": 0.5}, "b", {"mean": 0.52}, _diff(0.02, -0.05, 0.09, 0.6), "higher")
    assert text.startswith("m: no reliable difference between b and a") and "p = 0.6" in text
    few = _diff(0.4, 0.1, 0.7, 0.25, n=4) | {"warning": "Wilcoxon signed-rank with n=4 cannot reach p<0.05: ..."}
    assert "4 pairs cannot reach p < 0.05" in pair_sentence("m", "a", {"mean": 0.1}, "b", {"mean": 0.5}, few, "higher")


def test_several_variants_lead_with_the_best_reliable_one_and_count_the_rest():
    cell = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    headline = {"rows": [{"metric": "share", "cells": {v: cell for v in ("base", "x", "y", "z", "ref")},
                          "diffs": {"x": _diff(0.1, 0.05, 0.15, 0.01), "y": _diff(0.3, 0.2, 0.4, 0.001),
                                    "z": _diff(-0.01, -0.1, 0.08, 0.9)}}]}
    graph = types.SimpleNamespace(METRIC_DIRECTIONS={"share": "higher"}, METRIC_DESCRIPTIONS={"share": "a share"},
                                  METRIC_RANGES={"share": (0.0, 1.0)})
    [said] = headline_sentences(headline, ["base", "x", "y", "z", "ref"], "base", ["ref"], graph)
    assert said["text"].startswith("share: y better than base")
    assert "of the 3 variants against base: 2 better, 1 no reliable difference" in said["text"]
    assert said["text"].endswith("; reference ref 0.5 (not tested).")
    assert said["legend"] == "higher is better, range [0, 1]" and said["meaning"] == "a share"


def test_the_report_leads_with_escaped_sentences(tmp_path):
    from convsim.evaluation.reporting.report import build_report
    run_dir = make_run(tmp_path, variants=("a", XSS), sessions=4)
    html = build_report(run_dir).read_text()
    answer = re.search(r'<ol id="answer">(.*?)</ol>', html, re.S).group(1)
    assert XSS not in html.split("<body>")[1].split("<details")[0] and "&lt;script&gt;" in answer
    assert html.index('id="answer"') < html.index('id="headline-table"')  # the answer before the table
