"""Metrics (pure functions), evaluation nodes, dataset statistics, plots and the HTML report.

Metric functions take plain data and return a number or ``None`` when they do not apply; each
docstring gives the formula and the spec it implements. The names below are the public API.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    # run-level analysis (docs/analysis.md)
    "analyze_run": "analysis", "build_report": "report", "compare_runs": "compare",
    "evaluate_transcripts": "transcripts", "read_transcripts": "transcripts",
    # statistics
    "anova_oneway": "stats", "tukey_hsd": "stats", "friedman": "stats", "paired_wilcoxon_holm": "stats",
    "holm": "stats", "spearman_bootstrap": "stats", "cohens_d": "stats", "cohens_dz": "stats",
    "compare_variants": "stats",
    # grounded TAS (spec 000) and TAS/CAS (spec 001)
    "cross_coherence": "tas", "context_retention": "tas", "copy_penalty": "tas", "tas_turn": "tas",
    "dialogue_tas": "tas", "segments": "tas", "segment_scores": "tas", "recovery": "tas",
    "dst_scores": "tas", "tas_cas_dialogue": "tas_cas", "detect_shifts": "tas_cas",
    "shift_detection_scores": "tas_cas", "preference_coverage": "crs_coverage",
    "recall_at_k": "crs_coverage",
    # customer service (spec 004)
    "pass_hat_k": "service_metrics",
    # group planning (spec 002)
    "welfare": "group_metrics", "gini": "group_metrics", "evaluate_group_csv": "group_csv",
    "export_group_csv": "group_csv",
    # course retrieval (spec 003)
    "ndcg_at_k": "retrieval_metrics", "precision_at_k": "retrieval_metrics",
    "reciprocal_rank": "retrieval_metrics", "case_metrics": "retrieval_metrics",
    "compare_retrieval_runs": "retrieval_compare",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
