"""When does an invalid response-judge answer make the dialogue a simulator failure?

Before, one invalid judge answer (after its retries) flagged the whole session ``judge_invalid``:
the dialogue became a ``simulator_failure`` and left every agent score, though the judge scores
one turn's reply and every other metric of the dialogue was sound. Now:

* a turn whose judge answer was invalid has no ``response_quality`` (its ``judge_failed`` = 1,
  the raw answer in ``judge_raw``); the dialogue's response quality is the mean of the other
  turns, and ``judge_failures`` / ``judge_failure_rate`` report the loss;
* the session is flagged (one ``judge_invalid`` flag per failed turn, with its raw answer) only
  when the judge failed on **every** judged turn: no judge score is left, and a judge that never
  answered is a broken simulator role of the run, not a property of this agent.
"""
from __future__ import annotations


def judge_invalid_flags(turn_metrics: list[dict]) -> list[dict]:
    """``judge_invalid`` flags for a dialogue's turn metrics (rules in the module docstring)."""
    judged = [m for m in turn_metrics or [] if m.get("judge_failed") is not None]
    failed = [(i, m) for i, m in enumerate(turn_metrics or [], 1) if m.get("judge_failed") == 1]
    if not judged or len(failed) < len(judged):
        return []
    return [{"check": "judge_invalid", "detail": f"turn {m.get('turn', i)}: the response judge's answer was "
                                                 f"invalid on every judged turn; raw: {str(m.get('judge_raw'))[:200]}"}
            for i, m in failed]
