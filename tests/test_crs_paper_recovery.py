"""TAS/CAS recovery search and TF-IDF similarity: the project's settings and the paper's
(docs/crs_shift.md "Paper mode"). Every delay and similarity below is computed by hand."""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from convsim.evaluation.crs.tas_cas import (
    paper_alignment, recovery_components, shift_outcomes, shift_outcomes_to_end, tas_cas_dialogue,
)
from convsim.evaluation.crs.tas_cas_eval import _embedder, tas_cas_for_transcript
from convsim.evaluation.crs.topics import KeywordTopics
from convsim.graphs.crs_shift import Params

ROOT = Path(__file__).resolve().parent.parent

# user topics per turn: segment 0 = turns 0-1 {a}, segment 1 = turns 2-3 {b}, segment 2 = turns 4-5 {c}
USER = [{"a"}, {"a"}, {"b"}, {"b"}, {"c"}, {"c"}]
# the system keeps talking about a until turn 5, where it reaches b (after the user moved on to c)
SYSTEM = [{"a"}, {"a"}, {"a"}, {"a"}, {"a"}, {"b"}]


def test_segment_search_misses_a_recovery_after_the_user_moved_on():
    out = shift_outcomes([2, 4], USER, SYSTEM)
    assert [o["recovered"] for o in out] == [False, False]


def test_to_end_search_runs_past_later_shifts_and_counts_every_reply():
    """Shift at 2 (N = {b}, O = {a}): replies 2, 3, 4 talk of a (3 leak hits), reply 5 of b:
    recovered at the 4th reply scanned, delay 4, interference 3 / 4. Shift at 4 (N = {c}, O = {b}):
    reply 4 (a) neither, reply 5 (b) leaks; the dialogue ends unrecovered: 1 hit / min(2, 4)."""
    out = shift_outcomes_to_end([2, 4], USER, SYSTEM)
    assert [(o["recovered"], o["delay"]) for o in out] == [(True, 4), (False, None)]
    assert [o["interference"] for o in out] == [pytest.approx(0.75), pytest.approx(0.5)]
    comps = recovery_components(out)
    assert comps["topic_recovery_rate"] == 0.5 and comps["avg_recovery_delay"] == 4.0
    assert comps["rd_norm"] == pytest.approx(1 - (4 - 1) / 5)


def test_to_end_search_starts_at_the_shift_reply_and_counts_topicless_replies():
    """The shift's own reply recovering is delay 1; a reply without topics cannot recover but counts."""
    assert shift_outcomes_to_end([1], [{"a"}, {"b"}, {"b"}], [{"a"}, {"b"}, set()])[0]["delay"] == 1
    out = shift_outcomes_to_end([1], [{"a"}, {"b"}, {"b"}, {"b"}], [{"a"}, set(), set(), {"b"}])
    assert out[0]["delay"] == 3 and out[0]["interference"] == 0.0


def test_to_end_interference_can_exceed_one_as_in_the_paper():
    """No recovery: leak hits over the whole rest (6 replies about the old topic) over min(6, 4)."""
    out = shift_outcomes_to_end([1], [{"a"}] + [{"b"}] * 6, [{"a"}] * 7)
    assert out[0]["interference"] == pytest.approx(6 / 4)
    assert recovery_components(out)["ti_norm"] == 0.0


def test_paper_alignment_replaces_a_low_jaccard_by_the_similarity():
    """jaccard({a,b,c,d}, {a,x,y}) = 1/6 < 0.3: the similarity replaces it, even when lower."""
    sys_t, new = {"a", "b", "c", "d"}, {"a", "x", "y"}
    assert paper_alignment(sys_t, new, sim=lambda a, b: 0.1) == 0.1
    assert paper_alignment(sys_t, new, sim=lambda a, b: 0.7) == 0.7
    assert paper_alignment(sys_t, {"a", "b", "c"}, sim=lambda a, b: 0.0) == 0.75  # >= 0.3 kept
    assert paper_alignment(sys_t, set(), sim=lambda a, b: 1.0) == 0.0  # no new topics: 0.0
    # the threshold is inclusive (>= 0.65), as the paper's
    out = shift_outcomes_to_end([1], [{"a"}, {"x", "y"}], [{"a"}, {"q"}], sim=lambda a, b: 0.65)
    assert out[0]["delay"] == 1


def test_tas_cas_dialogue_reads_segment_topics_from_the_joined_segment_texts():
    seen = []

    def seg_topics(texts):
        seen.append(list(texts))
        return [{"a"}, {"b"}]

    users, systems = ["u0", "u1", "u2", "u3"], ["s0", "s1", "s2", "s3"]
    out = tas_cas_dialogue(users, systems, [set()] * 4, [set(), set(), set(), {"b"}], sim=lambda a, b: 0.0,
                           true_shifts=[2], recovery_search="to_end", segment_topics_of=seg_topics)
    assert seen == [["u0 u1", "u2 u3"]]
    assert out["tas_cas_avg_recovery_delay"] == 2 and out["tas_cas_recovery_search"] == "to_end"
    with pytest.raises(ValueError, match="recovery_search"):
        tas_cas_dialogue(users, systems, [set()] * 4, [set()] * 4, sim=lambda a, b: 0.0, recovery_search="window")


class _OneHot:
    """Identical texts have cosine 1, different texts 0."""

    def __init__(self):
        self.index = {}

    def encode(self, texts):
        out = np.zeros((len(texts), 64))
        for r, t in enumerate(texts):
            out[r, self.index.setdefault(t, len(self.index))] = 1.0
        return out


