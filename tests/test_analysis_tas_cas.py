"""TAS/CAS components against hand-computed values (spec 001, crs.md §1.4)."""

import pytest

from convsim.evaluation.crs import tas_cas as tc


def word_jaccard(a: str, b: str) -> float:
    """A similarity simple enough to compute by hand."""
    x, y = set(a.lower().split()), set(b.lower().split())
    return len(x & y) / len(x | y) if x | y else 0.0


def test_jaccard_empty_is_undefined():
    assert tc.jaccard(set(), set()) is None
    assert tc.jaccard({"a"}, set()) == 0.0
    assert tc.jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_cross_coherence_and_context_retention_by_hand():
    u, s = ["a b", "c d"], ["a b c", "c"]
    # sim(a b, a b c) = 2/3 ; sim(c d, c) = 1/2
    assert tc.cross_coherence([word_jaccard(x, y) for x, y in zip(u, s)]) == pytest.approx(7 / 12)
    # sim(a b c, c) = 1/3
    assert tc.context_retention([word_jaccard(s[0], s[1])]) == pytest.approx(1 / 3)
    assert tc.cross_coherence([]) is None and tc.context_retention([]) is None


USER_T = [{"drama", "war"}, set(), {"comedy"}, {"comedy", "family"}, set()]
SYS_T = [{"drama"}, {"drama", "war"}, {"war"}, {"comedy", "family"}, {"comedy"}]


def test_recovery_delay_and_interference_by_hand():
    (o,) = tc.shift_outcomes([2], USER_T, SYS_T)
    # new = {comedy, family}; S2 = {war} aligns 0; S3 aligns 1 -> delay 3 - 2 + 1 = 2
    assert o == {"turn": 2, "recovered": True, "delay": 2, "interference": 0.5}
    # window S2..S3 leaks {war} of the stale {drama, war}: 1/2
    c = tc.recovery_components([o])
    assert c == {"topic_recovery_rate": 1.0, "avg_recovery_delay": 2.0, "topic_interference": 0.5,
                 "rd_norm": pytest.approx(0.8), "ti_norm": 0.5}


def test_no_recovery_scores_worst_delay_and_full_interference():
    user = [{"a"}] + [{"b"}] * 5
    system = [{"a"}] * 6
    (o,) = tc.shift_outcomes([1], user, system)
    assert o == {"turn": 1, "recovered": False, "delay": None, "interference": 1.0}
    c = tc.recovery_components([o])
    assert c["topic_recovery_rate"] == 0.0 and c["avg_recovery_delay"] is None
    assert c["rd_norm"] == 0.0 and c["ti_norm"] == 0.0  # legacy: delay 0 -> rd_norm 1 rewarded this


def test_recovery_stays_inside_the_new_segment():
    user = [{"a"}, {"b"}, {"c"}]
    system = [{"a"}, {"a"}, {"b"}]  # "b" only comes back after the user moved on to "c"
    outs = tc.shift_outcomes([1, 2], user, system)
    assert outs[0]["recovered"] is False
    assert outs[1]["recovered"] is False


def test_alignment_falls_back_to_similarity_below_point_three():
    assert tc.alignment({"x"}, {"y"}) == 0.0
    assert tc.alignment({"space war"}, {"war"}, sim=word_jaccard) == pytest.approx(0.5)
    assert tc.alignment(set(), {"y"}) is None


def test_no_shifts_gives_none_not_zero():
    c = tc.recovery_components([])
    assert all(v is None for v in c.values())
    assert tc.tas_cas_score({"cross_coherence": 0.4, "context_retention": 0.1, **c}) == pytest.approx(
        (0.3 * 0.4 + 0.15 * 0.1) / 0.45)
    assert tc.tas_cas_score(dict.fromkeys(tc.CAS_WEIGHTS)) is None


