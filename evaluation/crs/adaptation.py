"""Adaptation measured on the films recommended, not on words repeated (docs/crs_shift.md
"Adaptation metrics"). The CRS headline metrics.

Spec: the multi-model CRS experiment (a CRS must follow a preference shift) and crs.md §2.1 (Recall@K);
TAS (evaluation/crs/tas.py) is kept beside them, with its gameability stated: it scores the words a
reply shares with the user, so restating the user wins it. These metrics read only *which catalog
films* a system turn named (``meta.mentioned_ids``) and the films' catalog attributes, so no wording
moves them.

Notation, per session of T turns (system turn t answers user turn t):

* C_t: the user's gold constraints at turn t (``user_meta.constraints``, {field: value}), i.e. the
  simulator's current preference, the one a shift changed;
* named_t: the films system turn t named (with repeats and films the user named);
* N_t ⊆ named_t: the *new* films: not named by the user in turns ≤ t, not named by the system
  earlier in the same segment (since the last shift: a film that satisfies the new preference
  counts again after a shift, a film repeated inside a segment does not);
* F_t = {m ∈ N_t : m satisfies C_t}, "m satisfies C" iff for every (f, v) ∈ C, v ∈ m.f (catalog
  attributes, case-folded; every constraint, not one of them);
* A_t (turn t *adapts*) iff |F_t| ≥ 1 and |F_t| / |named_t| ≥ 1/2: a dump of 25 titles of which
  one happens to fit is no adaptation.

Metrics (each a dialogue metric; the engine reports its mean with a 95 % bootstrap CI):

* ``adapt_shift_rate`` = |{s ∈ S : ∃ t ∈ [s, s+W-1], A_t}| / |S| over the simulator's shift turns
  S (``user_meta.shift_event``; W = ``recovery_window``); None when S = ∅.
* ``adapt_delay`` = mean over adapted shifts of (min{t ∈ [s, s+W-1] : A_t} − s); None when none adapted.
* ``named_precision`` = Σ_t |F_t| / Σ_t |named_t|; None when no film was named.
* ``hit_rate`` = |{t < T : the user accepted a film of named_t in its turn t+1}| / (T − 1): the user's
  reaction (``user_meta.reaction.accepted``; logged also when the user is non-reactive, as the
  reaction it would have had); None when T < 2.
* ``turns_to_accept`` = min{t : a film of named_t was accepted}, and T when none was (censored at
  the last judged turn + 1 = T, so a session the user never accepted anything in counts as the slowest,
  not as missing: averaged over accepting sessions only, one lucky early accept of an agent that fails
  every other session beat one that succeeds everywhere a turn later); ``accepted_any`` = 1 if some
  film was accepted, else 0.
* ``target_recall_at_k`` = |top-K(last non-empty logged list) ∩ G_T| / |G_T| with G_T the user's
  hidden targets *valid at the end* (they follow the shifts, agents/crs/user.py); None without
  targets or without a logged list.

**Early end.** A satisfied user may end the session (``end_when_satisfied_prob``; its closing turn
has ``user_meta.end_session``): then T is the closing turn's number, every metric reads the
transcript up to that user turn, and the recommender's closing reply is left out. So the last system
turn counted is the one whose film the user accepted: it is judged (hit_rate over T − 1 turns, all
judged), ``turns_to_accept`` is that session's first accept (an ended session always has one, so the
censoring at T concerns only sessions that ran to ``n_turns``), and ``target_recall_at_k`` reads the
list the user accepted from, not the reply to its goodbye.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

ADAPT_MIN_PRECISION = 0.5  # a turn adapts when at least half the films it names fit


def satisfies(attributes: Callable[[str], Collection[str]] | None, constraints: Mapping) -> bool:
    """Whether a film satisfies every constraint: ``attributes(field)`` gives the film's values of a
    field (None: the film is not in the catalog, it satisfies nothing). An empty C is satisfied by
    any catalog film (an open request)."""
    if attributes is None:
        return False
    for field, value in constraints.items():
        if str(value).casefold() not in {str(v).casefold() for v in attributes(field)}:
            return False
    return True


def turn_adapts(n_fitting: int, n_named: int, min_precision: float = ADAPT_MIN_PRECISION) -> bool:
    """A_t: |F_t| ≥ 1 and |F_t| / |named_t| ≥ ``min_precision``."""
    return n_fitting >= 1 and n_named > 0 and n_fitting / n_named >= min_precision


def shift_adaptation(shift_turns: Sequence[int], adapted: Mapping[int, bool], window: int) -> dict:
    """Per shift s: adapted iff some t in s..s+W-1 has ``adapted[t]``; returns ``rate`` (None without
    shifts), ``delay`` (mean min t − s over adapted shifts, None when none) and the per-shift rows."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    rows = []
    for s in shift_turns:
        hit = next((t for t in range(s, s + window) if adapted.get(t)), None)
        rows.append({"turn": s, "adapted": hit is not None, "delay": None if hit is None else hit - s})
    delays = [r["delay"] for r in rows if r["adapted"]]
    return {"rate": sum(r["adapted"] for r in rows) / len(rows) if rows else None,
            "delay": sum(delays) / len(delays) if delays else None, "shifts": rows}


