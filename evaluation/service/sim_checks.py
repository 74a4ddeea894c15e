"""Simulator checks of the customer-service graph: did the *simulated user* (or the replay) fail?

The engine calls the graph's ``simulator_checks(state)`` on every finished session; a non-empty
list of ``{"check", "detail"}`` marks the session ``simulator_failure``, which keeps it out of
the agent's scores. The graph re-exports this function.
"""
from __future__ import annotations

import re

AGENT_VOICE = re.compile(r"^\s*(system|assistant|agent)\s*:|\b(i recommend|i have booked|your booking (at|is)|"
                         r"your reference number|how (can|may) i help|is there anything else i can)\b", re.I)
GOAL_LEAK = re.compile(r"[{\[]\s*\"|\"(constraints|fail_book|requests|domains|book)\"\s*:|\bfail_book\b|"
                       r"\bgold_state\b", re.I)
EARLY_BYE = re.compile(r"\b(good ?bye|bye|see you|take care|that'?s all)\b", re.I)


def simulator_checks(state: dict) -> list[dict]:
    """Flags that the *simulated user* (or the replayed recording) failed, not the agent:

    * (a replay is never flagged but for ``user_error``: a recording cannot fail as a simulator;
      ``replay_played`` / ``replay_recorded`` / ``replay_unclosed`` are dialogue figures instead);
    * ``user_speaks_as_agent``: a user utterance phrased as the service ("I recommend ...",
      "Your booking is confirmed", a "System:" label) — an LLM user that swapped roles;
    * ``goal_leak``: a user utterance that shows its goal as JSON or names goal fields;
    * ``early_goodbye``: the user says goodbye on a turn whose own act is not a goodbye;
    * ``user_error``: the user node raised (the session ended ``user_error``);
    * ``goal_unstated``: the user ended the dialogue (``user_stop``) before stating a constraint
      of every domain of its goal;
    * ``user_misstated``: a user utterance stated a slot value other than the one the simulator
      meant to disclose (the user node's ``meta.misstated``: the rule NLU's parse of the text
      against the move's values, ``agents/service/fidelity.py:misstated_values``), e.g. "for 3
      people" when its goal says 5. The agent then answered a customer who is not the goal's.
    """
    flags: list[dict] = []
    mode, termination = state.get("mode"), state.get("termination")
    for err in state.get("errors") or []:
        if err.get("node") == "user":  # the simulator raised (an LLM user's unusable answer...)
            flags.append({"check": "user_error", "detail": str(err.get("error"))[:300]})
    if mode == "replay":
        # a recording cannot fail as a simulator: a replay that stopped early stopped for the agent's
        # failure (agent_checks flags it) and one that ends without a goodbye is replayed as recorded;
        # both are kept as figures (evaluation/service/replay_notes.py), never a simulator flag
        return flags
    for entry in state.get("transcript", []):
        if entry.get("speaker") != "user":
            continue
        text, meta = entry.get("text", ""), entry.get("meta") or {}
        if AGENT_VOICE.search(text):
            flags.append({"check": "user_speaks_as_agent", "detail": f"turn {entry.get('turn')}: {text[:120]}"})
        if GOAL_LEAK.search(text):
            flags.append({"check": "goal_leak", "detail": f"turn {entry.get('turn')}: {text[:120]}"})
        for m in meta.get("misstated") or []:
            flags.append({"check": "user_misstated",
                          "detail": f"turn {entry.get('turn')}: said {m['slot']}={m['said']!r}, meant "
                                    f"{m['meant']!r}: {text[:100]}"})
        if EARLY_BYE.search(text) and meta.get("move") not in ("bye", "give_up", None):
            flags.append({"check": "early_goodbye", "detail": f"turn {entry.get('turn')} ({meta.get('move')}): "
                                                              f"{text[:120]}"})
    us = state.get("user_state") or {}
    if termination == "user_stop" and us:
        unstated = [g["domain"] for g in us["goal"]["domains"] if not us.get("disclosed", {}).get(g["domain"])]
        if unstated:
            flags.append({"check": "goal_unstated", "detail": f"ended without stating its {', '.join(unstated)} goal"})
    return flags


