"""Results and summaries: records as columns (recordset), bootstrap and paired confidence intervals
(aggregate), declared metric ranges (metric_ranges) and the dataset summary of a run (summary).
"""
