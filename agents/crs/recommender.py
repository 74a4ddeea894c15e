"""Catalog-grounded conversational recommender ("CRS component" of the multi-model CRS experiment, crs.md §1.6), fixed.

Per turn: (1) update the tracked constraints {field: [values]} from the user's utterance with the
catalog concept extractor (a later mention of a field replaces its values; a negated mention
removes the value; reset words clear everything); (2) retrieve the films satisfying the
constraints (AND over fields, OR within a field) in a deterministic order, relaxing the least
recently stated field one at a time while nothing matches; (3) answer from templates (model
``none``) or from an LLM with prompts/crs_respond.txt, which lists the candidates and does not
ask to restate the user's constraints; (4) check the titles of the answer against the catalog
and count off-catalog titles; (5) log the top-k recommended ids.

Fixed relative to the original (crs.md §1.6): word-boundary concept extraction instead of
substrings, no "restate the constraints" instruction, a deterministic ranking instead of a random
shuffle, recorded relaxation instead of an "Inception" fallback, and a post-check of titles.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass

from convsim.agents.crs.profile import utility
from convsim.agents.crs.references import (
    REFERENCE_AGENTS, echo_plus_fixed_film_reply, echo_reply, oracle_ranking, paraphrase_reply,
    random_reply, restate_titles_reply, titles_only_reply,
)
from convsim.catalog.movies.catalog import FIELDS, Movie, MovieCatalog
from convsim import ConvsimError, rng_for
from convsim.agents.language import node_vocabulary
from convsim.providers.answer_check import checked_invoke

RESET_PHRASES = ("anything works", "whatever", "surprise me", "anything really", "start over")
# A mention is negated when its clause starts with one of these before the value ...
_NEGATION_BEFORE = re.compile(r"\b(forget|never mind|don't care about|do not care about|not|"
                              r"no more|without|rather than|instead of|except)\b", re.IGNORECASE)
# ... or when it is followed by "but I (really) meant" ("I said X but I meant Y").
_NEGATION_AFTER = re.compile(r"^\s*(films?|movies?)?\s*,?\s*but\s+i\s+(really\s+)?meant\b",
                             re.IGNORECASE)
# Role cues that tell which field a person's name fills when the catalog knows it in several
# (James Cameron directs, writes and acts): "written by X", "X's directing", "starring X".
_CUE_BEFORE = {"actor": re.compile(r"\b(starring|with|actor|actress)\s+$", re.IGNORECASE),
               "director": re.compile(r"\b(directed by|director)\s+$", re.IGNORECASE),
               "writer": re.compile(r"\b(written by|writer|screenplay by)\s+$", re.IGNORECASE)}
_CUE_AFTER = {"director": re.compile(r"^'s\s+(directing|direction)", re.IGNORECASE),
              "writer": re.compile(r"^'s\s+(writing|script)", re.IGNORECASE),
              "actor": re.compile(r"^'s\s+(acting|performance)", re.IGNORECASE)}
_CLAUSE_BREAK = re.compile(r"[.;!?,:]|\bbut\b|\band\b|\byes\b", re.IGNORECASE)


@dataclass(frozen=True)
class CRSParams:
    top_k: int = 10                # recommended ids logged per turn
    n_mention: int = 2             # films named in a template answer
    n_prompt_candidates: int = 5   # candidates listed in the LLM prompt
    history_turns: int = 6         # transcript entries shown to the LLM
    agent: str = "template"        # template or one of references.REFERENCE_AGENTS


AGENTS = ("template", *REFERENCE_AGENTS)


def check_agent(agent: str) -> str:
    if agent not in AGENTS:
        raise ConvsimError(f"unknown crs_agent {agent!r}; expected one of {AGENTS}",
                           field="crs_agent")
    return agent


def new_crs_state() -> dict:
    return {"constraints": {}, "stated_at": {}, "shown": []}


# --- understanding -------------------------------------------------------------------------

def _mention_polarity(text: str, value: str) -> bool | None:
    """Polarity of the *last* mention of ``value`` in ``text`` (True positive, False negated),
    None when the value is not found literally (e.g. a fuzzy or alias match: taken as positive)."""
    matches = list(re.finditer(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, re.IGNORECASE))
    if not matches:
        return None
    m = matches[-1]
    before = text[:m.start()]
    clause = _CLAUSE_BREAK.split(before)[-1]
    if _NEGATION_BEFORE.search(clause) or _NEGATION_AFTER.match(text[m.end():]):
        return False
    return True


def _cued_field(text: str, value: str) -> str | None:
    """The field a role cue next to the last mention of ``value`` names, if any."""
    matches = list(re.finditer(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, re.IGNORECASE))
    if not matches:
        return None
    m = matches[-1]
    for field, cue in _CUE_BEFORE.items():
        if cue.search(text[:m.start()]):
            return field
    for field, cue in _CUE_AFTER.items():
        if cue.match(text[m.end():]):
            return field
    return None


def disambiguate(user_text: str, concepts) -> set[tuple[str, str]]:
    """Keep, for a value extracted under several person fields, the field its role cue names."""
    by_value: dict[str, set[str]] = {}
    for field, value in concepts:
        by_value.setdefault(value, set()).add(field)
    kept = set()
    for value, fields in by_value.items():
        cued = _cued_field(user_text, value) if len(fields) > 1 else None
        kept |= {(cued, value)} if cued in fields else {(f, value) for f in fields}
    return kept


def update_constraints(state: dict, user_text: str, concepts, turn: int) -> dict:
    """The CRS's tracked constraints after a user utterance whose extracted concepts are
    ``concepts`` (set of (field, value)). Returns a new state plus ``"update"`` details."""
    constraints = {f: list(v) for f, v in state["constraints"].items()}
    stated_at = dict(state["stated_at"])
    lowered = user_text.lower()
    reset = any(p in lowered for p in RESET_PHRASES)
    if reset:
        constraints, stated_at = {}, {}
    positive: dict[str, set[str]] = {}
    negated = []
    for field, value in sorted(disambiguate(user_text, concepts)):
        if _mention_polarity(user_text, value) is False:
            negated.append([field, value])
        else:
            positive.setdefault(field, set()).add(value)
    for field, value in negated:
        if value in constraints.get(field, []):
            constraints[field] = [v for v in constraints[field] if v != value]
            if not constraints[field]:
                del constraints[field], stated_at[field]
    for field, values in positive.items():
        constraints[field] = sorted(values)
        stated_at[field] = turn
    new_state = dict(state, constraints=constraints, stated_at=stated_at)
    return new_state | {"update": {"reset": reset, "negated": negated,
                                   "stated": sorted([f, v] for f, vs in positive.items() for v in vs)}}


# --- retrieval -----------------------------------------------------------------------------

def _oldest(active: dict, stated_at: dict) -> str:
    return min(active, key=lambda f: (stated_at.get(f, 0), FIELDS.index(f)))


def retrieve(catalog: MovieCatalog, state: dict, history_concepts, n_fresh: int = 0,
             limit: int | None = None) -> tuple[list[Movie], list[str], int]:
    """Candidates for the tracked constraints, the fields relaxed to find any, and how many
    films the (relaxed) constraints match.

    Relaxation drops the least recently stated field (ties: FIELDS order) until some film
    matches. Ranking: films not yet shown first, then by Σ idf of the dialogue's user concepts
    the film has (``history_concepts``), then the film's catalog richness. When fewer than
    ``n_fresh`` candidates are new to the user, films of further relaxed constraints that are
    new follow the new candidates (a recommender that has shown every match widens rather than
    repeats). With ``limit`` only the first ``limit`` films are ranked (a partial selection,
    not a sort of every candidate)."""
    active = dict(state["constraints"])
    relaxed: list[str] = []
    candidates = catalog.search(active)
    while not candidates and active:
        oldest = _oldest(active, state["stated_at"])
        relaxed.append(oldest)
        del active[oldest]
        candidates = catalog.search(active)
    shown = set(state["shown"])
    # in sorted order: summed per film below, and a set's order (string hashing) changed the last bits
    weights = {(f, v): catalog.idf(f, v) for f, v in sorted(history_concepts, key=repr)}

    def relevance(movie: Movie) -> float:
        return sum(w for (f, v), w in weights.items() if v in movie.values(f))

    def key(movie: Movie):
        # richness, a popularity proxy: well-known films have fuller catalog entries
        return (movie.id in shown, -relevance(movie), -movie.richness)

    def rank(films: list[Movie], k: int | None) -> list[Movie]:
        return sorted(films, key=key) if k is None or k >= len(films) else heapq.nsmallest(k, films, key=key)

    ranked = rank(candidates, limit)
    n_new = sum(1 for m in candidates if m.id not in shown)
    if n_new < n_fresh:
        widened, ids = dict(active), {m.id for m in candidates}
        extra: list[Movie] = []
        while n_new + len(extra) < n_fresh and widened:
            del widened[_oldest(widened, state["stated_at"])]
            more = [m for m in catalog.search(widened) if m.id not in shown and m.id not in ids]
            extra += rank(more, n_fresh - n_new - len(extra))[:n_fresh - n_new - len(extra)]
            ids.update(m.id for m in more)
        # the new candidates are first in ``ranked`` (all of them: n_new < n_fresh <= limit)
        ranked = ranked[:n_new] + extra + ranked[n_new:]
    return (ranked if limit is None else ranked[:limit]), relaxed, len(candidates)


# --- template answers ----------------------------------------------------------------------

OPENERS = (
    "If you like {matched}, try {film}.",
    "For {matched}, I'd suggest {film}.",
    "{film_cap} is a great match for {matched}.",
    "You could watch {film}; it fits {matched}.",
)
SECONDS = ("You might also enjoy {film}.", "Another good one is {film}.",
           "{film_cap} is worth a look too.")
OPEN_ENDED = ("Here is a popular pick: {film}.", "How about {film}?")
RELAXED = "I couldn't find a film with all of that, so I set aside {values}. "


def _constraint_phrase(constraints: dict[str, list[str]]) -> str:
    parts = []
    if "genre" in constraints:
        parts.append(" or ".join(v.lower() for v in constraints["genre"]) + " films")
    words = {"actor": "with", "director": "directed by", "writer": "written by",
             "language": "in", "year": "from"}
    for field in FIELDS[1:]:
        if field in constraints:
            parts.append(f"{words[field]} {' or '.join(constraints[field])}")
    if not parts:
        return "films"
    if "genre" not in constraints:
        parts.insert(0, "films")
    return " ".join(parts)


def _with_article(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def describe_film(movie: Movie, constraints: dict[str, list[str]], rng) -> str:
    """"Title (year), a drama directed by X, starring Y": the film's values that match the
    constraints always appear; one or two other facts are added for a natural answer."""
    head = f"{movie.title} ({movie.year})" if movie.year else movie.title
    genres = [g for g in movie.genres if g in constraints.get("genre", [])] or list(movie.genres[:1])
    bits = [_with_article(f"{genres[0].lower()} film")] if genres else ["a film"]
    for field, word in (("director", "directed by"), ("actor", "starring"), ("writer", "written by"),
                        ("language", "in")):
        matched = [v for v in movie.values(field) if v in constraints.get(field, [])]
        if matched:
            bits.append(f"{word} {' and '.join(matched)}")
        elif field in ("director", "actor") and movie.values(field) and rng.random() < 0.6:
            bits.append(f"{word} {movie.values(field)[0]}")
    return head + ", " + ", ".join([" ".join(bits[:2])] + bits[2:])


FOCUSED = ("Try {film}.", "I'd suggest {film}.", "{film_cap} could be a good fit.",
           "You could watch {film}.")


def latest_constraint(constraints: dict[str, list[str]], stated_at: dict[str, int]) -> dict:
    """The most recently stated constraint only (ties: FIELDS order), the one reason given."""
    if not constraints:
        return {}
    field = max(constraints, key=lambda f: (stated_at.get(f, 0), -FIELDS.index(f)))
    return {field: constraints[field]}


def focused_answer(films: list[Movie], reason: dict[str, list[str]], rng) -> str:
    """The template recommender: names films, each with the fact that links it to the user's
    latest request plus one or two other facts; it does not restate the constraints."""
    if not films:
        return "I'm sorry, I have nothing in my catalog for that. Could you tell me more?"
    parts = []
    for k, movie in enumerate(films):
        desc = describe_film(movie, reason, rng)
        pool = FOCUSED if k == 0 else SECONDS
        parts.append(rng.choice(pool).format(film=desc, film_cap=desc[:1].upper() + desc[1:]))
    return " ".join(parts)


def template_answer(films: list[Movie], constraints: dict[str, list[str]], relaxed: list[str],
                    relaxed_values: list[str], rng) -> str:
    if not films:
        return "I'm sorry, I have nothing in my catalog for that. Could you tell me more?"
    text = RELAXED.format(values=" and ".join(relaxed_values)) if relaxed else ""
    first = describe_film(films[0], constraints, rng)
    if constraints:
        opener = rng.choice(OPENERS)
        text += opener.format(matched=_constraint_phrase(constraints), film=first,
                              film_cap=first[:1].upper() + first[1:])
    else:
        text += rng.choice(OPEN_ENDED).format(film=first)
    for movie in films[1:]:
        desc = describe_film(movie, constraints, rng)
        text += " " + rng.choice(SECONDS).format(film=desc, film_cap=desc[:1].upper() + desc[1:])
    return text


# --- LLM answers ---------------------------------------------------------------------------

def _candidate_facts(m: Movie) -> str:
    return "; ".join([f"genres: {', '.join(m.genres) or 'n/a'}",
                      f"director: {', '.join(m.directors[:2]) or 'n/a'}",
                      f"starring: {', '.join(m.actors[:3]) or 'n/a'}"])


def candidates_block(films: list[Movie]) -> str:
    lines = []
    for i, m in enumerate(films, 1):
        year = f" ({m.year})" if m.year else ""
        lines.append(f"{i}. {m.title}{year}. {_candidate_facts(m)}. Plot: {m.plot}")
    return "\n".join(lines)


def prompt_lines(prompt_template: str, films: list[Movie], block: str | None = None) -> list[str]:
    """What the CRS prompt says that no reply should repeat verbatim: the instruction lines of the
    template, each candidate line, and each candidate's fact list ("genres: ...; director: ...;
    starring: ..."), which is prompt syntax. Never the history: the user's words (and earlier
    replies) may well be quoted by a good answer."""
    return [prompt_template, candidates_block(films) if block is None else block,
            *(_candidate_facts(m) for m in films)]


MAX_REPLY_CHARS = 2000  # the prompt asks for 1-3 sentences: a longer answer is a runaway generation


def llm_answer(model, prompt_template: str, films: list[Movie], history: list[tuple[str, str]],
               n_history: int) -> tuple[str, dict]:
    """Generate with the CRS model. Every answer passes ``convsim.providers.answer_check``: not
    empty, decodable text without control characters, within length bounds, no repeat of its prompt
    (an instruction line, a candidate line or a candidate's fact list, >= 20 chars). A failing
    answer is asked again (``retry.answer_attempts``), then flagged as a generation failure with
    the raw answer(s) and ``reason``; the caller says the template answer instead (``fallback``),
    so garbage or an echo (which restates the candidates' concepts) is never scored as a turn."""
    recent = "\n".join(f"{s.upper()}: {t}" for s, t in history[-n_history:])
    block = candidates_block(films)
    prompt = prompt_template.format(history=recent, candidates=block)
    # one check for every model answer (convsim.providers.answer_check): bytes, controls, nothing,
    # an echo of the prompt or a runaway length are no reply; re-asked as configured, then failed
    # English, with the words of the shipped data and prompts and of this prompt (its candidates)
    answer = checked_invoke(model, [("user", prompt)], purpose="respond", max_chars=MAX_REPLY_CHARS,
                            prompt_texts=prompt_lines(prompt_template, films, block),  # the block built once
                            language="en", vocabulary=node_vocabulary())
    if answer.ok:
        return answer.text, {"ok": True, "raw": answer.raw, "reason": None,
                             **({"failed_raws": answer.raws} if answer.raws else {})}
    # the failed answer is never the system's turn: the template says it (what model none would
    # say), and the session is an agent failure with every raw answer kept (agent_checks)
    return answer.text, {**answer.as_record(), "fallback": "template"}


# --- one turn ------------------------------------------------------------------------------

def crs_turn(state: dict, *, user_text: str, user_concepts, history_concepts, turn: int, seed: int,
             catalog: MovieCatalog, extractor, params: CRSParams, model=None,
             prompt_template: str | None = None, history: list[tuple[str, str]] | None = None,
             oracle_view: dict | None = None) -> tuple[str, dict, dict]:
    """One CRS turn -> (answer, next state, crs_meta). ``params.agent`` selects the template
    recommender (or the LLM when ``model`` is set) or a reference (agents/crs/references.py);
    ``oracle_view`` (the user's latent taste, constraints and focus) is read by ``oracle`` only."""
    state = update_constraints(state, user_text, user_concepts, turn)
    update = state.pop("update")
    ranked, relaxed, n_candidates = retrieve(
        catalog, state, history_concepts, params.n_mention,
        limit=max(params.top_k, params.n_mention, params.n_prompt_candidates))
    constraints = state["constraints"]
    active = {f: v for f, v in constraints.items() if f not in relaxed}
    relaxed_values = [v for f in relaxed for v in constraints[f]]
    generation, named, ranked_ids = None, None, [m.id for m in ranked]
    agent = params.agent
    rng = rng_for(seed, turn, "crs_template")
    if agent == "echo":
        text, named, ranked_ids = echo_reply(user_concepts), [], []
    elif agent == "parrot":  # the user's words back; the films it names (the user's) are scanned below
        text, ranked_ids = user_text, []
    elif agent == "echo_plus_fixed_film":
        text, named, ranked_ids = echo_plus_fixed_film_reply(user_concepts, catalog)
    elif agent == "restate_titles":
        text, named, ranked_ids = restate_titles_reply(user_concepts, ranked[:params.n_mention])
    elif agent == "paraphrase":
        text, named, ranked_ids = paraphrase_reply(user_concepts, catalog, seed=seed, turn=turn)
    elif agent == "random":
        text, named, ranked_ids = random_reply(catalog, seed=seed, turn=turn,
                                               n_mention=params.n_mention, top_k=params.top_k)
    elif agent == "titles_only":
        text, named, _ = titles_only_reply(ranked[:params.n_mention])
    elif agent == "oracle":
        view = oracle_view or {}
        taste, wanted = utility(catalog, view.get("liked", [])), view.get("constraints", {})
        # names the best films not yet shown; logs its list by taste alone (shown or not)
        fresh = oracle_ranking(catalog, taste, wanted, set(state["shown"]))
        ranked_ids = oracle_ranking(catalog, taste, wanted, set())
        # the best films not yet shown that satisfy the constraints; when none is left, one film only:
        # the best that satisfies them (shown before), else the best not shown (no padding with repeats)
        fits, shown = ({m.id for m in catalog.search(wanted)} if wanted else set()), set(state["shown"])
        picks = [i for i in fresh if i in fits and i not in shown][:params.n_mention] \
            or [i for i in fresh if i in fits][:1] or fresh[:1]
        films = [catalog.by_id[i] for i in picks]
        focus = view.get("focus")
        text = focused_answer(films, {focus[0]: [focus[1]]} if focus else {}, rng)
        named = [m.id for m in films]
    elif agent == "restating":
        text = template_answer(ranked[:params.n_mention], active, relaxed, relaxed_values, rng)
        named = [m.id for m in ranked[:params.n_mention]]  # known exactly (the title scan misses "Up")
    elif model is None or model.is_none:
        text = focused_answer(ranked[:params.n_mention],
                              latest_constraint(active, state["stated_at"]), rng)
        named = [m.id for m in ranked[:params.n_mention]]
    else:
        films = ranked[:params.n_prompt_candidates]
        text, generation = llm_answer(model, prompt_template, films, history or [],
                                      params.history_turns)
        if generation.get("fallback") == "template":  # a failed answer (an echo of the prompt):
            # the template says the turn, exactly what model none would say
            text = focused_answer(ranked[:params.n_mention],
                                  latest_constraint(active, state["stated_at"]), rng)
    if named is None:
        ids, candidates = extractor.titles_and_candidates(text)  # one scan of the answer
        mentioned = [i for i in ids if i in catalog.by_id]
        # a title-like span the catalog cannot resolve is a recommendation outside the catalog
        off_catalog = [t for t in candidates if not _resolves(extractor, t)]
    else:  # a reference names catalog films it knows
        mentioned, off_catalog = list(named), []
    # the logged ranking: what the answer named first, then the remaining candidates
    rec_ids = list(dict.fromkeys(mentioned + ranked_ids[:params.top_k]))[:params.top_k]
    if agent == "oracle":
        rec_ids = oracle_log(ranked_ids, mentioned, params.top_k)
    state = dict(state, shown=list(dict.fromkeys(state["shown"] + mentioned)))
    meta = {"constraints": constraints, "relaxed": relaxed, "update": update,
            "n_candidates": n_candidates, "rec_ids": rec_ids, "mentioned_ids": mentioned,
            "off_catalog_titles": off_catalog, "generation": generation}
    return text, state, meta


def oracle_log(by_taste: list[str], named: list[str], top_k: int) -> list[str]:
    """The oracle's logged list: its ranking by taste, best first, with the films it named this turn
    kept in the list (last, in the places of the lowest-ranked). Its named films are the best *not
    yet shown*, by the last turn its ~40th best: logged first (as other agents log theirs) they
    pushed every target off the top, and recall_at_1 was 0 in every session."""
    extra = [i for i in dict.fromkeys(named) if i not in by_taste[:top_k]][:top_k]
    return by_taste[:top_k - len(extra)] + extra


_TRAILING_YEAR = re.compile(r"\s*\(?\s*\d{4}\s*\)?\s*$")


def off_catalog_titles(extractor, text: str) -> list[str]:
    """Title-like spans of ``text`` that name no catalog film (also used for imported transcripts)."""
    return [t for t in extractor.candidate_titles(text) if not _resolves(extractor, t)]


def _resolves(extractor, span: str) -> bool:
    """Whether a title-like span names a catalog film, also without a trailing "(1999)"
    that a title-case heuristic may have swallowed ("Up (2009")."""
    return any(extractor.resolve_title(s) is not None
               for s in {span, _TRAILING_YEAR.sub("", span)} if s)
