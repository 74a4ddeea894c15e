"""The LLM user that writes its turn from its goal and its reaction (model role ``user``,
``user_llm: goal``, the default; docs/crs_shift.md "The LLM user").

The rule simulator (agents/crs/user.py) decides *what* the user does this turn: its current preference
(the constraints), its reaction to the films the recommender named (accept, accept a target, reject
with the catalog attribute that does not fit, "already named", "name a film"), and its planned act
(opening, follow-up, shift with its bridge and dropped values, contradiction, a detail question about
its anchor, the goodbye of a satisfied user). This module hands the model that *decision* (the
preference, the act, the films it has been shown, the recent conversation), never the rule template's
sentence, and the model writes the words.

The answer is said only when it passes the answer check every model turn passes
(convsim.providers.answer_check: bytes, controls, nothing, the prompt repeated; re-asked as
configured) and the user's realism checks (:func:`goal_defect`):

* one utterance, not far longer than the rule turn;
* it names every film the act is about (the film it reacts to, the anchor it asks about): a reaction
  not said would leave the recommender without it (``realism_reaction_rate``);
* it names **no film it was never shown** (nor stated as its own example): such a turn is rejected
  (``realism_unseen_mention_share`` stays 0 by this check, and the rejection is counted:
  ``realism_user_model_unseen_rejected``);
* it states every value the act states (the new focus, a kept bridge, a dropped value, the corrected
  genre ...), spelled as the catalog spells it, since the evaluation's gold is the simulator's;
* it states no preference value that is neither in its constraints, nor in the act, nor an attribute
  of a film it names (a user model inventing "I love westerns" would move the recommender off a
  gold it cannot see).

Otherwise the rule turn is said instead, with the record (``ok`` False, the raw answer, the reason) in
``user_meta.paraphrase`` (key kept from the paraphrase path, ``mode: "goal"``); the graph flags the
session (``user_model_failed``) and counts it (``user_paraphrase_fallbacks``). A said model turn's
``user_meta.mentioned_ids`` are the films found in its text.
"""

from __future__ import annotations

from convsim.agents.crs.user import UserTurn, constraints_phrase, value_phrase
from convsim.catalog.movies.catalog import FIELDS, Movie, MovieCatalog
from convsim.evaluation.crs.realism import SAID_REACTIONS, UNSEEN_FILM
from convsim.providers.answer_check import checked_invoke


def film_facts(movie: Movie) -> str:
    """A film's catalog attributes in one line: "drama, comedy; from 1999; directed by X; starring A, B"."""
    parts = [", ".join(g.lower() for g in movie.values("genre")[:3])]
    if movie.values("year"):
        parts.append(f"from {movie.values('year')[0]}")
    for field, label in (("director", "directed by"), ("actor", "starring"), ("language", "in")):
        if movie.values(field):
            parts.append(f"{label} {', '.join(movie.values(field)[:2])}")
    return "; ".join(p for p in parts if p)


def _misfit_phrase(field: str, wanted: str, have: list[str]) -> str:
    if field == "genre":
        return f"it is a {have[0].lower()} film" if have else "it is not one"
    if field == "year":
        return f"it is from {have[0]}" if have else "its year is unknown"
    if field == "actor":
        return f"{wanted} is not in it"
    if field == "director":
        return f"it is directed by {have[0]}" if have else f"{wanted} did not direct it"
    if field == "writer":
        return f"{wanted} did not write it"
    return f"it is in {have[0]}" if have else f"it is not in {wanted}"


def _bridge(field: str, value: str) -> str:
    return {"genre": f"{value.lower()} films", "director": f"{value}'s directing", "writer": f"{value}'s writing",
            "language": f"films in {value}", "year": f"films from {value}", "actor": value}.get(field, value)


