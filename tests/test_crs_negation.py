"""A value the user retracts in its turn leaves E(U) (evaluation/crs/negation.py), so CC no longer
rewards a reply that repeats it; paper mode (user_negation: keep) keeps the original extractor's E(U)."""

import pytest

from convsim.agents.crs.recommender import _mention_polarity
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.evaluation.crs.negation import affirmed_concepts, retracted
from convsim.evaluation.crs.nodes import TASSettings, turn_evaluation


@pytest.fixture(scope="module")
def cat_ex():
    cat = load_movie_catalog()
    return cat, ConceptExtractor(cat)


RETRACTION = "I want comedy films. I don't care about Animation anymore."


def _cc(cat, ex, user_text, reply, negation):
    user = {"turn": 3, "text": user_text, "meta": {"constraints": {"genre": "Comedy"}}}
    system = {"turn": 3, "text": reply, "meta": {}}
    m, d = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings(user_negation=negation))
    return m["cc"], d["user_concepts"]


def test_cc_no_longer_rewards_repeating_a_retracted_value(cat_ex):
    """E(U) was {Comedy, Animation}: "animation films" scored CC 0.5, as much as "comedy films".
    Now E(U) = {Comedy}: repeating the dropped value scores 0, following the user 1."""
    cat, ex = cat_ex
    assert ex.extract(RETRACTION) == {("genre", "Comedy"), ("genre", "Animation")}
    repeat, follow = "Here are some animation films for you.", "Here are some comedy films for you."
    cc_repeat, u = _cc(cat, ex, RETRACTION, repeat, "drop")
    cc_follow, _ = _cc(cat, ex, RETRACTION, follow, "drop")
    assert u == [["genre", "Comedy"]]
    assert (cc_repeat, cc_follow) == (0.0, 1.0)
    # the original behaviour (paper mode): both 0.5, the retracted value rewarded like the kept one
    assert _cc(cat, ex, RETRACTION, repeat, "keep") == (0.5, [["genre", "Animation"], ["genre", "Comedy"]])
    assert _cc(cat, ex, RETRACTION, follow, "keep")[0] == 0.5
    # the reply's concepts are read the same way: acknowledging the retraction is no reward for it,
    # and a verbatim copy keeps CC 1 (E(S) = E(U))
    assert _cc(cat, ex, RETRACTION, "No more animation films, then: here are some comedy films.", "drop")[0] == 1.0
    assert _cc(cat, ex, RETRACTION, RETRACTION, "drop")[0] == 1.0
    with pytest.raises(ValueError, match="user_negation"):
        _cc(cat, ex, RETRACTION, follow, "ignore")


@pytest.mark.parametrize("text, value", [
    ("I don't care about Animation anymore.", "Animation"),
    ("No more thrillers, please. Show me comedy films.", "Thriller"),
    ("Forget about Drama or English.", "English"),
    ("Drama no longer matters to me.", "Drama"),
    ("On second thought, English isn't important to me.", "English"),
    ("Scratch drama films, I'm not attached to it after all.", "Drama"),
    ("Hmm, forget what I said about Tom Hanks; that doesn't matter to me anymore.", "Tom Hanks"),
    ("Actually, scratch that: I said horror films but I really meant drama films.", "Horror"),
    ("Wait, I misspoke earlier. Drama films, not horror films.", "Horror"),
])
def test_retraction_forms(text, value):
    assert retracted(text, value)


@pytest.mark.parametrize("text, value", [
    ("No more thrillers, please. Show me comedy films.", "Comedy"),
    ("Hmm, maybe not history films... no, actually history films are exactly what I want.", "History"),
    ("Actually, scratch that: I said horror films but I really meant drama films.", "Drama"),
    ("Wait, I misspoke earlier. Drama films, not horror films.", "Drama"),
    ("I'd now rather see films from 2003. Forget about Sport.", "2003"),
    ("Any comedy films with Tom Hanks?", "Tom Hanks"),
    ("Not Up: that one is a comedy film and I asked for drama.", "Drama"),
])
def test_kept_mentions(text, value):
    assert not retracted(text, value)


def test_every_value_the_recommender_reads_as_negated_is_retracted_for_the_metric(cat_ex):
    """The recommender's tracker and the metric agree where the tracker sees a negation (the metric
    reads more forms: "no longer matters", "isn't important", "scratch")."""
    _, ex = cat_ex
    texts = ["Forget about comedy films.", "Never mind Tom Hanks.", "Not drama films, I want horror.",
             "Something without Tom Hanks.", "Horror rather than comedy films.", "Anything except drama films.",
             "I said comedy films but I meant horror films.", "I do not care about films in English."]
    negated = 0
    for text in texts:
        for field, value in ex.extract(text):
            if _mention_polarity(text, value) is False:
                negated += 1
                assert retracted(text, value), (text, value)
    assert negated >= len(texts)  # each text holds a value the tracker reads as negated
    assert affirmed_concepts("Not drama films, I want horror films.", ex.extract("Not drama films, I want horror films.")) \
        == [["genre", "Horror"]]
