"""Scripted opening turns of a customer-service session (convsim/running/prefix.py): the user's scripted
utterance with the gold annotation MultiWOZ gives it, so scripted turns are scored like replayed
ones (a hand-written prefix has no annotation: its gold fields stay empty)."""
from __future__ import annotations


from convsim.catalog.service.multiwoz import load_dialogues
from convsim import ConvsimError
from convsim.running.prefix import scripted_pair
from convsim.lazy import cached_once


@cached_once(maxsize=4)
def _annotated_turns(source: str) -> dict[str, list[dict]]:
    """A MultiWOZ prefix file's dialogues read like replays (gold domain, intent, state), so the
    scripted turns are scored like replayed ones; {} for a hand-written file."""
    try:
        return {d["dialogue_id"]: d["turns"] for d in load_dialogues(source)}
    except (ConvsimError, KeyError, TypeError, ValueError):
        return {}


def scripted_user_info(state: dict, turn: int) -> dict:
    """What the user node records for scripted turn ``turn`` (1-based)."""
    pair, prefix = scripted_pair(state, turn), state["prefix"]
    recorded = _annotated_turns(prefix.get("source", ""))
    gold = recorded.get(prefix.get("dialogue_id"), [])
    t = gold[turn - 1] if turn <= len(gold) and gold[turn - 1]["user"] == pair["user"] else {}
    return {"text": pair["user"], "gold_domain": t.get("gold_domain"), "gold_intent": t.get("gold_intent"),
            "gold_state": t.get("gold_state", {}), "gold_act_types": t.get("gold_act_types"),
            "user_acts": t.get("user_acts", []), "gold_system": pair.get("system"), "scripted": True}
