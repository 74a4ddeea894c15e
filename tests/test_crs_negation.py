"""A value the user retracts in its turn leaves E(U) (evaluation/crs/negation.py), so CC no longer
rewards a reply that repeats it; paper mode (user_negation: keep) keeps the original extractor's E(U)."""

import pytest

from convsim.agents.crs.recommender import _mention_polarity
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.evaluation.crs.negation import affirmed_concepts, rejected, retracted
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


# --- rejected attributes: the values a user names as the reason it turns a film down --------------

def _films(cat, field, without):
    """Catalog films with a value of ``field`` and without ``without`` in it, by id (deterministic)."""
    return [m for _, m in sorted(cat.by_id.items())
            if m.values(field) and without.casefold() not in {str(v).casefold() for v in m.values(field)}]


def _session_cc(cat, ex, rejection, reply, negation, constraints=None):
    """CC of ``reply`` at the turn before the rejection ("I'd like drama films.") and at the turn of
    the rejection itself."""
    out = []
    for turn, text in ((2, "I'd like drama films."), (3, rejection)):
        user = {"turn": turn, "text": text, "meta": {"constraints": constraints or {"genre": "Drama"}}}
        m, d = turn_evaluation(user, {"turn": turn, "text": reply, "meta": {}}, extractor=ex, idf=cat.idf,
                               settings=TASSettings(user_negation=negation))
        out.append((m["cc"], d["user_concepts"]))
    return out


def test_rejected_comedy_leaves_e_u_and_drama_stays(cat_ex):
    """The user asked for drama and turns down a comedy with the rule user's reason. Injected defect
    (paper mode ``keep``, the rejection rule absent): E(U) = {Comedy, Drama}, and a reply about comedy
    scored CC 0.5 after the rejection, above its 0.0 before it. With ``drop`` it scores no higher than
    before (0.0) and a reply about drama scores as the user's wish (1.0)."""
    from convsim.agents.crs.user import REACTIONS, rejection_reason
    cat, ex = cat_ex
    film = next(m for m in _films(cat, "genre", "Drama") if m.values("genre")[0] == "Comedy")
    reason = rejection_reason(film, {"genre": "Drama"}, "genre")
    assert reason == "that one is a comedy film and I asked for drama"
    comedy, drama = "Here are some comedy films for you.", "Here are some drama films for you."
    for form in REACTIONS["reject"]:
        rejection = form.format(title=film.title, reason=reason)
        (before, _), (after, u) = _session_cc(cat, ex, rejection, comedy, "drop")
        assert u == [["genre", "Drama"]], rejection
        assert after <= before == 0.0
        assert _session_cc(cat, ex, rejection, drama, "drop")[1][0] == 1.0
        # the defect: the rejected attribute kept as a user concept (paper mode keeps it, unchanged)
        (k_before, _), (k_after, k_u) = _session_cc(cat, ex, rejection, comedy, "keep")
        assert ["genre", "Comedy"] in k_u and k_after > k_before
        assert _session_cc(cat, ex, rejection, drama, "keep")[1][0] < 1.0


@pytest.mark.parametrize("field, asked", [("genre", "Drama"), ("year", "1999"), ("director", "Steven Spielberg"),
                                          ("language", "French"), ("actor", "Tom Hanks"), ("writer", "Aaron Sorkin")])
def test_every_rule_user_rejection_reason(cat_ex, field, asked):
    """For every field the rule user can reject on, in every reject template: the film's own value it
    names leaves E(U) (drop), the value it asked for stays; a wanted person the film lacks ("Tom Hanks
    isn't in it") is the wish and stays."""
    from convsim.agents.crs.user import REACTIONS, rejection_reason
    from convsim.evaluation.crs.negation import user_concepts
    cat, ex = cat_ex
    checked = 0
    for film in _films(cat, field, asked)[:12]:
        reason = rejection_reason(film, {field: asked}, field)
        own = str(film.values(field)[0])
        for form in REACTIONS["reject"]:
            text = form.format(title=film.title, reason=reason)
            found = sorted([f, str(v)] for f, v in ex.extract(text))
            u = user_concepts(text, found)
            if [field, asked] in found:
                assert [field, asked] in u, text
            if field not in ("actor", "writer") and [field, own] in found:
                assert [field, own] not in u, text
                checked += 1
            # no value of the film's title is dropped as a "rejected attribute": only the reason's
            assert all(not rejected(text, v) for f, v in found if (f, v) != (field, own)), text
    if field not in ("actor", "writer"):
        assert checked > 0


@pytest.mark.parametrize("text, value", [
    ("Not Airplane!: that one is a comedy film and I asked for drama.", "Comedy"),
    ("Hmm, Up? No, it's directed by Pete Docter and I asked for Steven Spielberg.", "Pete Docter"),
    ("Up won't do, that one is from 2009 and I asked for 1999.", "2009"),
    ("Not Amelie: it's in French and I asked for English.", "French"),
    # the goal-driven LLM user's wording (agents/crs/user_goal.py _misfit_phrase) and free variants
    ("I'll pass on Up: it is an animation film, and I want drama films.", "Animation"),
    ("No thanks, that's more of a comedy, I'm after drama.", "Comedy"),
    ("I asked for Tom Hanks and this one stars Bruce Willis.", "Bruce Willis"),
])
def test_rejected_forms(text, value):
    assert rejected(text, value)


@pytest.mark.parametrize("text, value", [
    ("Not Airplane!: that one is a comedy film and I asked for drama.", "Drama"),
    ("Up won't do, Tom Hanks isn't in it.", "Tom Hanks"),
    ("Not Up: Steven Spielberg didn't direct it.", "Steven Spielberg"),
    ("I really enjoyed Up, it's an animation film.", "Animation"),      # a liked film described
    ("Up sounds good, it's a comedy.", "Comedy"),                       # an accepted film described
    ("No, it's drama I want.", "Drama"),                                # a cleft naming the wish
    ("Yes! It's exactly the comedy that I asked for.", "Comedy"),
    ("Not Up: that one is a comedy film. Actually, now I'd like comedy films.", "Comedy"),  # last mention
])
def test_not_rejected(text, value):
    assert not rejected(text, value)