def test_tas_cas_weighted_aggregate_by_hand():
    v = {"topic_recovery_rate": 1.0, "rd_norm": 0.8, "ti_norm": 0.5, "cross_coherence": 7 / 12,
         "context_retention": 1 / 3}
    expected = (0.01 * 1 + 0.02 * 0.8 + 0.02 * 0.5 + 0.30 * 7 / 12 + 0.15 / 3) / 0.50
    assert tc.tas_cas_score(v) == pytest.approx(expected)
    assert tc.tas_cas_score(v, {"cross_coherence": 1, "rd_norm": 1}) == pytest.approx((7 / 12 + 0.8) / 2)


USER_TEXTS = ["I'm in the mood for a war movie", "Who stars in it?", "What themes does it have?",
              "How about something with Tom Hanks instead?", "Just checking, more like that?",
              "Anything else with Tom Hanks and drama?"]
USER_TOPICS = [{"war"}, set(), set(), {"tom hanks"}, set(), {"tom hanks", "drama"}]


def test_legacy_detector_is_degenerate_and_ours_is_not():
    legacy = tc.detect_shifts_legacy(USER_TEXTS, USER_TOPICS, sim=word_jaccard)
    ours = tc.detect_shifts(USER_TEXTS, USER_TOPICS, sim=word_jaccard)
    assert legacy == [1, 2, 3, 4, 5]  # every transition, as in the original (18.8 of 19)
    assert ours == [3]
    assert tc.detect_shifts(USER_TEXTS, USER_TOPICS, sim=word_jaccard, rule="or") == [3, 5]
    assert tc.shift_detection_scores(ours, [3]) == {"precision": 1.0, "recall": 1.0, "f1": 1.0,
                                                     "n_detected": 1, "n_true": 1}
    leg = tc.shift_detection_scores(legacy, [3])
    assert leg["precision"] == pytest.approx(0.2) and leg["recall"] == 1.0


def test_detection_scores_tolerance_and_empty_cases():
    assert tc.shift_detection_scores([4], [3])["precision"] == 0.0
    s = tc.shift_detection_scores([4, 9], [3, 8], tolerance=1)
    assert (s["precision"], s["recall"]) == (1.0, 1.0)
    assert tc.shift_detection_scores([], [3])["precision"] is None
    assert tc.shift_detection_scores([2], [])["recall"] is None


def test_dialogue_bundle_uses_true_shifts_and_scores_the_detectors():
    system = ["War movie: Saving Private Ryan", "Tom Sizemore stars", "It is about war",
              "Tom Hanks is in Cast Away", "Big with Tom Hanks", "Philadelphia is a Tom Hanks drama"]
    sys_topics = [{"war"}, set(), {"war"}, {"tom hanks"}, {"tom hanks"}, {"tom hanks", "drama"}]
    out = tc.tas_cas_dialogue(USER_TEXTS, system, USER_TOPICS, sys_topics, sim=word_jaccard, true_shifts=[3])
    assert out["tas_cas_shift_source"] == "simulator" and out["tas_cas_n_shifts"] == 1
    # new topics {tom hanks, drama}: S3, S4 align 1/2 < 0.65, S5 aligns 1 -> delay 5 - 3 + 1 = 3
    assert out["tas_cas_topic_recovery_rate"] == 1.0 and out["tas_cas_avg_recovery_delay"] == 3.0
    assert out["tas_cas_topic_interference"] == 0.0
    assert out["shift_detect_precision"] == 1.0 and out["shift_detect_legacy_precision"] == pytest.approx(0.2)
    assert out["shift_detected_legacy_n"] == 5 and out["shift_detected_n"] == 1
    assert 0 <= out["tas_cas"] <= 1


def test_paper_detector_or_rule_between_consecutive_turns():
    # consecutive + OR is the paper's rule: with Jaccard(∅, ∅) = 0 it equals the legacy detector
    paper = tc.detect_shifts(USER_TEXTS, USER_TOPICS, sim=word_jaccard, rule="or", compare="consecutive")
    assert paper == tc.detect_shifts_legacy(USER_TEXTS, USER_TOPICS, sim=word_jaccard)
    # consecutive + AND: only transitions departing both lexically and topically;
    # 5 ("Anything else with Tom Hanks and drama?") shares "tom hanks" with nothing at 4 (no topics)
    both = tc.detect_shifts(USER_TEXTS, USER_TOPICS, sim=word_jaccard, rule="and", compare="consecutive")
    assert set(both) <= set(paper) and 1 in both
    with pytest.raises(ValueError):
        tc.detect_shifts(USER_TEXTS, USER_TOPICS, sim=word_jaccard, compare="window")


