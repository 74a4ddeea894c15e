"""Grounded Topic Adaptation Score (TAS) and its diagnostics, as pure functions.

Definitions: docs/crs_shift.md (TAS, shift recovery, segments); exact
definitions and the original's defects: ../shared/reference/crs.md §1.3.

A *concept* is a hashable catalog-grounded pair ``(field, value)``; a concept set is any iterable
of them. Turns are 1-based; per-turn sequences are indexed ``turn - 1``.

Conventions (docs/crs_shift.md, "Conventions"):

- ∅/∅: when neither the user nor the system utterance holds a concept, CC and CR are ``None``
  ("not applicable") and the turn is left out of every mean. The original returned 1.0, which
  rewards a system for saying nothing grounded to a user who said nothing grounded.
- One side empty: CC = 0 and CR = 0 (a real, measured disagreement).
- Copy penalty: ``None`` when the system utterance has no word 3-gram (nothing could be copied);
  ``tas_turn`` then subtracts nothing. The original returned 0 for an empty system text.
- Recovery: a shift is recovered if some d in [0, W-1] satisfies the rule at turn s+d (d = 0 is
  the shift turn); turns past the end of the dialogue or with CC ``None`` do not recover.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence, Set

Concept = Hashable
IdfLike = Callable[[str, str], float] | Mapping

# [A-Za-z0-9]+('[A-Za-z0-9]+)? with possessive quantifiers: the same tokens (a run of letters and
# digits never gives back a character to what follows it here), found without backtracking states
_TOKEN = re.compile(r"[A-Za-z0-9]++(?:'[A-Za-z0-9]++)?+")
RECOVERY_RULES = ("cc", "original")


def _as_set(concepts: Iterable[Concept] | None, name: str, turn: int | None = None) -> Set:
    """``concepts`` as a frozenset (a set or frozenset given is returned as it is: the callers only
    read it); ``name`` (and ``turn``, ``"<name> turn <turn>"``) names them in
    the error raised for None or a string."""
    if type(concepts) is frozenset or type(concepts) is set:  # already a set: read as it is, not copied
        return concepts
    if concepts is None or isinstance(concepts, (str, bytes)):
        if turn is not None:
            name = f"{name} turn {turn}"
        if concepts is None:
            raise ValueError(f"{name}: expected an iterable of concepts, got None")
        raise ValueError(f"{name}: expected an iterable of concepts, got a string {concepts!r}")
    return frozenset(concepts)


def _idf_of(idf: IdfLike, concept: Concept) -> float:
    if callable(idf):
        field, value = concept
        weight = idf(field, value)
    else:
        if concept not in idf:
            raise ValueError(f"idf: no weight for concept {concept!r}")
        weight = idf[concept]
    if type(weight) is float and 0.0 <= weight < math.inf:  # the usual case, checked at once (NaN fails it)
        return weight
    if not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise ValueError(f"idf: weight of {concept!r} must be a finite number >= 0, got {weight!r}")
    return float(weight)


def _weigh(idf: IdfLike, concepts: Iterable[Concept], weights: dict) -> dict:
    """Puts ``_idf_of(idf, c)`` in ``weights`` for each concept not yet in it; returns ``weights``.
    A callable's usual answer, a finite float >= 0, is taken here without a call of ``_idf_of``
    (a dialogue weighs a few hundred concepts); any other answer goes through it, which asks
    again and converts or rejects it."""
    if not callable(idf):
        for c in concepts:
            if c not in weights:
                weights[c] = _idf_of(idf, c)
        return weights
    for c in concepts:
        if c not in weights:
            field, value = c
            w = idf(field, value)
            weights[c] = w if type(w) is float and 0.0 <= w < math.inf else _idf_of(idf, c)
    return weights


def cross_coherence(u_concepts: Iterable[Concept], s_concepts: Iterable[Concept]) -> float | None:
    """Cross-coherence CC(t) = |E(U) ∩ E(S)| / |E(U) ∪ E(S)| (Jaccard).

    Returns ``None`` when both sets are empty (not applicable; the original returned 1.0), and 0.0
    when exactly one is empty.
    """
    return jaccard(_as_set(u_concepts, "u_concepts"), _as_set(s_concepts, "s_concepts"))


def weighted_cosine(u_counts: Mapping[Concept, float], s_counts: Mapping[Concept, float],
                    idf: IdfLike) -> float | None:
    """cos(φ(U), φ(S)) with φ(x)_c = count_x(c) · idf(c).

    The turn-level CR uses binary counts; segment CR sums the binary vectors of its turns.
    Returns ``None`` when both vectors are empty, 0.0 when one has zero norm.
    """
    return _weighted_cosine(u_counts, s_counts, idf, {})


def _weighted_cosine(u_counts: Mapping[Concept, float], s_counts: Mapping[Concept, float],
                     idf: IdfLike, weights: dict) -> float | None:
    """:func:`weighted_cosine`; ``weights``: a dict concept -> validated idf weight that this call
    reads and fills (the segments of a dialogue weigh the same concepts again)."""
    if not u_counts and not s_counts:
        return None
    _weigh(idf, itertools.chain(u_counts, s_counts), weights)
    u_vec = {c: float(n) * weights[c] for c, n in u_counts.items()}
    s_vec = {c: float(n) * weights[c] for c, n in s_counts.items()}
    # math.fsum is exactly rounded, so the result does not depend on set iteration order
    # (which changes with PYTHONHASHSEED): identical runs give bit-identical results.
    u_norm = math.sqrt(math.fsum([x * x for x in u_vec.values()]))
    s_norm = math.sqrt(math.fsum([x * x for x in s_vec.values()]))
    if u_norm == 0.0 or s_norm == 0.0:
        return 0.0
    dot = math.fsum([x * s_vec[c] for c, x in u_vec.items() if c in s_vec])
    return dot / (u_norm * s_norm)


def context_retention(u_concepts: Iterable[Concept], s_concepts: Iterable[Concept],
                      idf: IdfLike) -> float | None:
    """Context retention CR(t) = φ(U)·φ(S) / (‖φ(U)‖ ‖φ(S)‖).

    φ(x) is the binary concept-indicator vector of E(x) times smooth IDF,
    idf(f, v) = ln((1+N)/(1+df(f, v))) + 1 over the catalog (crs.md §1.3). ``idf`` is a callable
    ``(field, value) -> weight`` (e.g. ``MovieCatalog.idf``) or a mapping concept -> weight.
    Returns ``None`` for ∅/∅ and 0.0 when exactly one side is empty.
    """
    u, s = _as_set(u_concepts, "u_concepts"), _as_set(s_concepts, "s_concepts")
    return binary_cosine(u, s, idf)


def binary_cosine(u: Set, s: Set, idf: IdfLike, weights: dict | None = None) -> float | None:
    """:func:`weighted_cosine` of the binary vectors of two concept *sets* (what
    :func:`context_retention` computes once its inputs are sets), bit-identical to it: a binary
    entry is ``1.0 * idf(c)``, i.e. ``idf(c)`` exactly, and ``math.fsum`` is exactly rounded, so
    summing the same squares over the sets directly, in any order, gives the same float.
    ``weights``: a dict concept -> ``idf(c)`` (validated, :func:`_weigh`) that this call reads and
    fills, for a caller weighing the same concepts several times (a turn: its reply and the echo
    reference against the same user concepts).
    """
    if not u and not s:
        return None
    w = _weigh(idf, itertools.chain(u, s), {} if weights is None else weights)
    u_norm = math.sqrt(math.fsum([w[c] * w[c] for c in u]))
    s_norm = math.sqrt(math.fsum([w[c] * w[c] for c in s]))
    if u_norm == 0.0 or s_norm == 0.0:
        return 0.0
    return math.fsum([w[c] * w[c] for c in u & s]) / (u_norm * s_norm)


def binary_cosines(u: Set, others: Sequence[Set], idf: IdfLike) -> list[float | None]:
    """:func:`binary_cosine` of ``u`` and each set of ``others``, each concept weighed once (a turn:
    its reply and the echo reference against the same user concepts)."""
    weights: dict = {}
    return [binary_cosine(u, s, idf, weights) for s in others]


def jaccard(u: Set, s: Set) -> float | None:
    """:func:`cross_coherence` of two concept *sets*."""
    shared = len(u & s)
    union = len(u) + len(s) - shared  # |u ∪ s|, without building it
    if not union:
        return None
    return shared / union


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, regex ``[A-Za-z0-9]+('[A-Za-z0-9]+)?`` (crs.md §1.3)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    if text.isascii():  # lower() maps A-Z to a-z only, and the pattern then finds the same tokens
        return _TOKEN.findall(text.lower())
    # lower() could turn a non-ASCII letter into an ASCII one (KELVIN SIGN -> "k"): the tokens
    # first, ASCII and holding no space, then one lower() and split() over them all, in C
    return " ".join(_TOKEN.findall(text)).lower().split()


def word_ngrams(text: str, n: int) -> frozenset[tuple[str, ...]]:
    """The set G_n(x) of word n-grams of ``text``."""
    return _ngrams(tokens(text), n)


def _ngrams(toks: Sequence[str], n: int) -> frozenset[tuple[str, ...]]:
    return frozenset(_ngram_iter(toks, n))


def _ngram_iter(toks: Sequence[str], n: int) -> Iterator[tuple[str, ...]]:
    """The n-grams (t_i, ..., t_i+n-1) of ``toks`` in order, built in C (the copy penalty's 3 and
    4 spelled out: a third faster)."""
    if n == 3:
        return zip(toks, toks[1:], toks[2:])
    if n == 4:
        return zip(toks, toks[1:], toks[2:], toks[3:])
    return zip(*[toks[i:] for i in range(n)])


def copy_penalty(user_text: str, system_text: str, ns: Sequence[int] = (3, 4)) -> float | None:
    """Copy penalty I(t) = max_{n∈{3,4}} |G_n(S) ∩ G_n(U)| / |G_n(S)|.

    G_n are *sets* of lower-cased word n-grams. An n for which S has no n-gram is skipped;
    returns ``None`` when S has no n-gram for any n (too short to copy anything).
    """
    return copy_share(tokens(user_text), tokens(system_text), ns)  # each text tokenised once


def copy_share(u_toks: Sequence[str], s_toks: Sequence[str], ns: Sequence[int] = (3, 4),
               u_grams: dict | None = None) -> float | None:
    """:func:`copy_penalty` of two texts' :func:`tokens`. ``u_grams``: a dict n -> G_n(U) that
    this call reads and fills, for a caller scoring several replies against one user turn.

    Once S and U share no n-gram, they share no longer one either (each m-gram, m > n, holds an
    n-gram): the ratio of every larger m is 0 without building its n-grams, which is what most
    replies (copying nothing) need.
    """
    if u_grams is None:
        u_grams = {}
    ratios = []
    disjoint_from = None  # the smallest n found sharing no n-gram
    for n in ns:
        if not 1 <= n <= len(s_toks):  # S has no n-gram
            continue
        if disjoint_from is not None and n >= disjoint_from:
            ratios.append(0.0)  # S has n-grams, none of them U's
            continue
        if n not in u_grams:
            u_grams[n] = _ngrams(u_toks, n)
        if u_grams[n].isdisjoint(_ngram_iter(s_toks, n)):  # 0 / |G_n(S)|, G_n(S) not built
            disjoint_from = n
            ratios.append(0.0)
            continue
        s_grams = _ngrams(s_toks, n)
        ratios.append(len(s_grams & u_grams[n]) / len(s_grams))
    return max(ratios) if ratios else None


def tas_turn(cc: float | None, cr: float | None, i: float | None, *, alpha: float = 1.0,
             beta: float = 1.0, gamma: float = 1.0) -> float | None:
    """TAS(t) = clip(α·CC(t) + β·CR(t) − γ·I(t), −1, 1).

    Returns ``None`` when CC or CR is ``None`` (∅/∅ turn). A ``None`` copy penalty (system text
    without a 3-gram) contributes nothing.
    """
    if cc is None or cr is None:
        return None
    raw = alpha * cc + beta * cr - gamma * (i if i is not None else 0.0)
    return max(-1.0, min(1.0, raw))


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not ``None``; ``None`` when there are none."""
    kept = [v for v in values if v is not None]
    return math.fsum(kept) / len(kept) if kept else None


