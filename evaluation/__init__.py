"""Metrics (pure functions), evaluation nodes, dataset statistics, plots and the HTML report.

Metric functions take plain data and return a number or ``None`` when they do not apply; each
docstring gives the formula and the spec it implements. One subpackage per system under test
(``convsim.evaluation.crs``, ``service``, ``group``, ``retrieval``); what every system uses (statistics,
plots, records, transcripts, analysis, the report, compare) is at the top level. The names below
are the public API.
"""
from convsim.lazy import lazy_exports

_EXPORTS = {
    # run-level analysis (docs/analysis.md)
    "analyze_run": "reporting.analysis", "build_report": "reporting.report", "compare_runs": "reporting.compare",
    "evaluate_transcripts": "reporting.transcripts", "read_transcripts": "reporting.transcripts",
    # statistics
    "anova_oneway": "reporting.stats", "tukey_hsd": "reporting.stats", "friedman": "reporting.stats", "paired_wilcoxon_holm": "reporting.stats",
    "holm": "reporting.stats", "spearman_bootstrap": "reporting.stats", "cohens_d": "reporting.stats", "cohens_dz": "reporting.stats",
    "compare_variants": "reporting.stats",
    # grounded TAS and TAS/CAS
    "cross_coherence": "crs.tas", "context_retention": "crs.tas", "copy_penalty": "crs.tas", "tas_turn": "crs.tas",
    "dialogue_tas": "crs.tas", "segments": "crs.tas", "segment_scores": "crs.tas", "recovery": "crs.tas",
    "dst_scores": "crs.tas", "tas_cas_dialogue": "crs.tas_cas", "detect_shifts": "crs.tas_cas",
    "shift_detection_scores": "crs.tas_cas", "preference_coverage": "crs.coverage",
    "recall_at_k": "crs.coverage",
    # customer service
    "pass_hat_k": "service.metrics",
    # group planning
    "welfare": "group.metrics", "gini": "group.metrics", "evaluate_group_csv": "group.dialogue_csv",
    "export_group_csv": "group.dialogue_csv",
    # course retrieval
    "ndcg_at_k": "retrieval.metrics", "ndcg_fixed_ideal_at_k": "retrieval.metrics",
    "precision_at_k": "retrieval.metrics",
    "reciprocal_rank": "retrieval.metrics", "case_metrics": "retrieval.metrics",
    "compare_retrieval_runs": "retrieval.compare",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