def _transcript(pairs, shifts):
    out = []
    for turn, (u, s) in enumerate(pairs, start=1):
        out += [{"turn": turn, "speaker": "user", "text": u, "meta": {"shift_event": turn in shifts}},
                {"turn": turn, "speaker": "system", "text": s, "meta": {}}]
    return out


def test_a_synthetic_session_through_the_transcript_path():
    """5 turns, true shifts at turns 2 and 4 (0-based 1 and 3); topics are the keywords love, ghost,
    space. Segment search: shift 1 (ghost) finds no ghost reply in turns 2-3, shift 3 (space) one at
    the 2nd reply: rate 0.5, delay 2. Paper search: shift 1 scans love (leak), a topic-less reply,
    ghost: delay 3, interference 1/3; shift 3 scans ghost (leak), space: delay 2, interference 1/2."""
    pairs = [("I love love films", "a love story"), ("ghost films please", "a love story again"),
             ("more ghost films", "nothing to add"), ("now space films", "a ghost film"),
             ("space space", "a space film")]
    transcript = _transcript(pairs, shifts={2, 4})
    topics = KeywordTopics(["love", "ghost", "space"])
    seg = tas_cas_for_transcript(transcript, topics=topics, embedder=_OneHot())
    assert seg["tas_cas_topic_recovery_rate"] == 0.5 and seg["tas_cas_avg_recovery_delay"] == 2
    end = tas_cas_for_transcript(transcript, topics=topics, embedder=_OneHot(), recovery_search="to_end")
    assert end["tas_cas_topic_recovery_rate"] == 1.0 and end["tas_cas_avg_recovery_delay"] == 2.5
    assert end["tas_cas_topic_interference"] == pytest.approx((1 / 3 + 1 / 2) / 2)


class _Movie:
    def __init__(self, title, plot):
        self.title, self.plot = title, plot


class _Catalog:
    def __init__(self, movies):
        self.movies = movies


def test_tfidf_modes_sublinear_in_the_project_raw_in_the_paper():
    """'peace war war war' vs 'war' (war and peace with equal idf; no bigram of the query in the
    vocabulary): raw counts give 3 / sqrt(10) = 0.9487; sublinear tf (1 + ln 3, 1) gives
    2.0986 / sqrt(2.0986^2 + 1) = 0.9027. The paper fits titles and plots as separate documents."""
    cat = _Catalog([_Movie("Alpha", "war peace"), _Movie("Beta", "war peace"), _Movie("Gamma", "zzz")])
    project, paper = _embedder("tfidf", cat, "project"), _embedder("tfidf", cat, "paper")
    assert project.sublinear_tf is True and paper.sublinear_tf is False
    assert project.similarity("peace war war war", "war") == pytest.approx((1 + math.log(3)) / math.sqrt((1 + math.log(3)) ** 2 + 1), abs=1e-6)
    assert paper.similarity("peace war war war", "war") == pytest.approx(3 / math.sqrt(10), abs=1e-6)
    assert "alpha war" in project._vec.vocabulary_ and "alpha war" not in paper._vec.vocabulary_
    with pytest.raises(ValueError, match="tfidf"):
        _embedder("tfidf", cat, "sublinear")


def test_each_mode_has_its_settings():
    """Default (project): recovery in the segment, sublinear TF, retracted values out of E(U); the paper
    config: to the end of the dialogue, raw TF on titles and plots apart, retracted values kept."""
    p = Params()
    assert (p.recovery_search, p.tas_cas_tfidf, p.user_negation) == ("segment", "project", "drop")
    assert p.tas_settings().user_negation == "drop"
    cfg = yaml.safe_load((ROOT / "configs" / "crs_paper001.yaml").read_text())["params"]
    assert (cfg["recovery_search"], cfg["tas_cas_tfidf"], cfg["user_negation"]) == ("to_end", "paper", "keep")
    paper = Params(**{k: v for k, v in cfg.items() if k in Params.model_fields})
    assert paper.tas_settings().user_negation == "keep"


class _FixedLda:
    """Two topics over six words; every text weighs them 0.6 / 0.4."""

    def __init__(self):
        self.components_ = np.array([[9.0, 8.0, 7.0, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 9.0, 8.0, 7.0]])

    def transform(self, X):
        return np.tile([0.6, 0.4], (X.shape[0], 1))


def test_lda_topics_dominant_keeps_the_best_topic_only():
    """The paper's extract_topics_lda: the words of the dominant topic (p >= 0.1); the project's: the
    words of every topic with p >= 0.2."""
    from sklearn.feature_extraction.text import CountVectorizer
    from convsim.evaluation.crs.topics import LdaTopics
    vec = CountVectorizer().fit(["alpha beta gamma delta epsilon zeta"])
    union = LdaTopics(vec, _FixedLda(), top_words=3, min_prob=0.2)
    dominant = LdaTopics(vec, _FixedLda(), top_words=3, min_prob=0.1, dominant=True)
    assert union.topics("alpha delta") == {"alpha", "beta", "delta", "epsilon", "gamma", "zeta"}
    assert dominant.topics("alpha delta") == {"alpha", "beta", "delta"}
    assert LdaTopics(vec, _FixedLda(), top_words=3, min_prob=0.7, dominant=True).topics("alpha") == frozenset()