def dialogue_tas(tas_by_turn: Sequence[float | None]) -> float | None:
    """Dialogue TAS = mean over turns of TAS(t).

    ``None`` turns (∅/∅) are excluded; ``None`` when no turn is applicable.
    """
    return mean_or_none(tas_by_turn)


def segments(shift_turns: Iterable[int], n_turns: int) -> list[tuple[int, int]]:
    """Segments [a, b] (inclusive, 1-based) bounded by [1] + shift turns.

    A shift at turn 1 opens the first segment; duplicate shift turns count once.
    """
    if not isinstance(n_turns, int) or n_turns < 1:
        raise ValueError(f"n_turns must be a positive integer, got {n_turns!r}")
    starts = {1}
    for s in shift_turns:
        if not isinstance(s, int) or not 1 <= s <= n_turns:
            raise ValueError(f"shift turn {s!r} is outside the dialogue's turns 1..{n_turns}")
        starts.add(s)
    ordered = sorted(starts)
    ends = [s - 1 for s in ordered[1:]] + [n_turns]
    return list(zip(ordered, ends))


def segment_scores(segment_bounds: Sequence[tuple[int, int]],
                   u_concepts_by_turn: Sequence[Iterable[Concept]],
                   s_concepts_by_turn: Sequence[Iterable[Concept]], idf: IdfLike, *,
                   penalties_by_turn: Sequence[float | None] | None = None, alpha: float = 1.0,
                   beta: float = 1.0, gamma: float = 1.0) -> list[dict]:
    """Segment-level CC, CR, I and TAS (crs.md §1.3 "Segments").

    For segment [a, b]: CC = Jaccard(∪_t E(U_t), ∪_t E(S_t)); CR = cos of the summed binary×IDF
    vectors Σ_t φ(U_t), Σ_t φ(S_t); I = mean of the turns' non-None penalties; TAS clipped as
    ``tas_turn``. Each row: ``{"start", "end", "cc", "cr", "copy_penalty", "tas"}``.
    """
    if len(u_concepts_by_turn) != len(s_concepts_by_turn):
        raise ValueError("u_concepts_by_turn and s_concepts_by_turn differ in length")
    rows, weights = [], {}  # weights: idf of each concept, looked up once for all segments
    for a, b in segment_bounds:
        if not 1 <= a <= b <= len(u_concepts_by_turn):
            raise ValueError(f"segment [{a}, {b}] is outside turns 1..{len(u_concepts_by_turn)}")
        u_counts: dict = {}  # concept -> turns of the segment holding it (each turn's concepts a set)
        s_counts: dict = {}
        for t in range(a, b + 1):
            for c in _as_set(u_concepts_by_turn[t - 1], "u_concepts", t):
                u_counts[c] = u_counts.get(c, 0) + 1
            for c in _as_set(s_concepts_by_turn[t - 1], "s_concepts", t):
                s_counts[c] = s_counts.get(c, 0) + 1
        cc = jaccard(u_counts.keys(), s_counts.keys())  # (each a set of distinct concepts)
        cr = _weighted_cosine(u_counts, s_counts, idf, weights)
        pen = mean_or_none(penalties_by_turn[a - 1:b]) if penalties_by_turn is not None else None
        rows.append({"start": a, "end": b, "cc": cc, "cr": cr, "copy_penalty": pen,
                     "tas": tas_turn(cc, cr, pen, alpha=alpha, beta=beta, gamma=gamma)})
    return rows


