"""Simulator realism figures of one CRS session that can fail (docs/crs_shift.md
"Simulator realism"): does the simulated user behave like a user with a goal? Unlike the health
figures (evaluation/crs/health.py), which the simulator's code guarantees, each of these can move
when the simulator regresses or a paraphrasing user model misbehaves, since it reads the transcript:

* ``realism_reaction_rate`` = |{t > 1 : system turn t−1 named a film and user turn t said a reaction
  to it (accept, accept_target, reject, repeat)}| / |{t > 1 : system turn t−1 named a film}|;
  None when no film was named. 0 for the non-reactive (strict) user by design.
* ``realism_unseen_mention_share`` = films a user turn names (``user_meta.mentioned_ids``) that no
  earlier system turn named and that the user did not introduce as its own example
  (``user_meta.own_example``, this turn or earlier) / films the user names; goal 0; None when the
  user names none.
* ``realism_bridge_share`` = shifts that state a bridge concept carried over (``shift.bridge_kept``)
  / shifts; None without shifts.
* ``realism_forms`` = distinct wordings of the shift and contradiction turns, with their values
  masked, / such turns (1 = every one differs); None when there are none. The wording is the text
  the user said (a user model's turn included), not the rule template.
* ``realism_form_repeats`` = shift and contradiction turns worded (values masked) as the previous such
  turn / (such turns − 1): a line said again right away ("Hmm, maybe not X... no, actually X" twice
  in a row); goal 0; None with fewer than two such turns.

With a user model (model role ``user``; agents/crs/user_goal.py), the same figures read its said
turns, and two more count what its checks kept out:

* ``realism_user_model_fallback_share`` = user turns whose model answer failed a check (the rule turn
  was said) / user turns the model was asked for; None without a user model;
* ``realism_user_model_unseen_rejected`` = model answers rejected because they named a film the user
  was never shown (each would have been an unseen mention); None without a user model.

A reaction counts as said only when the turn names the film it reacts to (``mentioned_ids``, which
for a user model's turn are the titles found in its text): the rule user always does; a user model's
turn that does not falls back to the rule turn (agents/crs/user.py ``goal_turn``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

SAID_REACTIONS = ("accept", "accept_target", "reject", "repeat")
UNSEEN_FILM = "names a film it was never shown"  # the reason agents/crs/user_goal.py records


def _form(text: str, values: Sequence[str]) -> str:
    """A turn's wording with the given values and four-digit years masked."""
    for v in sorted((str(v) for v in values if v), key=len, reverse=True):
        text = re.sub(re.escape(v), "<v>", text, flags=re.IGNORECASE)
    return re.sub(r"\d{4}", "<v>", text)


def realism_metrics(transcript: Sequence[Mapping]) -> dict:
    shown: set[str] = set()
    own: set[str] = set()
    named_before = False
    offered = reacted = 0
    user_films = unseen = 0
    shifts = bridged = 0
    forms: list[str] = []
    asked = failed = unseen_rejected = 0
    for e in transcript:
        meta = e.get("meta") or {}
        if e.get("speaker") != "user":
            films = meta.get("mentioned_ids") or []
            named_before = bool(films)
            shown.update(films)
            continue
        if e.get("turn", 1) > 1 and named_before:
            offered += 1
            reaction = meta.get("reaction") or {}
            reacted += reaction.get("kind") in SAID_REACTIONS and (
                not reaction.get("film") or reaction["film"] in (meta.get("mentioned_ids") or []))
        record = meta.get("paraphrase")  # the user model's record (agents/crs/user_goal.py, or the paraphrase)
        if isinstance(record, Mapping):
            asked += 1
            failed += record.get("ok") is False
            unseen_rejected += str(record.get("reason") or "").startswith(UNSEEN_FILM)
        if meta.get("own_example"):
            own.add(meta["own_example"])
        for film in meta.get("mentioned_ids") or []:
            user_films += 1
            unseen += film not in shown and film not in own
        shift = meta.get("shift")
        if shift:
            shifts += 1
            bridged += bool(shift.get("bridge_kept"))
        if meta.get("stage") in ("shift", "contradiction"):
            values = [v for v in (meta.get("constraints") or {}).values()]
            if shift:
                values += [shift.get("bridge_value"), *[v for _, v in shift.get("dropped") or []],
                           *(shift.get("from_focus") or [])[1:]]
            values += [meta.get("true_genre")] + [str(x) for x in (meta.get("mentioned_ids") or [])]
            forms.append(_form(e.get("text") or meta.get("template") or "", values))
    return {"realism_reaction_rate": reacted / offered if offered else None,
            "realism_unseen_mention_share": unseen / user_films if user_films else None,
            "realism_bridge_share": bridged / shifts if shifts else None,
            "realism_forms": len(set(forms)) / len(forms) if forms else None,
            "realism_form_repeats": sum(a == b for a, b in zip(forms, forms[1:])) / (len(forms) - 1)
            if len(forms) > 1 else None,
            "realism_user_model_fallback_share": failed / asked if asked else None,
            "realism_user_model_unseen_rejected": unseen_rejected if asked else None}
