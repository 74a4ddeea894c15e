"""Compare two course-retrieval runs: paired tests per metric and judge agreement.

Two retrievers on the same test set, or two judge models on the same retrieved lists,
are paired designs: each case (and trial) is seen by both. A case's trials are averaged
first (they repeat the same query: not independent), so n counts cases. Per metric the case-level
differences are tested with the Wilcoxon signed-rank test and the paired t-test, and the
mean difference gets a paired t 95% CI (Newcombe's paired score when every value is 0/1;
convsim.results.aggregate.mean_diff_ci). Judge agreement pairs
the two runs' scores of the same course for the same case: Cohen's kappa (unweighted, linear and
quadratic weights), exact agreement, and agreement on relevant (score >= 2) versus not.

    python -m convsim.evaluation.retrieval.compare runs/<a> runs/<b> [--variant-a bm25 --variant-b tfidf]
"""
from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from convsim import ConvsimError, read_jsonl
from convsim.results.aggregate import mean_diff_ci, trials_info

LABELS = (0, 1, 2, 3)


def cohen_kappa(a: Sequence[int], b: Sequence[int], *, weights: str | None = None,
                labels: Sequence[int] | None = LABELS) -> float | None:
    """Cohen's kappa ``κ = 1 - Σ w_ij O_ij / Σ w_ij E_ij`` of two raters over the same items.

    ``O`` is the observed confusion matrix and ``E`` the one expected from the raters'
    marginals (``E = row·col / n``). Weights: ``None`` gives ``w_ij = [i != j]`` (plain
    kappa), ``"linear"`` ``|i - j|``, ``"quadratic"`` ``(i - j)^2``, with i, j the positions
    of the labels in ``labels`` (``None``: the sorted labels either rater used, as
    scikit-learn's ``cohen_kappa_score`` does by default). Returns ``None`` for no items or
    when the expected disagreement is 0 (both raters constant on one label).
    """
    if len(a) != len(b):
        raise ValueError(f"raters have {len(a)} and {len(b)} labels; they must rate the same items")
    if not a:
        return None
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    space = sorted(set(a) | set(b)) if labels is None else list(labels)
    index = {label: i for i, label in enumerate(space)}
    unknown = (set(a) | set(b)) - set(index)
    if unknown:
        raise ValueError(f"labels {sorted(unknown)} are not in {space}")
    m = len(space)
    observed = np.zeros((m, m))
    for x, y in zip(a, b):
        observed[index[x], index[y]] += 1
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    i, j = np.indices((m, m))
    w = {None: (i != j).astype(float), "linear": np.abs(i - j).astype(float),
         "quadratic": ((i - j) ** 2).astype(float)}[weights]
    denominator = float((w * expected).sum())
    if denominator == 0:
        return None
    return 1.0 - float((w * observed).sum()) / denominator


def judge_agreement(a: Sequence[int], b: Sequence[int], *, threshold: int = 2) -> dict:
    """Agreement of two judges' 0-3 scores of the same items (UMBRELA reports the same set)."""
    if len(a) != len(b):
        raise ValueError("the judges must score the same items")
    n = len(a)
    bin_a = [int(x >= threshold) for x in a]
    bin_b = [int(x >= threshold) for x in b]
    confusion = [[sum(1 for x, y in zip(a, b) if x == i and y == j) for j in LABELS] for i in LABELS]
    return {
        "n": n,
        "exactAgreement": sum(x == y for x, y in zip(a, b)) / n if n else None,
        "kappa": cohen_kappa(a, b),
        "kappaLinear": cohen_kappa(a, b, weights="linear"),
        "kappaQuadratic": cohen_kappa(a, b, weights="quadratic"),
        "relevantAgreement": sum(x == y for x, y in zip(bin_a, bin_b)) / n if n else None,
        "relevantKappa": cohen_kappa(bin_a, bin_b, labels=(0, 1)),
        "confusion": confusion,
    }


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def paired_tests(a: Sequence[float], b: Sequence[float]) -> dict:
    """Mean difference (b - a) with a paired 95% CI (``diffCiMethod``: paired t, or Newcombe's paired
    score for 0/1 values), Wilcoxon signed-rank and
    paired t-test.

    A test is ``None`` where it does not apply (fewer than 2 pairs, all differences 0; the t-test
    also when the differences are constant), zeros and constants judged up to rounding noise.
    """
    from convsim.evaluation.reporting import stats
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    diffs = [y - x for x, y in zip(a, b)]
    out = {"n": len(diffs), "meanA": float(np.mean(a)) if a else None, "meanB": float(np.mean(b)) if b else None,
           "meanDiff": None, "diffCiLow": None, "diffCiHigh": None, "diffCiMethod": None,
           "wilcoxonStatistic": None, "wilcoxonP": None, "tStatistic": None, "tP": None}
    if not diffs:
        return out
    ci = mean_diff_ci(a, b, paired=True)
    out.update(meanDiff=ci["diff"], diffCiLow=ci["ci_low"], diffCiHigh=ci["ci_high"], diffCiMethod=ci["ci_method"])
    if len(diffs) >= 2 and stats.nonzero_count(diffs):
        # convsim.evaluation.reporting.stats: zeros and ties up to rounding noise, the exact p with ties up to n = 50,
        # no t (None) when the differences are constant up to noise
        w_stat, w_p = stats.wilcoxon_p(np.asarray(diffs, dtype=float))
        out.update(wilcoxonStatistic=_finite_or_none(w_stat), wilcoxonP=_finite_or_none(w_p))
        t_stat, t_p = stats.paired_t(np.asarray(diffs, dtype=float))
        out.update(tStatistic=t_stat, tP=t_p)
    return out