def recovery(shift_turns: Iterable[int], cc_by_turn: Sequence[float | None],
             cr_by_turn: Sequence[float | None], *, window: int = 3, tau: float = 0.65,
             rule: str = "cc", cc_floor: float = 0.35) -> dict:
    """Shift recovery rate and delay (crs.md §1.3 "Recovery").

    Shift s is recovered if ∃ d ∈ [0, W−1] with s+d ≤ T such that
    rule ``"cc"`` (the spec): CC(s+d) ≥ τ; rule ``"original"`` (the original code):
    CC(s+d) ≥ ``cc_floor`` (0.35) or CR(s+d) ≥ τ. The delay is the smallest such d.
    recovery_rate = recovered / |shifts| (``None`` when there are no shifts);
    avg_delay = mean delay over recovered shifts (``None`` when none recovered).
    Returns ``{"recovery_rate", "avg_delay", "n_shifts", "n_recovered", "shifts": [{"turn",
    "recovered", "delay"}]}``.
    """
    if rule not in RECOVERY_RULES:
        raise ValueError(f"unknown recovery rule {rule!r}; expected one of {RECOVERY_RULES}")
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    if len(cc_by_turn) != len(cr_by_turn):
        raise ValueError("cc_by_turn and cr_by_turn differ in length")
    n_turns = len(cc_by_turn)

    def aligned(t: int) -> bool:
        cc, cr = cc_by_turn[t - 1], cr_by_turn[t - 1]
        if rule == "cc":
            return cc is not None and cc >= tau
        return (cc is not None and cc >= cc_floor) or (cr is not None and cr >= tau)

    details = []
    for s in sorted(set(shift_turns)):
        if not isinstance(s, int) or not 1 <= s <= n_turns:
            raise ValueError(f"shift turn {s!r} is outside the dialogue's turns 1..{n_turns}")
        delay = next((d for d in range(window) if s + d <= n_turns and aligned(s + d)), None)
        details.append({"turn": s, "recovered": delay is not None, "delay": delay})
    recovered = [d["delay"] for d in details if d["recovered"]]
    return {
        "recovery_rate": len(recovered) / len(details) if details else None,
        "avg_delay": sum(recovered) / len(recovered) if recovered else None,
        "n_shifts": len(details),
        "n_recovered": len(recovered),
        "shifts": details,
    }


