"""Re-score a crs_shift run's TAS/CAS recovery under the project's and the paper's settings.

    python bench/crs_paper_delays.py runs/<id> [--search segment to_end] [--tfidf project paper]

For every variant of the run and every (recovery search, TF-IDF) pair, prints the recovery rate, the
average recovery delay (two ways: the mean over sessions that recovered a shift, as convsim reports
it; and the paper's, where a session with no recovery counts 0.0 and every session is averaged),
a 95 % bootstrap CI of the first over sessions, the pooled delay over all recovered shifts, the
shifts per session and the TAS/CAS cross coherence. The
transcripts, shift detector settings (``shift_rule``, ``shift_compare``, ``recovery_shifts``), catalog
and topic model are the run's own (its ``topics_lda.joblib``), so only the two settings vary.
docs/crs_shift.md "Paper mode" quotes its output.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _ci(values, n_boot: int = 2000, seed: int = 0):
    """95 % percentile bootstrap CI of the mean over sessions; None with fewer than 2 values."""
    import numpy as np
    if len(values) < 2:
        return None
    x = np.asarray(values, dtype=float)
    means = x[np.random.default_rng(seed).integers(0, len(x), (n_boot, len(x)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--search", nargs="+", default=["segment", "to_end"])
    ap.add_argument("--tfidf", nargs="+", default=["project", "paper"])
    ap.add_argument("--lda-dominant", action="store_true",
                    help="topics = the 5 words of the dominant LDA topic with p >= 0.1 (the paper's), "
                         "not of every topic with p >= 0.2")
    args = ap.parse_args(argv)
    from crs_run_records import scored_run  # bench/ is on the path of a bench script

    from convsim.evaluation.crs.nodes import scored_transcript
    from convsim.evaluation.crs.tas_cas_eval import _embedder, tas_cas_many, topic_extractor

    records, params, catalog = scored_run(args.run_dir)
    run = Path(args.run_dir)
    topics = topic_extractor(params.get("topic_mode", "lda"), catalog, str(run))
    if args.lda_dominant:
        from convsim.evaluation.crs.topics import LdaTopics
        topics = LdaTopics(topics.vectorizer, topics.lda, top_words=5, min_prob=0.1, dominant=True)
    by_variant: dict[str, list] = defaultdict(list)
    for r in records:
        by_variant[r["variant"]].append(scored_transcript(r["transcript"]))
    print(f"run {run.name}: rule={params.get('shift_rule')} compare={params.get('shift_compare')} "
          f"recovery_on={params.get('recovery_shifts')} topics={topics.name}"
          f"{' (dominant topic, p >= 0.1)' if args.lda_dominant else ''}")
    print(f"{'variant':14} {'search':8} {'tfidf':8} {'n':>3} {'shifts':>6} {'rate':>6} "
          f"{'delay':>6} {'delay 95% CI':>13} {'paper':>6} {'pooled':>6} {'cc':>6}")
    for variant, transcripts in by_variant.items():
        for search in args.search:
            for tfidf in args.tfidf:
                out = tas_cas_many(transcripts, topics=topics, embedder=_embedder("tfidf", catalog, tfidf),
                                   rule=params.get("shift_rule", "and"), compare=params.get("shift_compare", "segment"),
                                   recovery_on=params.get("recovery_shifts", "simulator"), recovery_search=search)
                delays = [o["tas_cas_avg_recovery_delay"] for o in out]
                shifts = [o["tas_cas_n_shifts"] for o in out]
                rates = [o["tas_cas_topic_recovery_rate"] for o in out if o["tas_cas_topic_recovery_rate"] is not None]
                recovered = [round((o["tas_cas_topic_recovery_rate"] or 0) * o["tas_cas_n_shifts"]) for o in out]
                have = [d for d in delays if d is not None]
                pooled_num = sum(d * k for d, k in zip(delays, recovered) if d is not None)
                pooled = pooled_num / sum(recovered) if sum(recovered) else None
                fmt = lambda x: "—" if x is None else f"{x:.3f}"  # noqa: E731
                ci = _ci(have)
                print(f"{variant:14} {search:8} {tfidf:8} {len(out):>3} {statistics.mean(shifts):>6.2f} "
                      f"{fmt(statistics.mean(rates) if rates else None):>6} {fmt(statistics.mean(have) if have else None):>6} "
                      f"{'—' if ci is None else f'[{ci[0]:.2f}, {ci[1]:.2f}]':>13} "
                      f"{fmt(statistics.mean([d or 0.0 for d in delays])):>6} {fmt(pooled):>6} "
                      f"{fmt(statistics.mean(o['tas_cas_cross_coherence'] for o in out)):>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
