"""Rule-based movie-seeker simulator with controlled preference shifts (crs.md §1.5).

The simulator holds a preference *focus* (field, value) and *constraints* {field: value} over the
catalog's FIELDS, and an *anchor* film it talks about. Every turn it emits a template utterance and
``user_meta`` (focus, constraints, anchor, stage, template, shift event), the ground truth that the
grounded metrics and the segmenter use.

Pairing (DESIGN.md "Running"): every random draw comes from ``rng_for(seed, turn, purpose)``, so
no draw depends on what the CRS said, and the stage schedule (opening, details, shift, follow-up,
contradiction) and therefore the shift turns depend only on the seed.

The user has a goal and reacts (``reactive``, the default; :func:`react`): its hidden targets follow
its shifts (:func:`_retarget`; kept in ``UserTurn.hidden``, the graph's ``user_hidden`` key, never in
``state``); it accepts a film named to it that fits its constraints (a target: it found what it
wanted, ``satisfied``; else a liked one with ``accept_title_prob``), rejects one that does not with
a reason from the film's attributes (:func:`rejection_reason`), says so when a film is repeated, and
asks again when nothing was named. It names only films it was shown or states as its own example.
Having accepted a target it may end the session, satisfied (``end_when_satisfied_prob``; stage
``end``, ``meta.end_session``; the graph then stops after the recommender's closing reply).
From the first reaction on, the wording and anchors (hence bridges and targets) differ between
agents; the shift turns never do. Strict pairing (``reactive=False`` or ``accept_title_prob`` 0): a
non-reactive user, the same turns for every agent; the reaction it would have had is logged in
``meta.would_react`` (the adaptation metrics read it) and never said.
"""

from __future__ import annotations

from dataclasses import dataclass

from convsim.agents.crs.profile import draw_liked, draw_targets, redraw_targets, utility
from convsim.catalog.movies.catalog import FIELDS, Movie, MovieCatalog
from convsim import ConvsimError, rng_for
from convsim.providers.answer_check import checked_invoke

# The original's sequential order (crs.md §1.5) without "name" and "plot", which are not TAS fields.
SEQUENTIAL_ORDER = ("actor", "director", "genre", "writer", "language", "year")
DETAIL_KINDS = ("cast", "mood", "story", "recap")