def describe_act(meta: dict, catalog: MovieCatalog) -> tuple[list[str], list[str], list[str]]:
    """What the user does this turn, as instructions to the model: (lines, values the message must
    state, films (ids) it must name). Built from the simulator's decision (``meta.reaction``,
    ``meta.stage``, ``meta.act``, ``meta.shift``), never from its template sentence."""
    lines: list[str] = []
    values: list[str] = []
    films: list[str] = []
    reaction = meta.get("reaction") or {}
    kind, film = reaction.get("kind"), reaction.get("film")
    movie = catalog.by_id.get(film) if film else None
    if movie is not None and kind in SAID_REACTIONS:
        films.append(movie.id)
        if kind == "accept_target":
            lines.append(f"Tell them that {movie.title} ({film_facts(movie)}) is exactly the film you were "
                         f"looking for: it fits what you want and your taste.")
        elif kind == "accept":
            lines.append(f"Say that {movie.title} ({film_facts(movie)}) sounds good to you: it fits what you want.")
        elif kind == "reject":
            field, wanted, have = reaction.get("misfit") or [None, None, []]
            why = (f"{_misfit_phrase(field, wanted, have)}, and you want {value_phrase(field, wanted)}"
                   if field else "it does not fit what you want")
            lines.append(f"Turn down {movie.title} ({film_facts(movie)}) and say why: {why}.")
        else:
            lines.append(f"Say that they already named {movie.title} before, and ask for a different film.")
    elif kind == "ask":
        lines.append("Point out that they have not named any film yet, and ask them to name one.")
    stage, act = meta.get("stage"), meta.get("act") or {}
    focus = (meta.get("focus_field"), str(meta.get("focus_value")))
    if stage == "end":
        lines.append("Thank them and say goodbye: you have found your film, the conversation is over.")
    elif stage == "initial":
        lines.append(f"Ask for {value_phrase('genre', act['genre'])} to watch.")
        values.append(act["genre"])
    elif stage == "follow_up":
        lines.append(f"Ask whether they have more {value_phrase(*focus)}.")
        values.append(focus[1])
    elif stage == "shift":
        ev = meta["shift"]
        to_field, to_value = ev["to_focus"]
        to = value_phrase(to_field, str(to_value))
        if (ev["bridge_field"], str(ev["bridge_value"])) == (to_field, str(to_value)):
            lines.append(f"Say that from now on you want to focus on {to}.")
        elif ev.get("bridge_kept"):
            lines.append(f"Change what you ask for: keeping {_bridge(ev['bridge_field'], str(ev['bridge_value']))} "
                         f"(say it), you now want {to}.")
            values.append(str(ev["bridge_value"]))
        else:
            lines.append(f"Change direction: you now want {to}.")
        values.append(str(to_value))
        if ev.get("dropped"):
            gone = " or ".join(str(v) for _, v in ev["dropped"])
            lines.append(f"Say that {gone} no longer matters to you.")
            values += [str(v) for _, v in ev["dropped"]]
    elif stage == "contradiction":
        if act.get("kind") == "correct_genre":
            lines.append(f"Correct yourself: earlier you asked for {act['wrong'].lower()} films, but you "
                         f"really meant {act['right'].lower()} films.")
            values.append(act["right"])
        elif act.get("kind") == "drop":
            gone = " or ".join(str(v) for _, v in act.get("dropped") or [])
            lines.append(f"Say that {gone} does not matter to you any more.")
            values += [str(v) for _, v in act.get("dropped") or []]
        else:
            lines.append(f"Hesitate for a moment about {value_phrase(*focus)}, then confirm that they are "
                         f"what you want.")
            values.append(focus[1])
    elif stage == "details":
        anchor = catalog.by_id[act["anchor"]]
        if meta.get("own_example"):
            lines.append(f"Mention that {anchor.title} is a film you love (your own example: they have not named it).")
        kind = act.get("kind")
        if kind == "recap":
            constraints = meta.get("constraints") or {}
            lines.append(f"Sum up what you want ({constraints_phrase(constraints)}) and ask what they would pick.")
            values += [str(v) for v in constraints.values()]
        else:
            ask = {"cast": f"say you liked the cast of {anchor.title} and ask for other {value_phrase(*focus)} "
                           f"with a cast like that",
                   "mood": f"ask for {value_phrase(*focus)} with the same mood as {anchor.title}",
                   "story": f"ask for {value_phrase(*focus)} with a story like that of {anchor.title}"}[kind]
            lines.append(ask[:1].upper() + ask[1:] + ".")
            values.append(focus[1])
            films.append(anchor.id)
    return lines, list(dict.fromkeys(values)), list(dict.fromkeys(films))


