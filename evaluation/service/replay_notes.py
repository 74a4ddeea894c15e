"""What a replayed recording was, as dialogue figures, never as a simulator's failure.

A replay feeds recorded user turns (MultiWOZ, WOZ 2.0): the recording cannot fail as a simulator
does. A recording that ends without the customer closing (no goodbye or thanks in its last user
turn) is replayed as recorded and scored; before, it was a ``simulator_failure`` and left the
agent's scores (on 5 real MultiWOZ dialogues that alone moved JGA from 0.197 to 0.246). The
facts that used to flag it are kept as counts: ``replay_unclosed`` (0/1), ``replay_played`` and
``replay_recorded`` (user turns played of those recorded: fewer when the agent's failure ended
the dialogue early, which ``agent_checks`` flags).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

# a customer closing the dialogue (the words agents/service/fidelity.py's replay check read)
CLOSING = re.compile(r"\b(bye|goodbye|thanks?|thank you|that'?s all|that is all|nothing else|no,? that)\b", re.I)


def replay_notes(state: Mapping) -> dict:
    """``{"replay_unclosed", "replay_played", "replay_recorded"}`` of a replayed session."""
    turns = (state.get("replay") or {}).get("turns") or []
    last = (turns[-1].get("user") or "") if turns else ""
    return {"replay_unclosed": int(bool(last.strip()) and not CLOSING.search(last)),
            "replay_played": len(state.get("turn_metrics") or []),
            "replay_recorded": len(turns)}