@dataclass(frozen=True)
class UserSimParams:
    """Simulator policy. Defaults are the original's (crs.md §1.2/§1.5) unless marked new."""
    first_shift_turn: int = 12        # SHIFT_AFTER_TURNS: force the first shift at/after this turn
    shift_prob: float = 0.18          # spontaneous shift per eligible turn
    contradiction_prob: float = 0.15  # contradiction line per eligible turn
    wrong_genre_prob: float = 0.3     # ERROR_RATE: open with a genre other than the true one
    drop_constraint_prob: float = 0.4  # drop one non-core constraint at a shift
    sequential_bias: float = 0.55     # SIM_TOPIC_SHIFT: take the next field in SEQUENTIAL_ORDER
    details_per_anchor: int = 3       # detail questions before a forced shift (original: 3 kinds)
    accept_title_prob: float = 0.3    # new: explicit reaction (original: always, from shared RNG)
    min_genre_titles: int = 3         # a genre needs this many films to be drawn
    min_candidates: int = 5           # new: films that must satisfy the constraints after a shift
    n_targets: int = 5                # new: hidden target films drawn at the start
    reveal_prob: float = 0.5          # new: a shift asks for a liked value of its field when it can
    target_temperature: float = 0.5   # new: softmax temperature of the target draw over utility
    reactive: bool = True             # new: the user says its reaction to the films named to it;
    # False (or accept_title_prob 0) = strict pairing: the same user turns whatever the system says
    end_when_satisfied_prob: float = 0.0  # new: after accepting a hidden target (a film that fits its
    # current preference and its taste) the user ends the session, satisfied, with this probability;
    # 0 (default) = the fixed n_turns of the original; never in strict pairing

    def __post_init__(self):
        for name in ("shift_prob", "contradiction_prob", "wrong_genre_prob",
                     "drop_constraint_prob", "sequential_bias", "accept_title_prob", "reveal_prob",
                     "end_when_satisfied_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConvsimError(f"{name} must be a probability in [0, 1], got {value!r}", field=name)
        if self.first_shift_turn < 2:
            raise ConvsimError("first_shift_turn must be >= 2", field="first_shift_turn")
        if self.min_candidates < 1 or self.n_targets < 1 or self.target_temperature <= 0:
            raise ConvsimError("min_candidates and n_targets must be >= 1, target_temperature > 0",
                               field="min_candidates")
        if not 1 <= self.details_per_anchor <= len(DETAIL_KINDS):
            raise ConvsimError(f"details_per_anchor must be in 1..{len(DETAIL_KINDS)}",
                               field="details_per_anchor")


@dataclass
class UserTurn:
    template: str   # the rule-based utterance (what the LLM paraphrases, if any)
    state: dict     # the simulator's next state (JSON-serialisable); no hidden target in it
    meta: dict      # user_meta of this turn
    hidden: dict | None = None  # {"targets": [...], "found": [...]}: for the evaluator only


def strict(params: UserSimParams) -> bool:
    """Strict pairing: the user never says a reaction (its turns are the same for every system);
    the reaction it would have had is still logged (``meta.would_react``)."""
    return not params.reactive or params.accept_title_prob == 0.0


# --- wording -------------------------------------------------------------------------------

def value_phrase(field: str, value: str) -> str:
    """How a constraint is said inside a sentence, e.g. ("director", "X") -> "directed by X"."""
    return {"genre": f"{value.lower()} films", "actor": f"films starring {value}",
            "director": f"films directed by {value}", "writer": f"films written by {value}",
            "language": f"films in {value}", "year": f"films from {value}"}[field]


def constraints_phrase(constraints: dict[str, str]) -> str:
    """All constraints in one noun phrase: "drama films starring A, directed by B, from 1999"."""
    head = f"{constraints['genre'].lower()} films" if "genre" in constraints else "films"
    tails = [value_phrase(f, constraints[f]).removeprefix("films ")
             for f in FIELDS if f != "genre" and f in constraints]
    return head + (" " + ", ".join(tails) if tails else "")


OPENINGS = (
    "I'm in the mood for {genre_article} movie. Could you recommend a few?",
    "Can you suggest a good {genre} film for tonight?",
    "I feel like watching a {genre} film. Any ideas?",
)
DETAILS = {
    "cast": ("I liked the cast of {anchor}. Who else is good in {focus}?",
             "The actors in {anchor} were great. Any other {focus} with a cast like that?"),
    "mood": ("I want the same mood as {anchor}, but still {focus}.",
             "Something with the feel of {anchor} would be perfect, as long as it's {focus}."),
    "story": ("What other {focus} have a story like {anchor}?",
              "I enjoyed the plot of {anchor}. Are there more {focus} like it?"),
    "recap": ("To be clear, I'm after {constraints}. What fits?",
              "So far I'd like {constraints}. What would you pick?"),
}
SHIFTS = (
    "Speaking of {bridge}, I'd now rather see {target}.",
    "{bridge_cap} reminds me: what about {target}?",
    "Let's change direction. Since I like {bridge}, show me {target}.",
    "Keeping {bridge} in mind, I'm now curious about {target}.",
    "You know what, still with {bridge}, I'd like {target} now.",
    "{bridge_cap} is great, but now I'm in the mood for {target}.",
)
FOCUS_SHIFTS = ("I'd now like to focus on {target}.", "Let's focus on {target} now.",
                "From now on I'm after {target}.")
PLAIN_SHIFTS = ("Let's change direction: show me {target}.", "I'd now rather see {target}.",
                "New idea: {target}.", "Actually, I've changed my mind. I want {target}.")
DROP_TAILS = (" I don't care about {values} anymore.", " Forget about {values}.",
              " {values_cap} no longer matters to me.")
FOLLOW_UPS = (
    "Just checking, do you have more {focus} like that?",
    "Any more {focus} you could suggest?",
    "What else is there among {focus}?",
    "Give me another one of the {focus}, please.",
)
CONTRADICTIONS = {
    "correct_genre": ("Actually, scratch that: I said {wrong} films but I really meant {right} films.",
                      "Sorry, my mistake: not {wrong} films, I want {right} films.",
                      "Wait, I misspoke earlier. {right_cap} films, not {wrong} films."),
    "drop": ("Hmm, forget what I said about {value}; that doesn't matter to me anymore.",
             "On second thought, {value} isn't important to me.",
             "Scratch {value}, I'm not attached to it after all."),
    "waver": ("Wait, do I really want {focus}? Yes, I do: {focus} it is.",
              "Hmm, maybe not {focus}... no, actually {focus} are exactly what I want.",
              "I'm having second thoughts about {focus}. No, I'll stay with {focus}."),
}
# the user's reaction to the films the previous system turn named (said only when reactive)
REACTIONS = {
    "accept_target": ("{title} is exactly what I was looking for, thank you!",
                      "Yes! {title} is just what I wanted.",
                      "{title}: perfect, that's the one I'll watch."),
    "accept": ("{title} sounds good.", "{title} could work, I'll note it down.",
               "Oh, {title} looks nice."),
    "reject": ("Not {title}: {reason}.", "{title} won't do, {reason}.", "Hmm, {title}? No, {reason}."),
    "ask": ("You haven't named a film yet.", "Could you name an actual film?",
            "Which film would you suggest, though?"),
    "repeat": ("I already know {title}.", "{title} again? Something else, please.",
               "You mentioned {title} before."),
}
# the user found its film and leaves (``end_when_satisfied_prob``): said after the accept_target reaction
CLOSINGS = ("That's all I needed, thanks for the help!", "I'll go and watch it now. Thanks, bye!",
            "Great, I'm all set for tonight. Thank you!")
OWN_EXAMPLES = ("One film I love is {title}.", "A favourite of mine is {title}.",
                "I really enjoyed {title}.")


def _bridge_mention(field: str, value: str) -> str:
    return {"genre": f"{value.lower()} films", "director": f"{value}'s directing",
            "writer": f"{value}'s writing", "language": f"films in {value}",
            "year": f"films from {value}"}.get(field, value)


# --- state ---------------------------------------------------------------------------------

def _focus_phrase(state: dict) -> str:
    return value_phrase(*state["focus"])


def _count(catalog: MovieCatalog, constraints: dict[str, str]) -> int:
    return len(catalog.search(constraints)) if constraints else len(catalog)


def _pick_anchor(catalog: MovieCatalog, constraints: dict, rng, avoid: set[str]) -> str:
    """A film satisfying the constraints, never one in ``avoid`` (the old anchor, the hidden
    targets) unless nothing else satisfies them."""
    matching = [m.id for m in catalog.search(constraints)]
    pool = [i for i in matching if i not in avoid] or matching
    if not pool:
        raise ConvsimError(f"no catalog film satisfies the simulator's constraints {constraints}",
                           file=catalog.source, field="constraints")
    return rng.choice(pool)


def relax(catalog: MovieCatalog, constraints: dict[str, str], keep: set[str],
          min_candidates: int) -> tuple[dict[str, str], list[list[str]]]:
    """Drop constraints (older fields first, FIELDS order; never those in ``keep``) until at least
    ``min_candidates`` films satisfy them, as a user who learns that nothing fits would."""
    constraints, dropped = dict(constraints), []
    for field in [f for f in FIELDS if f in constraints and f not in keep]:
        if _count(catalog, constraints) >= min_candidates:
            break
        dropped.append([field, constraints.pop(field)])
    return constraints, dropped


def profile_genres(catalog: MovieCatalog, params: UserSimParams) -> list[str]:
    """The genres a simulated user may want: at least ``max(min_genre_titles, min_candidates)``
    films each; fewer than two is bad input (the catalog, or params asking too much of it)."""
    floor = max(params.min_genre_titles, params.min_candidates)
    genres = [g for g in catalog.values("genre")
              if len(g) > 2 and catalog.doc_freq("genre", g) >= floor]
    if len(genres) < 2:
        raise ConvsimError(f"the catalog has {len(genres)} genre(s) with {floor}+ films; the user simulator "
                           f"needs two (min_genre_titles={params.min_genre_titles}, "
                           f"min_candidates={params.min_candidates})", file=catalog.source, field="genre")
    return genres


def start_state(catalog: MovieCatalog, seed: int, params: UserSimParams) -> dict:
    """The latent profile of one simulated user (true genre, taste, hidden targets, opening
    genre, anchor)."""
    genres = profile_genres(catalog, params)
    rng = rng_for(seed, 0, "profile")
    true_genre = rng.choice(genres)
    liked = draw_liked(catalog, true_genre, seed)
    targets = draw_targets(catalog, liked, true_genre, seed, params.n_targets,
                           params.target_temperature)
    wrong_start = rng_for(seed, 0, "wrong_start").random() < params.wrong_genre_prob
    opening = rng_for(seed, 0, "wrong_genre").choice([g for g in genres if g != true_genre]) \
        if wrong_start else true_genre
    constraints = {"genre": opening}
    return {"true_genre": true_genre, "liked": liked, "targets": targets,
            "opening_genre": opening, "wrong_start_pending": wrong_start,
            "focus": ["genre", opening], "constraints": constraints,
            "anchor": _pick_anchor(catalog, constraints, rng_for(seed, 0, "anchor"), set(targets)),
            "details_left": [], "shifted": False, "last_stage": None}


def _fits(movie: Movie, constraints: dict[str, str]) -> bool:
    return all(value in movie.values(field) for field, value in constraints.items())


def _target_value(state: dict, field: str, pool: list[str], seed: int, turn: int,
                  params: UserSimParams) -> str:
    """The new focus value: a liked value of the field when one is in the pool and the reveal
    draw says so (the user discloses its taste), else a value drawn from the pool."""
    liked = sorted(v for f, v in state.get("liked", ()) if f == field and v in pool)
    if liked and rng_for(seed, turn, "shift_reveal").random() < params.reveal_prob:
        return rng_for(seed, turn, "shift_value").choice(liked)
    return rng_for(seed, turn, "shift_value").choice(pool)


def _shift(state: dict, turn: int, seed: int, catalog: MovieCatalog,
           params: UserSimParams) -> tuple[dict, dict]:
    """Build a shift event: bridge from the anchor's values (or the focus), a new focus field
    (sequential bias) whose value is new (neither the old focus nor already required) and has
    at least ``min_candidates`` films, older constraints relaxed until at least
    ``min_candidates`` films satisfy them all, and a new anchor."""
    anchor = catalog.by_id[state["anchor"]]
    focus_field, focus_value = state["focus"]
    required = {(f, str(v)) for f, v in state["constraints"].items()} | {(focus_field, focus_value)}
    bridges = {(focus_field, focus_value)}
    for field in FIELDS:
        values = anchor.values(field)
        bridges.update((field, v) for v in (values[:3] if field == "actor" else values))
    bridge_field, bridge_value = rng_for(seed, turn, "shift_bridge").choice(sorted(bridges))

    rng_field = rng_for(seed, turn, "shift_field")
    if rng_field.random() < params.sequential_bias:
        pos = SEQUENTIAL_ORDER.index(focus_field)
        target_field = SEQUENTIAL_ORDER[(pos + 1) % len(SEQUENTIAL_ORDER)]
    else:
        target_field = rng_field.choice([f for f in SEQUENTIAL_ORDER if f != focus_field])

    # a value of the target field among the bridge's films (reachable from the bridge), new,
    # with enough films; when none, the next field in order that has one; failing that any
    # new value of the catalog with enough films
    reachable = catalog.search({bridge_field: bridge_value})
    pos = SEQUENTIAL_ORDER.index(target_field)
    order = [f for f in SEQUENTIAL_ORDER[pos:] + SEQUENTIAL_ORDER[:pos] if f != focus_field]
    target_value = None
    for source in (reachable, None):
        for field in order:
            values = {v for m in reachable for v in m.values(field)} if source is not None \
                else set(catalog.values(field))
            pool = sorted(v for v in values if (field, v) not in required
                          and catalog.doc_freq(field, v) >= params.min_candidates)
            if pool:
                target_field = field
                target_value = _target_value(state, field, pool, seed, turn, params)
                break
        if target_value is not None:
            break
    if target_value is None:
        raise ConvsimError("the catalog has no value with min_candidates films to shift to",
                           file=catalog.source, field="min_candidates")

    constraints = dict(state["constraints"])
    constraints.pop(target_field, None)  # the new focus replaces an older value of its field
    constraints[target_field] = target_value
    dropped = []
    rng_drop = rng_for(seed, turn, "drop_constraint")
    non_core = sorted(k for k in constraints if k != target_field)
    if non_core and rng_drop.random() < params.drop_constraint_prob:
        field = rng_drop.choice(non_core)
        dropped.append([field, constraints.pop(field)])
    # the bridge is kept as a constraint when enough films also have it
    with_bridge = dict(constraints, **{bridge_field: bridge_value})
    bridge_kept = bridge_field == target_field and bridge_value == target_value
    if bridge_field != target_field and _count(catalog, with_bridge) >= params.min_candidates:
        constraints, bridge_kept = with_bridge, True
    if not bridge_kept:  # another value of the anchor (or the old focus) that can carry over
        alts = sorted((f, v) for f, v in bridges if f != target_field and constraints.get(f) in (None, v)
                      and _count(catalog, dict(constraints, **{f: v})) >= params.min_candidates)
        if alts:
            bridge_field, bridge_value = rng_for(seed, turn, "shift_bridge_alt").choice(alts)
            constraints, bridge_kept = dict(constraints, **{bridge_field: bridge_value}), True
    # a value kept as the bridge is not dropped ("Drama films is great ... Forget about Drama" said both)
    dropped = [d for d in dropped if not (bridge_kept and (d[0], str(d[1])) == (bridge_field, str(bridge_value))
                                          and constraints.get(d[0]) == d[1])]
    constraints, relaxed = relax(catalog, constraints, {target_field}, params.min_candidates)
    dropped += relaxed
    avoid = {state["anchor"], *state.get("targets", ())}
    new_anchor = _pick_anchor(catalog, constraints, rng_for(seed, turn, "shift_anchor"), avoid)
    event = {"turn": turn, "from_focus": [focus_field, focus_value],
             "to_focus": [target_field, target_value], "bridge_field": bridge_field,
             "bridge_value": bridge_value, "bridge_kept": bridge_kept,
             "from_anchor": state["anchor"], "to_anchor": new_anchor, "dropped": dropped}
    # once the user has moved on, a correction of the opening genre would no longer make sense
    new_state = dict(state, focus=[target_field, target_value], constraints=constraints,
                     anchor=new_anchor, shifted=True, wrong_start_pending=False)
    return new_state, event


def _pick_form(rng, forms, last: str | None) -> str:
    """One of ``forms``, never ``last`` (the form this family said the previous time) when another
    exists: a contradiction or shift line is not repeated verbatim in consecutive occurrences."""
    pool = [f for f in forms if f != last] or list(forms)
    return rng.choice(pool)


def _shift_text(event: dict, rng, last_forms: dict | None = None) -> tuple[str, dict]:
    """The shift's line, and the forms it used (``last_forms`` updated: the next shift avoids them)."""
    last_forms = dict(last_forms or {})
    bridge = _bridge_mention(event["bridge_field"], event["bridge_value"])
    target = value_phrase(*event["to_focus"])
    if (event["bridge_field"], event["bridge_value"]) == tuple(event["to_focus"]):
        forms = FOCUS_SHIFTS
    elif not event.get("bridge_kept", True):
        # the bridge would leave too few films: the user does not ask for it
        forms = PLAIN_SHIFTS
    else:
        forms = SHIFTS
    form = _pick_form(rng, forms, last_forms.get("shift"))
    last_forms["shift"] = form
    text = form.format(bridge=bridge, bridge_cap=bridge[:1].upper() + bridge[1:], target=target)
    if event["dropped"]:
        values = " or ".join(str(v) for _, v in event["dropped"])
        tail = _pick_form(rng, DROP_TAILS, last_forms.get("drop_tail"))
        last_forms["drop_tail"] = tail
        text += tail.format(values=values, values_cap=values[:1].upper() + values[1:])
    return text, last_forms


def _contradiction(state: dict, turn: int, seed: int, catalog: MovieCatalog,
                   params: UserSimParams) -> tuple[dict, str, str]:
    rng = rng_for(seed, turn, "contradiction_kind")
    last = (state.get("last_forms") or {}).get("contradiction")  # not said again right away
    if state["wrong_start_pending"]:
        wrong, right = state["opening_genre"], state["true_genre"]
        focus = ["genre", right] if state["focus"][0] == "genre" else state["focus"]
        constraints, _ = relax(catalog, dict(state["constraints"], genre=right),
                               {"genre", focus[0]}, params.min_candidates)
        form = _pick_form(rng, CONTRADICTIONS["correct_genre"], last)
        text = form.format(
            wrong=wrong.lower(), right=right.lower(), right_cap=right[:1].upper() + right[1:].lower())
        return dict(state, constraints=constraints, focus=focus, wrong_start_pending=False,
                    last_forms=dict(state.get("last_forms") or {}, contradiction=form),
                    anchor=_pick_anchor(catalog, constraints, rng_for(seed, turn, "anchor"),
                                        {state["anchor"], *state.get("targets", ())})), \
            "correct_genre", text
    droppable = sorted(f for f in state["constraints"] if f != state["focus"][0])
    if droppable and rng.random() < 0.5:
        field = rng.choice(droppable)
        constraints = {k: v for k, v in state["constraints"].items() if k != field}
        value = state["constraints"][field]
        form = _pick_form(rng, CONTRADICTIONS["drop"], last)
        text = form.format(value=f"{value.lower()} films" if field == "genre" else value)
        return dict(state, constraints=constraints,
                    last_forms=dict(state.get("last_forms") or {}, contradiction=form)), "drop", text
    form = _pick_form(rng, CONTRADICTIONS["waver"], last)
    return dict(state, last_forms=dict(state.get("last_forms") or {}, contradiction=form)), "waver", \
        form.format(focus=_focus_phrase(state))


def misfit(movie: Movie, constraints: dict, focus_field: str | None = None) -> tuple[str, str, list[str]] | None:
    """The first constraint (the focus field first) a film does not satisfy: (field, the value asked
    for, the film's own values of that field); None when it fits."""
    for field in [focus_field] + [f for f in FIELDS if f != focus_field]:
        if field not in constraints:
            continue
        value, have = str(constraints[field]), [str(v) for v in movie.values(field)]
        if value.casefold() not in {v.casefold() for v in have}:
            return field, value, have
    return None


def rejection_reason(movie: Movie, constraints: dict, focus_field: str | None = None) -> str | None:
    """Why a film does not fit the user's constraints, from the film's own catalog attributes
    (the focus field first): "that one is a comedy film and I asked for drama"; None when it fits.
    (Never "not drama": that would read as the user retracting its own value.)"""
    found = misfit(movie, constraints, focus_field)
    if found is not None:
        field, value, have = found
        if field == "genre":
            own = have[0].lower() if have else "different"
            return f"that one is {'an' if own[:1] in 'aeiou' else 'a'} {own} film and I asked for {value.lower()}"
        if field == "year":
            return f"that one is from {have[0]} and I asked for {value}" if have else f"I asked for {value}"
        if field == "actor":
            return f"{value} isn't in it"
        if field == "director":
            return f"it's directed by {have[0]} and I asked for {value}" if have else f"{value} didn't direct it"
        if field == "writer":
            return f"{value} didn't write it"
        return f"it's in {have[0]} and I asked for {value}" if have else f"I asked for {value}"
    return None


def react(state: dict, hidden: dict, turn: int, seed: int, catalog: MovieCatalog,
          params: UserSimParams, system_titles: list[str]) -> dict:
    """The user's reaction to the films the previous system turn named (catalog ids):

    * ``accept_target``: a named film satisfying its constraints is one of its hidden targets
      (it found what it wanted: ``satisfied``);
    * ``accept``: else a new film satisfying its constraints with utility >= 1 under its taste
      (its true genre or a liked person), taken with probability ``accept_title_prob``;
    * ``reject``: else a new film that does not satisfy them, with the reason from its attributes;
    * ``repeat``: every film named was named before (by the system or the user itself);
    * ``ask``: no film was named;
    * ``pass``: films that fit were named but none taken (nothing said).
    """
    shown, own = set(state.get("shown", ())), set(state.get("introduced", ()))
    named = [i for i in dict.fromkeys(system_titles or ()) if i in catalog.by_id]
    if not named:
        return {"kind": "ask"}
    new = [i for i in named if i not in shown and i not in own and i != state["anchor"]]
    if not new:
        return {"kind": "repeat", "film": named[0]}
    fitting = [i for i in new if _fits(catalog.by_id[i], state["constraints"])]
    targets = [i for i in fitting if i in set(hidden.get("targets", ()))]
    if targets:
        return {"kind": "accept_target", "film": targets[0], "accepted": targets[0], "target": True}
    u = utility(catalog, state.get("liked", []))
    liked = sorted((i for i in fitting if u.get(i, 0.0) >= 1.0), key=lambda i: (-u.get(i, 0.0), i))
    if liked and rng_for(seed, turn, "accept_title").random() < params.accept_title_prob:
        return {"kind": "accept", "film": liked[0], "accepted": liked[0], "target": False}
    misfits = [i for i in new if i not in fitting]
    if misfits:
        film = misfits[0]
        return {"kind": "reject", "film": film,
                "reason": rejection_reason(catalog.by_id[film], state["constraints"], state["focus"][0]),
                "misfit": list(misfit(catalog.by_id[film], state["constraints"], state["focus"][0]))}
    return {"kind": "pass", "film": None}


def _reaction_text(reaction: dict, catalog: MovieCatalog, rng) -> str:
    kind = reaction["kind"]
    if kind == "pass":
        return ""
    title = catalog.by_id[reaction["film"]].title if reaction.get("film") else ""
    return rng.choice(REACTIONS[kind]).format(title=title, reason=reaction.get("reason", ""))


def _retarget(state: dict, hidden: dict, turn: int, seed: int, catalog: MovieCatalog,
              params: UserSimParams) -> dict:
    """The hidden targets follow the preference: those still satisfying the constraints are kept,
    the rest redrawn among the films that do (never the anchor or a film the user named itself), at
    most ``n_targets`` and at most half of those films."""
    constraints = state["constraints"]
    own = {state["anchor"], *state.get("introduced", ())}
    keep = [t for t in hidden["targets"] if _fits(catalog.by_id[t], constraints)
            and (t not in own or t in hidden.get("found", ()))]
    pool = [m.id for m in catalog.search(constraints) if m.id not in own]
    # at most half the films that fit: the others are films the user would not single out (a
    # recommender following the constraints without the taste does not find every target)
    n = min(params.n_targets, max(1, (len(pool) + 1) // 2))
    keep = sorted(keep, key=lambda t: hidden["targets"].index(t))[:n]
    targets = redraw_targets(catalog, state.get("liked", []), pool, keep, rng_for(seed, turn, "retarget"),
                             n, params.target_temperature)
    return dict(hidden, targets=targets)


def user_turn(state: dict | None, *, turn: int, seed: int, catalog: MovieCatalog,
              params: UserSimParams, system_titles: list[str] | None = None,
              hidden: dict | None = None) -> UserTurn:
    """One user turn. ``state`` is None at turn 1; ``system_titles`` are the catalog ids the
    previous system turn named (what the user reacts to); ``hidden`` the previous turn's
    ``UserTurn.hidden`` (the hidden targets; None at turn 1, or to recompute them from the seed)."""
    if turn == 1 or state is None:
        state = start_state(catalog, seed, params)
        hidden = {"targets": state.pop("targets"), "found": []}
        state = dict(state, shown=[], introduced=[])
    elif hidden is None:
        hidden = {"targets": draw_targets(catalog, state["liked"], state["true_genre"], seed,
                                          params.n_targets, params.target_temperature), "found": []}
    state = dict(state, targets=hidden["targets"])  # read by the shift's anchor choice; removed below
    before = dict(state["constraints"])
    said_by_user: list[str] = []
    own_example = None
    reaction, would_react = None, None
    if turn > 1:
        would_react = react(state, hidden, turn, seed, catalog, params, system_titles or [])
        # the films shown so far (what the user may name; in strict mode read by the logged reaction only)
        shown = list(dict.fromkeys(state["shown"] + [i for i in system_titles or [] if i in catalog.by_id]))
        state = dict(state, shown=shown)
        if not strict(params):
            reaction = would_react
            if reaction.get("accepted"):
                state = dict(state, anchor=reaction["accepted"], details_left=state["details_left"])
                if reaction["kind"] == "accept_target":
                    hidden = dict(hidden, found=hidden["found"] + [reaction["accepted"]])
            if reaction.get("film"):
                said_by_user.append(reaction["film"])
    template_rng = rng_for(seed, turn, "template")
    shift, contradiction = None, None
    ends = bool(reaction and reaction["kind"] == "accept_target" and params.end_when_satisfied_prob > 0
                and rng_for(seed, turn, "end_satisfied").random() < params.end_when_satisfied_prob)
    before_state = state
    act: dict = {}
    if ends:  # satisfied: it thanks and leaves (its agenda for this turn is not said; the session ends)
        stage = "end"
        text = template_rng.choice(CLOSINGS)
    elif turn == 1:
        stage = "initial"
        act = {"genre": state["opening_genre"]}
        genre = state["opening_genre"].lower()
        article = "an" if genre[:1] in "aeiou" else "a"
        text = template_rng.choice(OPENINGS).format(genre=genre, genre_article=f"{article} {genre}")
    elif state["last_stage"] == "shift":
        stage = "follow_up"
        act = {"focus": list(state["focus"])}
        text = template_rng.choice(FOLLOW_UPS).format(focus=_focus_phrase(state))
    elif ((not state["shifted"] and turn >= params.first_shift_turn) or not state["details_left"]
          or rng_for(seed, turn, "shift").random() < params.shift_prob):
        stage = "shift"
        state, shift = _shift(state, turn, seed, catalog, params)
        text, last_forms = _shift_text(shift, template_rng, state.get("last_forms"))
        state = dict(state, last_forms=last_forms)
        act = {"shift": shift}
    elif rng_for(seed, turn, "contradiction").random() < params.contradiction_prob:
        stage = "contradiction"
        state, contradiction, text = _contradiction(state, turn, seed, catalog, params)
        act = {"kind": contradiction, "focus": list(state["focus"])}
        if contradiction == "correct_genre":
            act.update(wrong=before_state["opening_genre"], right=state["true_genre"])
        elif contradiction == "drop":
            act["dropped"] = [[f, v] for f, v in before_state["constraints"].items()
                              if f not in state["constraints"]]
    else:
        stage = "details"
        kind = state["details_left"][0]
        anchor = catalog.by_id[state["anchor"]]
        text = template_rng.choice(DETAILS[kind]).format(
            anchor=anchor.title, focus=_focus_phrase(state),
            constraints=constraints_phrase(state["constraints"]))
        state = dict(state, details_left=state["details_left"][1:])
        act = {"kind": kind, "anchor": anchor.id, "focus": list(state["focus"])}
        if kind != "recap":  # the user names its anchor: a film it was shown, or its own example
            seen = state["shown"] if not strict(params) else []  # strict: the same words for every system
            if anchor.id not in seen and anchor.id not in state["introduced"]:
                intro = rng_for(seed, turn, "own_example").choice(OWN_EXAMPLES).format(title=anchor.title)
                text = f"{intro} {text}"
                state = dict(state, introduced=state["introduced"] + [anchor.id])
                own_example = anchor.id
            said_by_user.append(anchor.id)
    if stage in ("initial", "shift"):
        # a fresh detail agenda per focus; the order is drawn from this turn's own stream
        order = rng_for(seed, turn, "details_order").sample(DETAIL_KINDS, params.details_per_anchor)
        state = dict(state, details_left=order)
    if reaction:
        said = _reaction_text(reaction, catalog, rng_for(seed, turn, "reaction_form"))
        text = f"{said} {text}" if said else text
    state = dict(state, last_stage=stage)
    if turn == 1 or state["constraints"] != before:
        hidden = _retarget(state, hidden, turn, seed, catalog, params)
    state.pop("targets", None)  # the hidden targets live in ``hidden`` only
    anchor = catalog.by_id[state["anchor"]]
    meta = {"turn": turn, "stage": stage, "focus_field": state["focus"][0],
            "focus_value": state["focus"][1], "shift_event": shift is not None, "shift": shift,
            "constraints": dict(state["constraints"]), "anchor": anchor.id,
            "anchor_title": anchor.title, "template": text, "contradiction": contradiction,
            "reaction": reaction, "would_react": would_react, "true_genre": state["true_genre"],
            "mentioned_ids": list(dict.fromkeys(said_by_user)), "own_example": own_example,
            "satisfied": bool(reaction and reaction["kind"] == "accept_target"), "end_session": ends,
            "act": act,
            "n_satisfying": _count(catalog, state["constraints"])}
    return UserTurn(template=text, state=state, meta=meta, hidden=hidden)


def gold_concepts(meta: dict) -> set[tuple[str, str]]:
    """The simulator's gold constraints of a turn as a concept set {(field, value)}."""
    return {(f, str(v)) for f, v in meta["constraints"].items()}


# --- optional LLM paraphrase ---------------------------------------------------------------

def paraphrase(model, prompt_template: str, template: str, history: list[tuple[str, str]],
               must_mention: list[str]) -> tuple[str, dict]:
    """Rephrase ``template`` with the user model. A garbage answer (empty, multi-turn, far too
    long, or dropping a value the template states) falls back to the template and is recorded
    with the raw answer. Returns (utterance, record)."""
    recent = "\n".join(f"{speaker.upper()}: {text}" for speaker, text in history[-4:]) or "(none)"
    prompt = prompt_template.format(template=template, history=recent)
    # the one answer check (convsim.providers.answer_check: bytes, controls, nothing, the prompt
    # repeated), re-asked as configured; then the paraphrase's own defects
    answer = checked_invoke(model, [("user", prompt)], purpose="paraphrase", strip='"',
                            prompt_texts=[line for line in prompt_template.splitlines() if "{" not in line])
    raw, text = answer.raw, answer.text
    reason = answer.reason if not answer.ok else _paraphrase_defect(text, template, must_mention)
    record = {"ok": reason is None, "raw": raw, "reason": reason,
              **({"failed_raws": answer.raws} if answer.raws else {})}
    return (template if reason else text), record


def _paraphrase_defect(text: str, template: str, must_mention: list[str]) -> str | None:
    if not text:
        return "empty answer"
    if len(text) > 3 * len(template) + 200:
        return "answer far longer than the template"
    lowered = text.lower()
    if "user:" in lowered or "system:" in lowered or "\n\n" in text:
        return "answer holds more than one utterance"
    missing = [v for v in must_mention if v.lower() not in lowered]
    if missing:
        return f"answer drops the stated values {missing}"
    return None

