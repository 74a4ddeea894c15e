"""Grounded TAS formulas (evaluation/crs/tas.py) against hand-computed values and scikit-learn."""

import math

import numpy as np
import pytest

from convsim.evaluation.crs.tas import (
    binary_cosine, binary_cosines, concept_gaps, context_retention, copy_penalty, cross_coherence,
    dialogue_tas, dst_scores, recovery, segment_scores, segments, tas_turn, tokens, weighted_cosine,
    word_ngrams,
)

A, B, C, D = ("genre", "Drama"), ("actor", "Tom Hanks"), ("director", "Robert Zemeckis"), ("year", "2000")
IDF = {A: 1.0, B: 2.0, C: 3.0, D: 4.0}


def test_cross_coherence_is_jaccard():
    assert cross_coherence({A, B, C}, {B, C, D}) == pytest.approx(2 / 4)
    assert cross_coherence({A}, {A}) == 1.0
    assert cross_coherence({A}, {B}) == 0.0


def test_cross_coherence_empty_conventions():
    # ∅/∅ is "not applicable" (the original returned 1.0); one side empty is a real 0.
    assert cross_coherence(set(), set()) is None
    assert cross_coherence({A}, set()) == 0.0
    assert cross_coherence(set(), {A}) == 0.0


def test_cross_coherence_rejects_strings():
    with pytest.raises(ValueError, match="string"):
        cross_coherence("genre=Drama", {A})


def test_context_retention_hand_computed():
    # φ(U) = (a:1, b:2, c:3), φ(S) = (b:2, c:3, d:4): dot 13, norms √14 and √29.
    assert context_retention({A, B, C}, {B, C, D}, IDF) == pytest.approx(13 / math.sqrt(14 * 29))
    assert context_retention({A, B}, {A, B}, IDF) == pytest.approx(1.0)
    assert context_retention({A}, {B}, IDF) == 0.0
    assert context_retention(set(), set(), IDF) is None
    assert context_retention({A}, set(), IDF) == 0.0


def test_context_retention_accepts_callable_idf():
    calls = []

    def idf(field, value):
        calls.append((field, value))
        return IDF[(field, value)]

    assert context_retention({A, B, C}, {B, C, D}, idf) == pytest.approx(13 / math.sqrt(406))
    assert set(calls) == {A, B, C, D}


def test_binary_cosines_is_binary_cosine_of_each_set():
    others = ({B, C, D}, {A}, set(), frozenset({C}))
    for u in ({A, B, C}, set()):
        got = binary_cosines(u, others, IDF)
        assert [repr(x) for x in got] == [repr(binary_cosine(u, s, IDF)) for s in others]
    with pytest.raises(ValueError, match="no weight"):
        binary_cosines({A}, ({B}, {("genre", "War")}), IDF)


def test_context_retention_rejects_missing_or_bad_weight():
    with pytest.raises(ValueError, match="no weight"):
        context_retention({A}, {("genre", "War")}, IDF)
    with pytest.raises(ValueError, match="finite"):
        context_retention({A}, {A}, {A: float("nan")})


def test_context_retention_matches_sklearn_smooth_idf():
    # sklearn's smooth IDF is ln((1+N)/(1+df)) + 1, the formula of crs.md §1.3; with binary tf and
    # l2 norm the dot product of two rows is exactly our CR.
    from sklearn.feature_extraction.text import TfidfVectorizer

    catalog_docs = [["g_drama", "a_hanks"], ["g_drama"], ["g_drama", "d_zemeckis"], ["a_hanks", "y_2000"]]
    vec = TfidfVectorizer(analyzer=lambda doc: doc, binary=True, smooth_idf=True, norm="l2")
    vec.fit(catalog_docs)
    n = len(catalog_docs)

    def idf(field, value):
        df = sum(1 for doc in catalog_docs if f"{field}_{value}" in doc)
        return math.log((1 + n) / (1 + df)) + 1

    u, s = {("g", "drama"), ("a", "hanks")}, {("a", "hanks"), ("d", "zemeckis"), ("y", "2000")}
    rows = vec.transform([[f"{f}_{v}" for f, v in sorted(u)], [f"{f}_{v}" for f, v in sorted(s)]])
    expected = float(np.asarray(rows[0].multiply(rows[1]).sum()))
    assert context_retention(u, s, idf) == pytest.approx(expected)