def _trials_per_case(counts) -> dict:
    counts = list(counts)
    info = trials_info(counts)
    return {"nValues": info["n_values"], "trialsPerCase": info["trials_per_session"]}


def _load(run: str | Path | list[dict], variant: str | None) -> list[dict]:
    if isinstance(run, list):
        records = run
    else:
        path = Path(run)
        path = path / "results.jsonl" if path.is_dir() else path
        if not path.exists():
            raise ConvsimError("no results.jsonl here", file=path)
        records = list(read_jsonl(path))
    records = [r for r in records if r.get("status", "ok") == "ok"]
    variants = sorted({r.get("variant") for r in records})
    if variant is None and len(variants) > 1:
        raise ConvsimError(f"the run has variants {variants}: name the one to compare", file=str(run),
                           field="variant")
    return [r for r in records if variant is None or r.get("variant") == variant]


def compare_retrieval_runs(run_a: str | Path | list[dict], run_b: str | Path | list[dict], *,
                           variant_a: str | None = None, variant_b: str | None = None,
                           metrics: Sequence[str] | None = None, threshold: int = 2) -> dict:
    """Compare two runs (run dirs with results.jsonl, or lists of records) case by case.

    Cases pair on session_id, each case's trials (pairing on (session_id, trial)) averaged per side
    first: a case is one unit, however many trials it ran. Returns ``{"pairs" (cases), "trialPairs",
    "metrics": {name: paired_tests + nValues, trialsPerCase}, "judgeAgreement": judge_agreement over
    courses both runs scored for the same case and trial}``.
    Two variants of one run compare with ``run_a == run_b`` and two variant names.
    """
    recs_a = {(r["session_id"], r.get("trial", 0)): r for r in _load(run_a, variant_a)}
    recs_b = {(r["session_id"], r.get("trial", 0)): r for r in _load(run_b, variant_b)}
    keys = sorted(recs_a.keys() & recs_b.keys())
    if not keys:
        raise ConvsimError("the two runs share no (session_id, trial): nothing to pair", field="session_id")
    if metrics is None:
        numeric = lambda r: {k for k, v in (r.get("dialogue_metrics") or {}).items()  # noqa: E731
                             if isinstance(v, (int, float)) and not isinstance(v, bool)}
        metrics = sorted(set.union(*(numeric(recs_a[k]) & numeric(recs_b[k]) for k in keys)))
    per_metric = {}
    for name in metrics:
        # the case is the unit: its trials (the same query again) are averaged on each side first,
        # over the trials both runs scored, so a case counts once in every test and interval
        by_case: dict[object, list[tuple[float, float]]] = {}
        for k in keys:
            va, vb = (recs_a[k].get("dialogue_metrics") or {}).get(name), (recs_b[k].get("dialogue_metrics") or {}).get(name)
            if va is not None and vb is not None:
                by_case.setdefault(k[0], []).append((float(va), float(vb)))
        xa = [float(np.mean([x for x, _ in pairs])) if len(pairs) > 1 else pairs[0][0] for pairs in by_case.values()]
        xb = [float(np.mean([y for _, y in pairs])) if len(pairs) > 1 else pairs[0][1] for pairs in by_case.values()]
        per_metric[name] = {**paired_tests(xa, xb),
                            **_trials_per_case(len(pairs) for pairs in by_case.values())}
    sa, sb = [], []
    for k in keys:
        scored_b = {j["code"]: j.get("score") for j in recs_b[k].get("judgements") or []}
        for j in recs_a[k].get("judgements") or []:
            other = scored_b.get(j["code"])
            if j.get("score") is not None and other is not None:
                sa.append(j["score"])
                sb.append(other)
    return {"pairs": len({k[0] for k in keys}), "trialPairs": len(keys), "variantA": variant_a, "variantB": variant_b, "metrics": per_metric,
            "judgeAgreement": judge_agreement(sa, sb, threshold=threshold) if sa else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("--variant-a")
    parser.add_argument("--variant-b")
    args = parser.parse_args(argv)
    result = compare_retrieval_runs(args.run_a, args.run_b, variant_a=args.variant_a, variant_b=args.variant_b)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