def test_recovery_on_detected_shifts_is_selectable():
    system = ["War movie: Saving Private Ryan", "Tom Sizemore stars", "It is about war",
              "Tom Hanks is in Cast Away", "Big with Tom Hanks", "Philadelphia is a Tom Hanks drama"]
    sys_topics = [{"war"}, set(), {"war"}, {"tom hanks"}, {"tom hanks"}, {"tom hanks", "drama"}]
    out = tc.tas_cas_dialogue(USER_TEXTS, system, USER_TOPICS, sys_topics, sim=word_jaccard,
                              true_shifts=[3], rule="or", compare="consecutive", recovery_on="detector")
    assert out["tas_cas_shift_source"] == "detector" and out["tas_cas_n_shifts"] == 5
    # the detector is still scored against the true shift
    assert out["shift_detect_precision"] == pytest.approx(0.2) and out["shift_detect_recall"] == 1.0


def test_the_shared_topic_extractor_is_kept_with_its_catalog_and_bounded(monkeypatch):
    # keyed by id(catalog): a catalog taking a collected one's id must not get the other's topics;
    # and a process running many runs keeps the last few runs' extractors, not every one
    from types import SimpleNamespace

    from convsim.evaluation.crs import tas_cas_eval as tce
    made: list = []

    def make(mode, movies, run_dir=None, model=None):
        made.append(movies)
        return SimpleNamespace(movies=movies)
    monkeypatch.setattr(tce, "make_topic_extractor", make)
    monkeypatch.setattr(tce, "_TOPICS", type(tce._TOPICS)())
    first = SimpleNamespace(movies=["a"])
    assert tce.topic_extractor("keyword", first, "r").movies == ["a"]
    assert tce.topic_extractor("keyword", first, "r").movies == ["a"] and len(made) == 1  # shared
    impostor = SimpleNamespace(movies=["b"])
    monkeypatch.setattr(tce, "id", lambda obj: id(first), raising=False)  # the same id, another catalog
    assert tce.topic_extractor("keyword", impostor, "r").movies == ["b"]
    monkeypatch.delattr(tce, "id")
    for i in range(tce._TOPICS_KEPT + 5):
        tce.topic_extractor("keyword", first, f"run{i}")
    assert len(tce._TOPICS) == tce._TOPICS_KEPT


def test_memoised_encodings_belong_to_their_embedder_even_when_its_id_is_reused(monkeypatch):
    # keyed by id(embedder), an embedder collected after encoding left its vectors to whichever
    # embedder CPython put at the same address next (another corpus, another dimension)
    import gc
    import weakref

    import numpy as np

    from convsim.evaluation.crs import tas_cas_eval
    from convsim.evaluation.crs.tas_cas_eval import VectorSim

    class Fixed:  # an embedder whose every text is one vector
        def __init__(self, vec):
            self.vec = np.array(vec, dtype=float)

        def encode(self, texts):
            return np.array([self.vec for _ in texts])

    old = Fixed([1.0, 0.0])
    assert VectorSim(old, []).vector("joined topic words").tolist() == [1.0, 0.0]
    alive = weakref.ref(old)
    del old
    gc.collect()
    assert alive() is None  # the memo does not keep an embedder alive
    # the next embedder gets the same id, as CPython's allocator often arranges: it reads its own vectors
    monkeypatch.setattr(tas_cas_eval, "id", lambda obj: 1, raising=False)
    first, second = Fixed([1.0, 0.0]), Fixed([0.0, 1.0])
    assert VectorSim(first, []).vector("joined topic words").tolist() == [1.0, 0.0]
    assert VectorSim(second, []).vector("joined topic words").tolist() == [0.0, 1.0]
