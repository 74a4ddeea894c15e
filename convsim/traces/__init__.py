"""Traces and time travel: the per-step record of a session's state transitions (tracing), its
timeline in the terminal (trace_timeline), forking a session from a checkpoint with other models
or params (time_travel), and drawing a topology (drawing).
"""