def goal_prompt(prompt_template: str, meta: dict, state: dict, catalog: MovieCatalog,
                history: list[tuple[str, str]]) -> tuple[str, list[str], list[str], set[str]]:
    """The prompt of one user turn and what its answer is checked against: (prompt, values to state,
    films to name, films it may name = shown or its own examples)."""
    lines, values, films = describe_act(meta, catalog)
    allowed = set(state.get("shown") or ()) | set(state.get("introduced") or ())
    shown = [catalog.by_id[i].title for i in (state.get("shown") or []) if i in catalog.by_id][-12:]
    may = [catalog.by_id[i].title for i in sorted(allowed, key=str) if i in catalog.by_id]
    constraints = meta.get("constraints") or {}
    preference = constraints_phrase(constraints) if constraints else "any good film"
    recent = "\n".join(f"{speaker.upper()}: {text}" for speaker, text in history[-4:]) or "(none yet)"
    prompt = prompt_template.format(
        preference=preference, focus=value_phrase(meta["focus_field"], str(meta["focus_value"])),
        shown="; ".join(shown) or "none yet", history=recent,
        act="\n".join(f"- {line}" for line in lines) or "- Keep chatting about what you want.",
        may_name="; ".join(may[-12:]) or "none")
    return prompt, values, films, allowed


def goal_defect(text: str, *, rule_text: str, values: list[str], films: list[str], allowed: set[str],
                meta: dict, catalog: MovieCatalog, extractor) -> str | None:
    """Why a model-written user turn cannot be said (None: it can). See the module docstring."""
    if not text:
        return "empty answer"
    if len(text) > 3 * len(rule_text) + 200:
        return "answer far longer than the turn"
    lowered = text.lower()
    if "user:" in lowered or "system:" in lowered or "\n\n" in text:
        return "answer holds more than one utterance"
    named = [i for i in extractor.extract_titles(text) if i in catalog.by_id]
    unseen = [i for i in named if i not in allowed]
    if unseen:
        return f"{UNSEEN_FILM}: {', '.join(catalog.by_id[i].title for i in unseen)}"
    missing_films = [i for i in films if i not in named]
    if missing_films:
        return f"answer does not name {', '.join(catalog.by_id[i].title for i in missing_films)}"
    missing = [v for v in values if v.lower() not in lowered]
    if missing:
        return f"answer drops the stated values {missing}"
    held = {str(v).casefold() for v in (meta.get("constraints") or {}).values()}
    held |= {str(v).casefold() for v in values}
    held.add(str(meta.get("focus_value")).casefold())
    shift = meta.get("shift") or {}
    held |= {str(v).casefold() for v in [*(shift.get("from_focus") or [])[1:], shift.get("bridge_value")]}
    act = meta.get("act") or {}
    held |= {str(act.get(k)).casefold() for k in ("wrong", "right") if act.get(k)}
    for i in named + films:
        held |= {str(v).casefold() for f in FIELDS for v in catalog.by_id[i].values(f)}
    added = sorted(f"{f}={v}" for f, v in extractor.extract(text) if str(v).casefold() not in held)
    if added:
        return f"answer states a preference the user does not hold: {added}"
    return None


def goal_turn(model, prompt_template: str, out: UserTurn, catalog: MovieCatalog, extractor,
              history: list[tuple[str, str]]) -> tuple[str, dict]:
    """The user's turn written by ``model`` from its goal and reaction (module docstring). Returns
    (the text said, its user_meta): the model's answer when it passes every check, else the rule
    turn (``out.template``) with the failed record."""
    meta = dict(out.meta)
    prompt, values, films, allowed = goal_prompt(prompt_template, meta, out.state, catalog, history)
    answer = checked_invoke(model, [("user", prompt)], purpose="user_goal", strip='"',
                            prompt_texts=[line for line in prompt_template.splitlines() if "{" not in line])
    reason = answer.reason if not answer.ok else goal_defect(
        answer.text, rule_text=out.template, values=values, films=films, allowed=allowed, meta=meta,
        catalog=catalog, extractor=extractor)
    meta["paraphrase"] = {"ok": reason is None, "raw": answer.raw, "reason": reason, "mode": "goal",
                          **({"failed_raws": answer.raws} if answer.raws else {})}
    if reason is not None:
        return out.template, meta
    meta["mentioned_ids"] = [i for i in extractor.extract_titles(answer.text) if i in catalog.by_id]
    return answer.text, meta