def test_weighted_cosine_uses_counts():
    # Summed vectors: U = 2·a + b, S = a  -> (2·1)·(1) / (√(4+4) · 1)
    assert weighted_cosine({A: 2, B: 1}, {A: 1}, IDF) == pytest.approx(2 / math.sqrt(8))


def test_tokens_regex():
    assert tokens("Don't stop-me NOW's 2000!") == ["don't", "stop", "me", "now's", "2000"]
    # non-ASCII letters are not word characters here (lower-casing the Kelvin sign gives a "k")
    assert tokens("Ünïcödé \u212a ÉCOLE x_y") == ["n", "c", "d", "cole", "x", "y"]


def test_word_ngrams_are_consecutive_tokens():
    assert word_ngrams("a b c d", 3) == {("a", "b", "c"), ("b", "c", "d")}
    assert word_ngrams("a b", 3) == frozenset() and word_ngrams("a b a b", 2) == {("a", "b"), ("b", "a")}


def test_copy_penalty_hand_computed():
    user = "I want a sci-fi movie with Tom Hanks"
    system = "A sci-fi movie with Tom Hanks is Cast Away"
    # 3-grams of S: 8, shared 5; 4-grams of S: 7, shared 4 -> max(5/8, 4/7)
    assert copy_penalty(user, system) == pytest.approx(5 / 8)


def test_copy_penalty_uses_sets_and_short_texts():
    assert copy_penalty("the the the", "the the the the") == 1.0
    assert copy_penalty("anything", "Try Heat") is None
    assert copy_penalty("anything", "") is None
    assert copy_penalty("nothing shared here", "completely different words now") == 0.0
    # S with exactly 3 tokens: only n = 3 applies
    assert copy_penalty("x a b c", "a b c") == 1.0


def test_tas_turn_formula_and_clipping():
    assert tas_turn(0.5, 0.6, 0.2) == pytest.approx(0.9)
    assert tas_turn(0.5, 0.6, 0.2, alpha=2.0, beta=0.5, gamma=1.5) == pytest.approx(1.0 + 0.3 - 0.3)
    assert tas_turn(1.0, 1.0, 0.0) == 1.0
    assert tas_turn(0.0, 0.0, 1.0, gamma=3.0) == -1.0
    assert tas_turn(0.5, 0.25, None) == pytest.approx(0.75)
    assert tas_turn(None, None, 0.1) is None


def test_dialogue_tas_skips_not_applicable_turns():
    assert dialogue_tas([0.2, None, 0.4]) == pytest.approx(0.3)
    assert dialogue_tas([None, None]) is None
    assert dialogue_tas([]) is None


def test_segments():
    assert segments([5, 9], 12) == [(1, 4), (5, 8), (9, 12)]
    assert segments([], 3) == [(1, 3)]
    assert segments([1, 3, 3], 4) == [(1, 2), (3, 4)]
    with pytest.raises(ValueError, match="outside"):
        segments([13], 12)


def test_segment_scores_aggregate_concepts():
    u = [{A}, {A, B}, {C}]
    s = [{A}, set(), {C, D}]
    rows = segment_scores([(1, 2), (3, 3)], u, s, IDF, penalties_by_turn=[0.5, None, 0.1])
    first, second = rows
    # segment 1: ∪U = {a, b}, ∪S = {a} -> CC 1/2; ΣφU = (a:2, b:2), ΣφS = (a:1) -> 2/√8
    assert first["cc"] == pytest.approx(0.5)
    assert first["cr"] == pytest.approx(2 / math.sqrt(8))
    assert first["copy_penalty"] == pytest.approx(0.5)
    assert first["tas"] == pytest.approx(0.5 + 2 / math.sqrt(8) - 0.5)
    # segment 2: U {c}, S {c, d}: CC 1/2, CR 9/(3·5)
    assert second["cc"] == pytest.approx(0.5)
    assert second["cr"] == pytest.approx(9 / 15)
    assert second["tas"] == pytest.approx(0.5 + 0.6 - 0.1)


