"""Turn and dialogue evaluation of the CRS preference-shift scenario (graphs/crs_shift.py).

The metric formulas are the pure functions of ``convsim.evaluation.crs.tas``; this module turns a session's
transcript into their inputs (grounded concept sets, gold constraints, shift turns) and their
outputs into turn metrics, dialogue metrics and dataset figures. See docs/crs_shift.md.

A *dialogue-metric contributor* is ``fn(state, settings) -> (metrics, details)``: ``metrics`` are
merged into ``dialogue_metrics`` (numbers, summarised by the engine with bootstrap CIs),
``details`` into ``dialogue_details`` (per-segment and per-shift rows). ``DIALOGUE_CONTRIBUTORS``
is the default list; a graph may append its own.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from convsim.catalog.movies.phrasing import echo_reply
from convsim.evaluation.reporting.records import scored
from convsim.evaluation.crs.health import HealthTally, health_metrics
from convsim.evaluation.crs.negation import NEGATIONS, affirmed_concepts, rejected
from convsim.evaluation.crs.near_copy import NEAR_COPY, content_words_of, near_copy_words
from convsim.evaluation.crs.tas import (
    binary_cosines, concept_gaps, copy_share, jaccard, dialogue_tas, dst_scores,
    mean_or_none, recovery, segment_scores, segments, tas_turn, tokens,
)


@dataclass(frozen=True)
class TASSettings:
    """The metric parameters of one session (from the graph's Params)."""
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    window: int = 3
    tau: float = 0.65
    rule: str = "cc"
    cc_floor: float = 0.35
    user_negation: str = "drop"  # E(U), E(S) without the values the turn retracts, E(U) without a turned-down film's attributes (evaluation/crs/negation.py); "keep": the original's
    # name (titles) and plot keywords as TAS concepts (evaluation/crs/excluded_fields.py); the spec's
    # default leaves them out. With it on, the idf must weigh them (ExcludedIdf).
    plot_name: bool = False


def failed_reply(entry: dict) -> bool:
    """Whether a system turn's model answer was invalid (empty, or a repeat of its prompt:
    ``meta.generation.ok`` is False; agents/crs/recommender.py)."""
    return entry.get("speaker") == "system" and ((entry.get("meta") or {}).get("generation") or {}).get("ok") is False


def scored_entry(entry: dict) -> dict:
    """The system turn as it is scored. A turn whose model answer was invalid is scored as a failed
    turn: an empty reply naming no film (CC = CR = 0, no recommendation, no concept), whatever the
    fallback said to keep the dialogue going (the template's text, kept in ``meta.said_text``): a
    failed LLM recommender never scores as the template baseline's success. Other turns unchanged."""
    if not failed_reply(entry):
        return entry
    meta = dict(entry.get("meta") or {}, mentioned_ids=[], rec_ids=[], off_catalog_titles=[],
                said_text=entry.get("text"), scored_as_failed=True)
    return {**entry, "text": "", "meta": meta}


def scored_transcript(transcript: list[dict]) -> list[dict]:
    """The transcript with each failed system turn replaced by its scored form (:func:`scored_entry`)."""
    return [scored_entry(e) for e in transcript]


def grounded_concepts(extractor, text: str) -> list[list[str]]:
    """E(x) as a sorted JSON-friendly list of [field, value] pairs."""
    return sorted([[f, str(v)] for f, v in extractor.extract(text)])


def _pairs(items) -> set[tuple[str, str]]:
    return {(f, v) for f, v in items}


def turn_evaluation(user: dict, system: dict, *, extractor, idf, settings: TASSettings,
                    user_concepts: list | None = None, earlier_named=()) -> tuple[dict, dict]:
    """Metrics and details of one turn from its user and system transcript entries.

    Returns (metrics, details): metrics are the turn's numbers (cc, cr, copy_penalty, tas, DST
    scores against the simulator's gold constraints, gap counts, off-catalog titles); details
    hold the concept sets the dialogue metrics need. ``earlier_named``: the films earlier system
    turns of the session named (a film named again is no new recommendation, see
    :func:`recommended_films`).
    """
    u = sorted(user_concepts) if user_concepts is not None else grounded_concepts(extractor, user["text"])
    s = grounded_concepts(extractor, system["text"])
    if settings.user_negation == "drop":  # a value a turn retracts ("I don't care about X anymore") is not in E(x)
        u, s = affirmed_concepts(user["text"], u), affirmed_concepts(system["text"], s)
        # nor the attributes of a film the user turns down ("that one is a comedy film and I asked
        # for drama": comedy is no user concept); E(U) only, a reply describing its film offers it
        u = [c for c in u if not rejected(user["text"], c[1])]
    elif settings.user_negation != "keep":
        raise ValueError(f"user_negation must be one of {NEGATIONS}, got {settings.user_negation!r}")
    s_catalog = s  # the DST scores compare the catalog fields with the gold, whatever TAS counts
    if settings.plot_name:  # the spec's excluded fields, counted when enabled (excluded_fields.py)
        from convsim.evaluation.crs.excluded_fields import excluded_concepts
        u = sorted({tuple(c) for c in u} | excluded_concepts(user["text"], user, extractor))
        s = sorted({tuple(c) for c in s} | excluded_concepts(system["text"], user, extractor))
        u, s = [list(c) for c in u], [list(c) for c in s]
    u_set, s_set = _pairs(u), _pairs(s)
    gold = sorted([f, str(v)] for f, v in user["meta"]["constraints"].items())
    # the formulas of convsim.evaluation.crs.tas, from what this turn computes once: each text's tokens
    # (copy penalty and near-copy), the user's n-grams (scored against the reply and the echo
    # reference), the user concepts' idf weights and norm (CR of the reply and of the echo reference)
    u_toks, s_toks = tokens(user["text"]), tokens(system["text"])
    u_grams: dict = {}  # n -> the user's n-grams, built when first needed
    echo_text = echo_reply(u_set)
    # the same few concepts, turn after turn: extracted once
    e_set = {(f, str(v)) for f, v in extractor.extract_recurring(echo_text)}
    cr, cr_echo = binary_cosines(u_set, (s_set, e_set), idf)
    cc = jaccard(u_set, s_set)
    pen = copy_share(u_toks, s_toks, u_grams=u_grams)
    gaps = concept_gaps(u_set, s_set)
    dst = dst_scores(_pairs(s_catalog) if settings.plot_name else s_set, _pairs(gold))
    crs_meta = system.get("meta", {})
    named = named_films(extractor, system)
    by_id = extractor.catalog.by_id if named else {}  # (an extractor without a catalog names none)
    user_named = _user_named_all(user["text"], named, by_id)  # each film checked once
    new_films = _recommended(by_id, user, named, earlier_named, user_named)
    copied = near_copy_words(content_words_of(u_toks), content_words_of(s_toks))
    # a reply naming a film of its own is no copy of the user, whatever its wording
    own_film = not all(user_named.values())
    echo = echo_turn(u_set, s_set, named_film=bool(new_films), near_copy=None if own_film else copied)
    # the films the reply names, but for the user's own (a film the user named that no earlier system
    # turn had named: the parrot's); a repeat of the system's own film still carries its values
    earlier_set = set(earlier_named)
    restated = restated_concepts(u_set, s_set, [by_id.get(i) for i in named
                                                if not user_named.get(i) or i in earlier_set])
    tas_echo = tas_turn(jaccard(u_set, e_set), cr_echo,
                        copy_share(u_toks, tokens(echo_text), u_grams=u_grams), alpha=settings.alpha,
                        beta=settings.beta, gamma=settings.gamma)
    metrics = {
        "turn": user["turn"], "cc": cc, "cr": cr, "copy_penalty": pen,
        "tas": tas_turn(cc, cr, pen, alpha=settings.alpha, beta=settings.beta, gamma=settings.gamma),
        "shift_event": bool(user["meta"].get("shift_event")),
        "n_user_concepts": len(u_set), "n_system_concepts": len(s_set),
        "n_missing": len(gaps["missing"]), "n_hallucinated": len(gaps["hallucinated"]),
        "dst_precision": dst["precision"], "dst_recall": dst["recall"], "dst_f1": dst["f1"],
        "dst_joint": dst["joint"],
        "n_recommended": len(crs_meta.get("mentioned_ids", [])),
        "off_catalog_titles": len(crs_meta.get("off_catalog_titles", [])),
        "echo": echo, "restate": int(bool(restated)), "n_restated": len(restated), "near_copy": copied, "tas_echo": tas_echo, "n_recommended_new": len(new_films),
    }
    details = {"turn": user["turn"], "user_concepts": u, "system_concepts": s, "gold": gold,
               "missing": [list(c) for c in gaps["missing"]],
               "hallucinated": [list(c) for c in gaps["hallucinated"]]}
    return metrics, details


ECHO_SHARE = 0.8
RESTATE_FLAG = 0.5  # a system restating in at least this share of its turns is flagged (validity.py)


def restated_concepts(u_set: set, s_set: set, films) -> set:
    """The concepts a reply repeats from the user turn that no film it names carries:
    {(f, v) ∈ E(S) ∩ E(U) : no film m of ``films`` has v among its values (any field, case-folded)}.
    ``films``: the catalog films the reply names that the user did not name itself (None for an
    unknown id). Detected on behaviour, whatever the wording ("Noted: you want X", "So you're after
    X"): a reply that says the user's values back without recommending a film that has them is
    restating; a recommendation ("Try Y, a drama with Z") says values its film carries. A turn
    restates when this set is non-empty; ``restate_turn_share`` is the share of such turns."""
    overlap = {(f, str(v)) for f, v in s_set & u_set}
    if not overlap:
        return set()
    carried = {str(v).casefold() for m in films if m is not None
               for field in ("genre", "actor", "director", "writer", "language", "year")
               for v in m.values(field)}
    return {(f, v) for f, v in overlap if v.casefold() not in carried}


def _fits_any(movie, constraints: dict) -> bool:
    """Whether a film has at least one of the user's gold constraint values (True when the user
    has none: any film answers an open request)."""
    return _fits(movie, _wanted(constraints))


def _wanted(constraints: dict) -> list[tuple[str, set[str]]]:
    """The user's gold constraints as (field, casefolded values) pairs, in order: what
    :func:`_fits` compares each named film with (built once per turn, not once per film)."""
    out = []
    for field, wanted in constraints.items():
        options = wanted if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
        out.append((field, {str(v).casefold() for v in options}))
    return out


def _fits(movie, wanted: list[tuple[str, set[str]]]) -> bool:
    """:func:`_fits_any` of ``_wanted(constraints)``; the film's fields read in the constraints'
    order, up to the first that fits."""
    if not wanted:
        return True
    for field, options in wanted:
        for v in movie.values(field):
            if str(v).casefold() in options:
                return True
    return False


def named_films(extractor, system: dict) -> list[str]:
    """The catalog films a system turn names: ``meta.mentioned_ids``, else the titles in its text."""
    return list((system.get("meta") or {}).get("mentioned_ids") or []) or extractor.extract_titles(system["text"])


def recommended_films(extractor, user: dict, system: dict, earlier_named=(), *, named=None) -> list[str]:
    """The films a system turn *recommends*: the catalog films it names (``meta.mentioned_ids``,
    else the titles found in its text) that are new, i.e. not named by the user turn it answers
    and not named by an earlier system turn of the session, and that fit at least one of the
    user's gold constraints (``user.meta.constraints``). A reply that repeats the user's own film
    (the parrot), or the same film every turn, or a film unrelated to the request
    (echo_plus_fixed_film) recommends nothing. ``named``: :func:`named_films`, when known."""
    named = named_films(extractor, system) if named is None else named
    if not named:
        return []
    by_id = extractor.catalog.by_id
    return _recommended(by_id, user, named, earlier_named, _user_named_all(user["text"], named, by_id))


def _recommended(by_id, user: dict, named: list[str], earlier_named, user_named: dict) -> list[str]:
    """:func:`recommended_films` given ``user_named``: film id -> :func:`_user_named` of it."""
    if not named:
        return []
    earlier, constraints = set(earlier_named), (user.get("meta") or {}).get("constraints") or {}
    wanted = _wanted(constraints)
    return [i for i in named if i not in earlier and not user_named[i]
            and (i not in by_id or _fits(by_id[i], wanted))]


def _user_named(text: str, movie, lowered: str | None = None) -> bool:
    """Whether the user's text names ``movie`` (its title on word boundaries, case-insensitive):
    a check of the few films the system named, not a second extractor scan of the user turn.
    ``lowered``: ``text.lower()`` when ``text`` is ASCII, else None (computed here if not given)."""
    if movie is None or not movie.title:
        return False
    title = movie.title
    if lowered is None and text.isascii():
        lowered = text.lower()
    # ASCII on both sides (the usual case), a match needs the lower-cased title inside the
    # lower-cased text: most films a reply names are not the user's, and are told so by one scan
    if lowered is not None and title.isascii() and title.lower() not in lowered:
        return False
    return _title_pattern(title).search(text) is not None


def _user_named_all(text: str, named: list[str], by_id) -> dict[str, bool]:
    """:func:`_user_named` of each film id of ``named`` (``by_id``: the catalog's films by id)."""
    if not named:
        return {}
    lowered = text.lower() if text.isascii() else None
    return {i: _user_named(text, by_id.get(i), lowered) for i in named}


@functools.lru_cache(maxsize=65536)
def _title_pattern(title: str) -> re.Pattern:
    """A title on word boundaries, case-insensitive, compiled once per title."""
    return re.compile(r"(?<!\w)" + re.escape(title) + r"(?!\w)", re.IGNORECASE)


def echo_turn(u_set: set, s_set: set, *, named_film: bool, near_copy: float | None = None) -> int:
    """1 when a system turn is an echo: it recommends no film (``named_film``: whether
    :func:`recommended_films` found one; a film the user named, one named before, or one unrelated
    to the user's constraints is not a recommendation) and it restates the request: either its
    concepts are non-empty and mostly (>= ECHO_SHARE) the user's own, or it is a *near-copy* of the
    user's words (``near_copy`` >= NEAR_COPY, ``convsim.evaluation.crs.near_copy``: words moved, inflected,
    padded) at least half of whose concept values are the user's (field aside: "writing of Ethan
    Coen" reads as the director Ethan Coen; a film's genre, year and cast are not the user's).
    :func:`turn_evaluation` passes ``near_copy=None`` for a reply that names a film the user's turn
    did not: naming a film of its own, it is no copy."""
    if named_film:
        return 0
    if s_set and len(s_set & u_set) / len(s_set) >= ECHO_SHARE:
        return 1
    if near_copy is None or not near_copy >= NEAR_COPY:  # (not "<": a NaN is no near-copy)
        return 0
    said, values = {str(v).casefold() for _, v in u_set}, {str(v).casefold() for _, v in s_set}
    return int(2 * len(values & said) >= len(values))


def shift_turns(transcript: list[dict]) -> list[int]:
    """The simulator's shift turns (user_meta.shift_event), the segmentation ground truth."""
    return sorted(e["turn"] for e in transcript
                  if e["speaker"] == "user" and e.get("meta", {}).get("shift_event"))


def _column(rows: list[dict], key: str) -> list:
    return [r.get(key) for r in _by_turn(rows)]


def _by_turn(rows: list[dict]) -> list[dict]:
    """``rows`` sorted by turn (a stable sort, as :func:`_column` reads them); for several columns
    of the same rows, sort once and read each column off the result."""
    return sorted(rows, key=_TURN)


_TURN = operator.itemgetter("turn")


# --- dialogue-metric contributors -----------------------------------------------------------

def grounded_tas(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    rows = state["turn_metrics"]
    ordered = _by_turn(rows)
    tas = [r.get("tas") for r in ordered]
    return ({"tas_grounded": dialogue_tas(tas), "cc_mean": mean_or_none([r.get("cc") for r in ordered]),
             "cr_mean": mean_or_none([r.get("cr") for r in ordered]),
             "copy_penalty_mean": mean_or_none([r.get("copy_penalty") for r in ordered]),
             "echo_turn_share": mean_or_none([r.get("echo") for r in ordered]),
             "restate_turn_share": mean_or_none([r.get("restate") for r in ordered]),
             "tas_echo_ceiling": dialogue_tas([r.get("tas_echo") for r in ordered]),
             "n_turns": len(rows), "n_turns_not_applicable": sum(t is None for t in tas)}, {})


def segment_alignment(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    details = _by_turn(state["turn_details"])
    n = len(details)
    if n == 0:
        return {"segment_cc_mean": None, "segment_cr_mean": None, "segment_tas_mean": None,
                "n_segments": 0}, {"segments": []}
    bounds = segments([t for t in shift_turns(state["transcript"]) if t <= n], n)
    rows = segment_scores(bounds, [_pairs(d["user_concepts"]) for d in details],
                          [_pairs(d["system_concepts"]) for d in details], idf,
                          penalties_by_turn=_column(state["turn_metrics"], "copy_penalty"),
                          alpha=settings.alpha, beta=settings.beta, gamma=settings.gamma)
    return ({"segment_cc_mean": mean_or_none(r["cc"] for r in rows),
             "segment_cr_mean": mean_or_none(r["cr"] for r in rows),
             "segment_tas_mean": mean_or_none(r["tas"] for r in rows), "n_segments": len(rows)},
            {"segments": rows})


def shift_recovery(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    rows = state["turn_metrics"]
    n = len(rows)
    ordered = _by_turn(rows)
    out = recovery([t for t in shift_turns(state["transcript"]) if t <= n], [r.get("cc") for r in ordered],
                   [r.get("cr") for r in ordered], window=settings.window, tau=settings.tau,
                   rule=settings.rule, cc_floor=settings.cc_floor)
    return ({"recovery_rate": out["recovery_rate"], "avg_recovery_delay": out["avg_delay"],
             "n_shifts": out["n_shifts"], "n_recovered": out["n_recovered"]},
            {"recovery": {"rule": settings.rule, "window": settings.window, "tau": settings.tau,
                          "shifts": out["shifts"]}})


def concept_accounting(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    rows = state["turn_metrics"]
    ordered = _by_turn(rows)
    recommended = off = missing = hallucinated = 0
    for r in rows:
        recommended += r["n_recommended"]
        off += r["off_catalog_titles"]
        missing += r["n_missing"]
        hallucinated += r["n_hallucinated"]
    crs_failures = user_fallbacks = 0  # LLM calls that failed: the recommender's, the user's paraphrase
    for e in state["transcript"]:
        if e["speaker"] == "system":
            crs_failures += (e["meta"].get("generation") or {}).get("ok") is False
        elif e["speaker"] == "user":
            user_fallbacks += (e["meta"].get("paraphrase") or {}).get("ok") is False
    return ({"missing_concepts_total": missing, "hallucinated_concepts_total": hallucinated,
             "dst_precision_mean": mean_or_none([r.get("dst_precision") for r in ordered]),
             "dst_recall_mean": mean_or_none([r.get("dst_recall") for r in ordered]),
             "dst_f1_mean": mean_or_none([r.get("dst_f1") for r in ordered]),
             "dst_joint_mean": mean_or_none([r.get("dst_joint") for r in ordered]),
             "recommended_titles_total": recommended, "off_catalog_titles_total": off,
             "off_catalog_rate": off / (off + recommended) if off + recommended else None,
             "crs_generation_failures": crs_failures, "user_paraphrase_fallbacks": user_fallbacks},
            {})


def simulator_health(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    return health_metrics(state.get("transcript") or []), {}


def simulator_judge_outcome(state: dict, settings: TASSettings, idf) -> tuple[dict, dict]:
    """Whether the LLM simulator check ran (graphs/crs_shift.py ``check_simulator``, the
    "simulator_judge" role): ``simulator_judge_failed`` 1 when its answer was unreadable (the check
    did not happen; it flags nothing, so the session stays ``ok``), else 0; ``simulator_judge_flags``
    the number of problems it found, ``None`` when it failed (unknown, not 0). Nothing without a
    simulator judge (``state["simulator_judge"]`` is None)."""
    verdict = state.get("simulator_judge")
    if not isinstance(verdict, dict):
        return {}, {}
    failed = bool(verdict.get("failed"))
    flags = verdict.get("flags")
    return ({"simulator_judge_failed": int(failed),
             "simulator_judge_flags": None if failed or flags is None else len(flags)}, {})


Contributor = Callable[[dict, TASSettings, object], tuple[dict, dict]]
DIALOGUE_CONTRIBUTORS: list[Contributor] = [grounded_tas, segment_alignment, shift_recovery,
                                            concept_accounting, simulator_health,
                                            simulator_judge_outcome]


def dialogue_evaluation(state: dict, settings: TASSettings, idf,
                        contributors: list[Contributor] | None = None) -> tuple[dict, dict]:
    metrics, details = {}, {}
    for contribute in contributors if contributors is not None else DIALOGUE_CONTRIBUTORS:
        m, d = contribute(state, settings, idf)
        metrics.update(m)
        details.update(d)
    return metrics, details


def pooled_dataset_metrics(records: list[dict]) -> dict:
    """Figures that are not means of dialogue metrics: recovery pooled over all shifts of all
    sessions (not a mean of per-session rates, which would weight sessions with few shifts
    up), total off-catalog titles, and counts of LLM failures."""
    # the small parts only: the records may be a RecordSet of 10,000s of sessions read from disk
    # on each pass (convsim.results.recordset), so none is held
    shifts, dm, health = [], [], HealthTally()
    for r in scored(records):  # one read of each record
        health.add(r)
        shifts += (r.get("dialogue_details") or {}).get("recovery", {}).get("shifts", [])
        metrics = r.get("dialogue_metrics") or {}
        dm.append({k: metrics[k] for k in POOLED_INPUTS if k in metrics})
    delays = [s["delay"] for s in shifts if s["recovered"]]
    off = sum(d.get("off_catalog_titles_total", 0) for d in dm)
    rec = sum(d.get("recommended_titles_total", 0) for d in dm)
    return {"sessions": len(dm), "shifts_total": len(shifts),
            "recovery_rate_pooled": len(delays) / len(shifts) if shifts else None,
            "avg_recovery_delay_pooled": sum(delays) / len(delays) if delays else None,
            "off_catalog_titles_total": off, "recommended_titles_total": rec,
            "off_catalog_rate_pooled": off / (off + rec) if off + rec else None,
            "crs_generation_failures_total": sum(d.get("crs_generation_failures", 0) for d in dm),
            "user_paraphrase_fallbacks_total": sum(d.get("user_paraphrase_fallbacks", 0) for d in dm),
            **simulator_judge_totals(dm), **health.result(), **gameable_note(dm)}


# the dialogue metrics the pooled figures read (kept per session; the rest of the record is not)
POOLED_INPUTS = ("off_catalog_titles_total", "recommended_titles_total", "crs_generation_failures",
                 "user_paraphrase_fallbacks", "tas_echo_ceiling", "echo_turn_share", "tas_grounded",
                 "simulator_judge_failed")


def simulator_judge_totals(dm: list[dict]) -> dict:
    """Of the scored sessions a simulator judge read, how many it could not check (its answer was
    unreadable): ``simulator_judge_failed_total`` of ``simulator_judge_sessions``; None without a
    simulator judge. A failed check flags nothing, so these sessions are scored as clean unless
    this count is read."""
    judged = [d["simulator_judge_failed"] for d in dm if d.get("simulator_judge_failed") is not None]
    return {"simulator_judge_sessions": len(judged),
            "simulator_judge_failed_total": sum(judged) if judged else None}


def gameable_note(dm: list[dict]) -> dict:
    """Where grounded TAS is gameable, stated beside the figures: the TAS that a reply restating
    the user's concepts and naming no film (the echo reference) gets on the same user turns."""
    ceiling = mean_or_none(d.get("tas_echo_ceiling") for d in dm)
    echo = mean_or_none(d.get("echo_turn_share") for d in dm)
    tas = mean_or_none(d.get("tas_grounded") for d in dm)
    if ceiling is None:
        return {"tas_echo_ceiling": None, "echo_turn_share": echo, "tas_gameable_note": None}
    note = (f"grounded TAS rewards restating the user's concepts: a reply that only restates them "
            f"and names no film scores {ceiling:.2f} on these user turns (this system: "
            f"{'n/a' if tas is None else f'{tas:.2f}'}, echo turns {0 if echo is None else echo:.0%}); "
            "read TAS beside echo_turn_share, recall_at_k and the echo/oracle references; recovery_rate "
            "(rule cc: CC >= tau) is reached by restating too, so a system that names films scores ~0 on it")
    return {"tas_echo_ceiling": ceiling, "echo_turn_share": echo, "tas_gameable_note": note}