def named_precision(n_fitting: Sequence[int], n_named: Sequence[int]) -> float | None:
    """Σ |F_t| / Σ |named_t|; None when no film was named."""
    total = sum(n_named)
    return sum(n_fitting) / total if total else None


def acceptance(accepted_after: Sequence[bool], *, last_judged: bool = False) -> dict:
    """``accepted_after[t-1]``: whether the user accepted a film of named_t in turn t+1. The last
    turn has no next user turn and is not counted, unless ``last_judged`` (a session the user ended:
    its closing turn judged the last turn counted, the recommender's closing reply is not in the
    list). Returns hit_rate, turns_to_accept, accepted_any."""
    judged = list(accepted_after if last_judged else accepted_after[:-1])
    first = next((t for t, ok in enumerate(judged, start=1) if ok), None)
    return {"hit_rate": sum(map(bool, judged)) / len(judged) if judged else None,
            "turns_to_accept": None if not judged else (first if first is not None else len(judged) + 1),
            "accepted_any": None if not judged else int(first is not None)}


def target_recall(last_list: Sequence[str], targets: Collection[str], k: int) -> float | None:
    """|top-k(last_list) ∩ targets| / |targets|; None without targets or an empty list."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not targets or not last_list:
        return None
    return len(set(last_list[:k]) & set(targets)) / len(set(targets))


def _film_attributes(by_id: Mapping, film: str):
    movie = by_id.get(film)
    return None if movie is None else movie.values


def session_rows(transcript: Sequence[Mapping], by_id: Mapping) -> list[dict]:
    """One row per system turn: turn, named, new, fitting (F_t), adapts (A_t), accepted (the user's
    next turn accepted one of named_t). ``by_id``: the catalog's films by id (``Movie.values``)."""
    user_named: set[str] = set()
    system_before: set[str] = set()
    rows: list[dict] = []
    last_user: Mapping | None = None
    for entry in transcript:
        meta = entry.get("meta") or {}
        if entry.get("speaker") == "user":
            last_user = entry
            user_named.update(meta.get("mentioned_ids") or ())
            if meta.get("shift_event"):
                system_before = set()  # a new segment
            # the reaction the user had (reactive) or would have had (strict pairing: logged, not said)
            reaction = meta.get("would_react") or meta.get("reaction") or {}
            if rows and reaction.get("accepted") and reaction["accepted"] in rows[-1]["named"]:
                rows[-1]["accepted"] = True
            continue
        if last_user is None:
            continue
        named = [str(i) for i in meta.get("mentioned_ids") or ()]
        constraints = (last_user.get("meta") or {}).get("constraints") or {}
        new = [i for i in dict.fromkeys(named) if i not in user_named and i not in system_before]
        fitting = [i for i in new if satisfies(_film_attributes(by_id, i), constraints)]
        rows.append({"turn": entry.get("turn"), "named": named, "new": new, "fitting": fitting,
                     "adapts": turn_adapts(len(fitting), len(named)), "accepted": False})
        system_before.update(named)
    return rows


def logged_lists(transcript: Sequence[Mapping]) -> list[list[str]]:
    """Each system turn's logged ranked list (``meta.rec_ids``, else its named films)."""
    out = []
    for e in transcript:
        if e.get("speaker") != "user":
            meta = e.get("meta") or {}
            out.append([str(i) for i in (meta.get("rec_ids") or meta.get("mentioned_ids") or [])])
    return out


def adaptation_metrics(transcript: Sequence[Mapping], by_id: Mapping, targets: Collection[str], *,
                       window: int, k: int = 10) -> tuple[dict, dict]:
    """The adaptation metrics of one session (module docstring) and their per-shift details."""
    # a satisfied user that ended the session (``user_meta.end_session``): read up to its closing turn;
    # the recommender's reply to "thanks, bye" is no recommendation the user saw
    end = next((i for i, e in enumerate(transcript) if e.get("speaker") == "user"
                and (e.get("meta") or {}).get("end_session")), None)
    if end is not None:
        transcript = transcript[:end + 1]
    rows = session_rows(transcript, by_id)
    shifts = sorted(e["turn"] for e in transcript
                    if e.get("speaker") == "user" and (e.get("meta") or {}).get("shift_event"))
    n = len(rows)
    adapted = {r["turn"]: r["adapts"] for r in rows}
    shift = shift_adaptation([s for s in shifts if s <= (rows[-1]["turn"] if rows else 0)], adapted, window)
    lists = [lst for lst in logged_lists(transcript) if lst]
    metrics = {"adapt_shift_rate": shift["rate"], "adapt_delay": shift["delay"],
               "named_precision": named_precision([len(r["fitting"]) for r in rows],
                                                  [len(r["named"]) for r in rows]),
               **(acceptance([r["accepted"] for r in rows], last_judged=end is not None) if n else
                  {"hit_rate": None, "turns_to_accept": None, "accepted_any": None}),
               f"target_recall_at_{k}": target_recall(lists[-1], targets, k) if lists else None}
    return metrics, {"adaptation": {"window": window, "shifts": shift["shifts"]}}