def test_recovery_cc_rule():
    cc = [0.1, 0.2, 0.1, 0.7, 0.0, 0.0, 0.0, 0.9]
    cr = [0.9] * 8
    out = recovery([3, 5], cc, cr, window=3, tau=0.65, rule="cc")
    # shift 3: CC(3)=.1, CC(4)=.7 -> d = 1; shift 5: 5, 6, 7 all below -> not recovered (8 is d=3)
    assert out["shifts"] == [{"turn": 3, "recovered": True, "delay": 1},
                             {"turn": 5, "recovered": False, "delay": None}]
    assert out["recovery_rate"] == 0.5
    assert out["avg_delay"] == 1.0


def test_recovery_original_rule_and_shift_turn_counts_as_d0():
    cc = [0.4, 0.0, 0.0, 0.0]
    cr = [0.0, 0.0, 0.7, 0.0]
    out = recovery([1, 2], cc, cr, window=3, tau=0.65, rule="original")
    assert [(d["recovered"], d["delay"]) for d in out["shifts"]] == [(True, 0), (True, 1)]
    assert out["avg_delay"] == 0.5
    # the spec's rule ignores CR and needs CC >= tau
    assert recovery([1, 2], cc, cr, rule="cc")["recovery_rate"] == 0.0


def test_recovery_window_truncated_at_dialogue_end_and_none_cc():
    out = recovery([3], [0.0, 0.0, None], [0.0, 0.0, None], window=3)
    assert out["recovery_rate"] == 0.0 and out["avg_delay"] is None


def test_recovery_without_shifts_is_not_applicable():
    out = recovery([], [0.5], [0.5])
    assert out["recovery_rate"] is None and out["avg_delay"] is None and out["n_shifts"] == 0


def test_recovery_validates_input():
    with pytest.raises(ValueError, match="rule"):
        recovery([1], [0.1], [0.1], rule="any")
    with pytest.raises(ValueError, match="outside"):
        recovery([2], [0.1], [0.1])


def test_concept_gaps():
    out = concept_gaps({A, B}, {B, C})
    assert out == {"missing": [A], "hallucinated": [C]}
    # sorted by repr, which is not the tuples' own order ("'" sorts after " ")
    tom, hanks = ("actor", "Tom"), ("actor", "Tom Hanks")
    assert concept_gaps(set(), {tom, hanks, A})["hallucinated"] == [hanks, tom, A]


def test_dst_scores():
    out = dst_scores({A, B, C}, {A, D})
    assert out["precision"] == pytest.approx(1 / 3)
    assert out["recall"] == pytest.approx(1 / 2)
    assert out["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert out["joint"] == 0.0
    assert dst_scores({A}, {A})["joint"] == 1.0
    assert dst_scores(set(), {A}) == {"precision": None, "recall": 0.0, "f1": None, "joint": 0.0}
    assert dst_scores({B}, {A})["f1"] == 0.0
    assert dst_scores(set(), set())["joint"] is None


def test_echo_turn_flags_restating_without_a_film():
    from convsim.evaluation.crs.nodes import echo_turn
    u = {("genre", "Drama"), ("actor", "Tom Hanks")}
    assert echo_turn(u, {("genre", "Drama"), ("actor", "Tom Hanks")}, named_film=False) == 1
    assert echo_turn(u, {("genre", "Drama")}, named_film=False) == 1          # 1/1 copied
    # naming a film, adding own concepts (1 of 5 copied < 0.8) or saying nothing grounded: no echo
    assert echo_turn(u, {("genre", "Drama"), ("actor", "Tom Hanks")}, named_film=True) == 0
    own = {("genre", "Drama"), ("actor", "A"), ("actor", "B"), ("director", "C"), ("year", "1999")}
    assert echo_turn(u, own, named_film=False) == 0
    assert echo_turn(u, set(), named_film=False) == 0


def test_tas_echo_ceiling_is_reported_per_turn():
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.evaluation.crs.nodes import TASSettings, turn_evaluation
    cat = load_movie_catalog()
    ex = ConceptExtractor(cat)
    user = {"turn": 1, "text": "Any drama films starring Tom Hanks?", "meta": {"constraints": {}}}
    system = {"text": "Try Cast Away.", "meta": {"mentioned_ids": ["x"]}}
    m, _ = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings())
    # the echo reply restates both concepts: CC = CR = 1, a copied 3-gram or not, TAS near 1
    assert m["echo"] == 0 and m["tas_echo"] >= 0.75 and m["tas_echo"] > m["tas"]
