"""Run analysis: records of a run as tables (records), statistics (stats, run_stats), plots, the
HTML report (report, trace_html), comparisons of runs (compare, compare_text, headline),
simulator fidelity (fidelity) and the evaluation of transcripts that exist (transcripts).
"""