def concept_gaps(u_concepts: Iterable[Concept], s_concepts: Iterable[Concept]) -> dict:
    """Missing = E(U) ∖ E(S) and hallucinated = E(S) ∖ E(U) concepts (crs.md §1.3), sorted lists."""
    u, s = _as_set(u_concepts, "u_concepts"), _as_set(s_concepts, "s_concepts")
    return {"missing": _sorted_by_repr(u - s), "hallucinated": _sorted_by_repr(s - u)}


def _sorted_by_repr(concepts: Set) -> list:
    """``sorted(concepts, key=repr)`` (no repr taken of a single concept)."""
    return sorted(concepts, key=repr) if len(concepts) > 1 else list(concepts)


def dst_scores(predicted: Iterable[Concept], gold: Iterable[Concept]) -> dict:
    """DST-style precision, recall, F1 and joint match of predicted concepts vs gold constraints
    (crs.md §1.3 "Other outputs"): P = |P∩G|/|P|, R = |P∩G|/|G|, F1 = 2PR/(P+R), joint = [P = G].

    P is ``None`` when nothing is predicted, R is ``None`` when the gold set is empty (the original
    set them to 1); F1 is ``None`` unless both are defined (0.0 when P + R = 0); joint is ``None``
    when both sets are empty.
    """
    p_set, g_set = _as_set(predicted, "predicted"), _as_set(gold, "gold")
    hit = len(p_set & g_set)
    precision = hit / len(p_set) if p_set else None
    recall = hit / len(g_set) if g_set else None
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    joint = None if not p_set and not g_set else float(p_set == g_set)
    return {"precision": precision, "recall": recall, "f1": f1, "joint": joint}
