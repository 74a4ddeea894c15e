"""TAS/CAS, the five-component Topic/Context Adaptation Score of the multi-model CRS experiment.

Reported as ``tas_cas`` (and ``tas_cas_<component>``), beside the grounded TAS of the CRS-shift scenario
(``tas_grounded``). Exact legacy definitions: reference crs.md §1.4. What is fixed here:

* Jaccard(∅, ∅) is undefined (None), not 0: two topic-less turns are no evidence of a shift.
  With 0 the legacy detector fired on ~18.8 of 19 transitions.
* The detector compares a user turn with the running *segment* (topics and text since the last
  shift), not only with the previous turn; a turn without topics never opens a segment; the
  default rule needs both a lexical and a topical departure (``rule="and"``; the spec's
  ``"or"`` is available). The simulator's true shifts, when logged, drive the recovery
  components (``shift_source="simulator"``); the detector is then scored against them.
* Recovery is searched inside the new segment only (recovering after the user moved on again is
  not recovery; ``recovery_search="to_end"`` is the paper's search to the end of the dialogue,
  :func:`shift_outcomes_to_end`); no shifts gives None components, not trr = 0 and delay = 0 (which made
  rd_norm = 1 reward non-recovery); shifts with no recovery give rd_norm = 0.
* Interference has one definition (below) instead of hits / max(1, min(sys_seen, 4)).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

SIM_TOPIC_SHIFT = 0.55
TOPIC_JACCARD_SHIFT = 0.35
ALIGNMENT_THRESHOLD = 0.65
ALIGN_JACCARD_FALLBACK = 0.3
NON_RECOVERY_WINDOW = 4
# The weights of the spec's 1000-session run (crs.md §1.2): after normalisation CC ≈ 60 %, CR ≈ 30 %.
CAS_WEIGHTS = {"topic_recovery_rate": 0.01, "rd_norm": 0.02, "ti_norm": 0.02,
               "cross_coherence": 0.30, "context_retention": 0.15}

Sim = Callable[[str, str], float]


def jaccard(a: set | frozenset | Sequence, b: set | frozenset | Sequence) -> float | None:
    """|A ∩ B| / |A ∪ B|; None when both sets are empty (legacy returned 0; crs.md §1.4)."""
    a, b = set(a), set(b)
    if not a and not b:
        return None
    return len(a & b) / len(a | b)


def cross_coherence(pair_sims: Sequence[float]) -> float | None:
    """CC = (1/N) Σ_i sim(u_i, s_i) over the N user/system pairs. None when N = 0."""
    return sum(pair_sims) / len(pair_sims) if pair_sims else None


def context_retention(system_sims: Sequence[float]) -> float | None:
    """CR = (1/(M-1)) Σ_{i=2..M} sim(s_{i-1}, s_i), system-to-system consistency.

    ``system_sims`` holds the M-1 consecutive similarities; None when M < 2.
    """
    return sum(system_sims) / len(system_sims) if system_sims else None


def detect_shifts_legacy(user_texts: Sequence[str], user_topics: Sequence[set], *, sim: Sim,
                         sim_threshold: float = SIM_TOPIC_SHIFT,
                         jaccard_threshold: float = TOPIC_JACCARD_SHIFT) -> list[int]:
    """The original detector (crs.md §1.4), kept to show its degeneracy: turn i > 0 is a shift when
    sim(u_{i-1}, u_i) < SIM_TOPIC_SHIFT or jaccard(T_{i-1}, T_i) < TOPIC_JACCARD_SHIFT, with
    Jaccard(∅, ∅) = 0. Returns 0-based turn indices."""
    out = []
    for i in range(1, len(user_texts)):
        j = jaccard(user_topics[i - 1], user_topics[i])
        if sim(user_texts[i - 1], user_texts[i]) < sim_threshold or (j if j is not None else 0.0) < jaccard_threshold:
            out.append(i)
    return out


def detect_shifts(user_texts: Sequence[str], user_topics: Sequence[set], *, sim: Sim,
                  sim_threshold: float = SIM_TOPIC_SHIFT, jaccard_threshold: float = TOPIC_JACCARD_SHIFT,
                  rule: str = "and", segment_sim: Callable[[Sequence[int], int], float] | None = None,
                  compare: str = "segment") -> list[int]:
    """Shift detector. ``compare="consecutive"`` is the paper's: turn i > 0 is a shift when
    sim(u_{i-1}, u_i) < SIM_TOPIC_SHIFT and/or jaccard(T_{i-1}, T_i) < TOPIC_JACCARD_SHIFT (per
    ``rule``), Jaccard(∅, ∅) counting 0 as in the paper's code. ``compare="segment"`` (default):
    Segment-based. Turn i > 0 is a shift when its topics T_i are non-empty, the
    current segment has topics S (union of the segment's user topics), and
    ``rule="and"``: sim(segment, u_i) < SIM_TOPIC_SHIFT and jaccard(S, T_i) < TOPIC_JACCARD_SHIFT
    ``rule="or"``:  either of the two. A topic-less turn continues the segment. Returns 0-based indices.
    sim(segment, u_i) is ``segment_sim(segment_turn_indices, i)`` when given (e.g. cosine to the
    centroid of the segment's embeddings), else sim(joined segment text, u_i).
    """
    if rule not in ("and", "or"):
        raise ValueError(f"rule must be 'and' or 'or', got {rule!r}")
    if compare not in ("segment", "consecutive"):
        raise ValueError(f"compare must be 'segment' or 'consecutive', got {compare!r}")
    if compare == "consecutive":
        out = []
        for i in range(1, len(user_texts)):
            j = jaccard(user_topics[i - 1], user_topics[i])
            lexical = sim(user_texts[i - 1], user_texts[i]) < sim_threshold
            topical = (j if j is not None else 0.0) < jaccard_threshold
            if (lexical and topical) if rule == "and" else (lexical or topical):
                out.append(i)
        return out
    if segment_sim is None:
        def segment_sim(seg: Sequence[int], i: int) -> float:
            return sim(" ".join(user_texts[j] for j in seg), user_texts[i])
    shifts: list[int] = []
    seg_topics: set = set(user_topics[0]) if user_topics else set()
    seg_turns: list[int] = [0] if user_texts else []
    for i in range(1, len(user_texts)):
        topics = set(user_topics[i])
        if not topics:
            continue
        if seg_topics:
            lexical = segment_sim(seg_turns, i) < sim_threshold
            topical = (jaccard(seg_topics, topics) or 0.0) < jaccard_threshold
            if (lexical and topical) if rule == "and" else (lexical or topical):
                shifts.append(i)
                seg_topics, seg_turns = set(), []
        seg_topics |= topics
        seg_turns.append(i)
    return shifts


def shift_detection_scores(detected: Sequence[int], true: Sequence[int], *, tolerance: int = 0) -> dict:
    """Precision = matched / |detected|, recall = matched / |true|, F1; a detection matches one unmatched
    true shift within ±tolerance turns (greedy, nearest first). precision None when nothing was
    detected, recall None when there are no true shifts."""
    unmatched = sorted(set(true))
    matched = 0
    for d in sorted(set(detected)):
        near = [t for t in unmatched if abs(t - d) <= tolerance]
        if near:
            unmatched.remove(min(near, key=lambda t: abs(t - d)))
            matched += 1
    p = matched / len(set(detected)) if detected else None
    r = matched / len(set(true)) if true else None
    if p is None or r is None:
        f1 = None
    else:
        f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {"precision": p, "recall": r, "f1": f1, "n_detected": len(set(detected)), "n_true": len(set(true))}


def alignment(system_topics: set, target_topics: set, *, sim: Sim | None = None) -> float | None:
    """align = jaccard(sys, target); when it is below 0.3 and ``sim`` is given, sim(join(sys), join(target))
    (crs.md §1.4). None when either set is empty (no topics: no evidence either way)."""
    if not system_topics or not target_topics:
        return None
    j = jaccard(system_topics, target_topics)
    if j < ALIGN_JACCARD_FALLBACK and sim is not None:
        return max(j, sim(" ".join(sorted(system_topics)), " ".join(sorted(target_topics))))
    return j


def shift_outcomes(shifts: Sequence[int], user_topics: Sequence[set], system_topics: Sequence[set], *,
                   sim: Sim | None = None, threshold: float = ALIGNMENT_THRESHOLD) -> list[dict]:
    """Per shift at 0-based turn i (segments: [0] + shifts):

    * new topics N = ∪ user topics of the new segment [i, next shift); old topics O = ∪ user topics of
      the previous segment.
    * recovered at the first system turn t in the new segment with alignment(S_t, N) >= threshold;
      delay = t - i + 1 (the shift turn's own reply has delay 1). None when not recovered.
    * interference = |(O ∖ N) ∩ ∪_{t ∈ W} S_t| / |O ∖ N|: the share of the previous segment's topics
      (those that are not also new topics) that leak into the system turns W = i..recovery turn, or
      the first NON_RECOVERY_WINDOW replies of the segment when there is no recovery. None when O ∖ N
      is empty.
    """
    bounds = [0, *shifts, len(user_topics)]
    out = []
    for k, i in enumerate(shifts, start=1):
        start_prev, end_new = bounds[k - 1], bounds[k + 1]
        new = set().union(*user_topics[i:end_new]) if end_new > i else set()
        old = set().union(*user_topics[start_prev:i]) if i > start_prev else set()
        rec_turn = None
        for t in range(i, min(end_new, len(system_topics))):
            a = alignment(set(system_topics[t]), new, sim=sim)
            if a is not None and a >= threshold:
                rec_turn = t
                break
        last = rec_turn if rec_turn is not None else min(end_new, i + NON_RECOVERY_WINDOW) - 1
        window = system_topics[i:min(last, len(system_topics) - 1) + 1]
        stale = old - new
        leaked = stale & set().union(*window) if window else set()
        out.append({"turn": i, "recovered": rec_turn is not None,
                    "delay": None if rec_turn is None else rec_turn - i + 1,
                    "interference": len(leaked) / len(stale) if stale else None})
    return out


RECOVERY_SEARCHES = ("segment", "to_end")


def paper_alignment(system_topics: set, target_topics: set, *, sim: Sim | None = None) -> float:
    """The paper code's ``align`` / ``leak`` (context-aware/evaluate.py): 0.0 when the target topics are
    empty; else jaccard(sys, target), *replaced* by sim(join(sys), join(target)) when it is below 0.3
    (replaced, not maxed: a similarity below the Jaccard wins). Called only for non-empty ``system_topics``."""
    if not target_topics:
        return 0.0
    j = len(system_topics & target_topics) / len(system_topics | target_topics)
    if j < ALIGN_JACCARD_FALLBACK and sim is not None:
        return sim(" ".join(sorted(system_topics)), " ".join(sorted(target_topics)))
    return j


def shift_outcomes_to_end(shifts: Sequence[int], user_topics: Sequence[set], system_topics: Sequence[set], *,
                          sim: Sim | None = None, threshold: float = ALIGNMENT_THRESHOLD,
                          segment_topics: Sequence[set] | None = None) -> list[dict]:
    """The paper's recovery search (``compute_recovery_and_interference`` of the thesis code, crs.md §1.4),
    per shift at 0-based turn i (segments: [0] + shifts):

    * new topics N = the new segment's topics, old topics O = the previous segment's (``segment_topics[k]``
      for segment k when given: the paper took the topics of the segment's joined user text; else the
      union of the segment's user topics);
    * the search starts at the shift turn's own reply (system turn i) and runs **to the end of the
      dialogue**, through later segments: no window;
    * every system turn scanned counts in the delay (``sys_seen``, from 1), a turn without topics too,
      but only a turn with topics can recover or leak;
    * recovered at the first scanned turn t with paper_alignment(S_t, N) >= threshold (0.65);
      delay = t - i + 1;
    * leak hits: scanned turns with topics (the recovery turn included) with paper_alignment(S_t, O) >=
      threshold; interference = hits / max(1, delay if recovered else min(scanned, NON_RECOVERY_WINDOW)),
      which can exceed 1 when no recovery came (hits over the whole rest of the dialogue, divided by at
      most 4), as in the paper (ti_norm clamps it).
    """
    n = len(system_topics)
    bounds = [0, *shifts, len(user_topics)]
    out = []
    for k, i in enumerate(shifts, start=1):
        if segment_topics is not None:
            new, old = set(segment_topics[k]), set(segment_topics[k - 1])
        else:
            new = set().union(*user_topics[i:bounds[k + 1]]) if bounds[k + 1] > i else set()
            old = set().union(*user_topics[bounds[k - 1]:i]) if i > bounds[k - 1] else set()
        delay, hits, seen = None, 0, 0
        for t in range(i, n):
            seen += 1
            sys_t = set(system_topics[t])
            if not sys_t:
                continue
            if old and paper_alignment(sys_t, old, sim=sim) >= threshold:
                hits += 1
            if paper_alignment(sys_t, new, sim=sim) >= threshold:
                delay = seen
                break
        denom = max(1, delay if delay is not None else min(seen, NON_RECOVERY_WINDOW))
        out.append({"turn": i, "recovered": delay is not None, "delay": delay, "interference": hits / denom})
    return out


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


def recovery_components(outcomes: Sequence[Mapping]) -> dict:
    """topic_recovery_rate = recovered / shifts; avg_recovery_delay = mean delay over recovered shifts;
    topic_interference = mean defined interference; rd_norm = 1 - clamp((delay - 1)/5) (0 when no shift
    was recovered); ti_norm = 1 - clamp(topic_interference). All None when there are no shifts."""
    if not outcomes:
        return dict.fromkeys(("topic_recovery_rate", "avg_recovery_delay", "topic_interference",
                              "rd_norm", "ti_norm"))
    delays = [o["delay"] for o in outcomes if o["recovered"]]
    interf = [o["interference"] for o in outcomes if o["interference"] is not None]
    avg_delay = sum(delays) / len(delays) if delays else None
    ti = sum(interf) / len(interf) if interf else None
    return {"topic_recovery_rate": len(delays) / len(outcomes), "avg_recovery_delay": avg_delay,
            "topic_interference": ti,
            "rd_norm": 0.0 if avg_delay is None else 1 - _clamp((avg_delay - 1) / 5),
            "ti_norm": None if ti is None else 1 - _clamp(ti)}


def tas_cas_score(values: Mapping[str, float | None], weights: Mapping[str, float] = CAS_WEIGHTS) -> float | None:
    """TAS/CAS = Σ_k w_k v_k / Σ_k w_k over the components k with a value; None if none has one."""
    used = [(w, values[k]) for k, w in weights.items() if values.get(k) is not None]
    total = sum(w for w, _ in used)
    return sum(w * v for w, v in used) / total if total else None


def tas_cas_dialogue(user_texts: Sequence[str], system_texts: Sequence[str], user_topics: Sequence[set],
                     system_topics: Sequence[set], *, sim: Sim, true_shifts: Sequence[int] | None = None,
                     weights: Mapping[str, float] = CAS_WEIGHTS, rule: str = "and",
                     segment_sim: Callable[[Sequence[int], int], float] | None = None,
                     compare: str = "segment", recovery_on: str = "simulator",
                     recovery_search: str = "segment",
                     segment_topics_of: Callable[[Sequence[str]], Sequence[set]] | None = None) -> dict:
    """All TAS/CAS outputs of one dialogue, keys prefixed ``tas_cas``; shift detection (ours and the
    legacy detector) scored against ``true_shifts`` (0-based user turns) when the simulator logged them.
    Recovery uses the true shifts when given and ``recovery_on="simulator"``, else the detected
    ones (``tas_cas_shift_source``; the paper recovered on detected shifts).

    ``recovery_search="segment"`` (default) searches each shift's recovery inside its new segment
    (:func:`shift_outcomes`); ``"to_end"`` is the paper's search from the shift's reply to the end of
    the dialogue (:func:`shift_outcomes_to_end`), the segments' topics then read from their joined
    user texts by ``segment_topics_of`` (texts -> topic sets) when given, as the paper's code did."""
    if recovery_on not in ("simulator", "detector"):
        raise ValueError(f"recovery_on must be 'simulator' or 'detector', got {recovery_on!r}")
    if recovery_search not in RECOVERY_SEARCHES:
        raise ValueError(f"recovery_search must be one of {RECOVERY_SEARCHES}, got {recovery_search!r}")
    n = min(len(user_texts), len(system_texts))
    u, s = list(user_texts[:n]), list(system_texts[:n])
    ut, st = [set(x) for x in user_topics[:n]], [set(x) for x in system_topics[:n]]
    cc = cross_coherence([sim(a, b) for a, b in zip(u, s)])
    cr = context_retention([sim(s[i - 1], s[i]) for i in range(1, n)])
    detected = detect_shifts(u, ut, sim=sim, rule=rule, segment_sim=segment_sim, compare=compare)
    legacy = detect_shifts_legacy(u, ut, sim=sim)
    true = sorted(t for t in true_shifts if 0 < t < n) if true_shifts is not None else None
    use_true = true is not None and recovery_on == "simulator"
    shifts = true if use_true else detected
    if recovery_search == "to_end":
        seg_topics = None
        if segment_topics_of is not None:
            bounds = [0, *shifts, n]
            seg_topics = segment_topics_of([" ".join(u[a:b]) for a, b in zip(bounds, bounds[1:])])
        outcomes = shift_outcomes_to_end(shifts, ut, st, sim=sim, segment_topics=seg_topics)
    else:
        outcomes = shift_outcomes(shifts, ut, st, sim=sim)
    comps = recovery_components(outcomes)
    comps.update(cross_coherence=cc, context_retention=cr)
    out = {"tas_cas": tas_cas_score(comps, weights)}
    out.update({f"tas_cas_{k}": v for k, v in comps.items()})
    out.update(tas_cas_n_shifts=len(shifts), tas_cas_shift_source="simulator" if use_true else "detector",
               tas_cas_recovery_search=recovery_search,
               shift_detected_n=len(detected), shift_detected_legacy_n=len(legacy))
    if true_shifts is not None:
        ours, old = shift_detection_scores(detected, true), shift_detection_scores(legacy, true)
        out.update(shift_detect_precision=ours["precision"], shift_detect_recall=ours["recall"],
                   shift_detect_legacy_precision=old["precision"], shift_detect_legacy_recall=old["recall"])
    return out
