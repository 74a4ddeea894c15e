"""Running sessions: plan a run into session attempts (plan), run them with a bounded number in
flight (runner, session) or in worker processes and on Ray (process_executor, ray_executor), land
their records (store) with one status each (status), after a preflight that refuses bad input
before anything is written (preflight), with a live progress display (progress) and scripted
prefixes (prefix).
"""
