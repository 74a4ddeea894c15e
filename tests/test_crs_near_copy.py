"""The echo flag sees near-copies of the user, not only its concepts (evaluation/crs/near_copy.py,
docs/crs_shift.md "The echo flag"): defects injected as light paraphrases of the simulator's own
utterances (words moved, inflected, a synonym, filler) and two real gemma3-270m restatements must
be flagged; an honest recommendation that names a new film and reuses a constraint word, and the
reference agents' own turns, must not."""
import pytest

from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.evaluation.crs.near_copy import NEAR_COPY, content_words, near_copy, stem
from convsim.evaluation.crs.nodes import TASSettings, echo_turn, turn_evaluation


@pytest.fixture(scope="module")
def cat_ex():
    cat = load_movie_catalog()
    return cat, ConceptExtractor(cat)


def _echo(cat_ex, user_text, reply, constraints, mentioned=(), earlier=()):
    cat, ex = cat_ex
    user = {"turn": 3, "text": user_text, "meta": {"constraints": constraints}}
    system = {"turn": 3, "text": reply, "meta": {"mentioned_ids": list(mentioned)}}
    m, _ = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings(), earlier_named=set(earlier))
    return m


def test_content_words_and_the_share_of_the_user_repeated():
    assert stem("comedies") == "comedy" and stem("starring") == "star" and stem("films") == "film"
    assert content_words("Sure thing! So you'd love more movies starring Tom Hanks, right?") == {"star", "tom", "hank"}
    # the user's words {writ(ten), ethan, coen}: all repeated, in another order and inflection
    assert near_copy("Any more films written by Ethan Coen you could suggest?",
                     "Okay! any more flick writing of Ethan Coen you could suggest, correct?") == 1.0
    assert near_copy("I'd now rather see thriller films.", "How about Heat?") == 0.0
    assert near_copy("Anything, really.", "Heat.") is None  # the user said no content word


# light paraphrases of simulator utterances: filler, pronouns, "films" -> "flick", "written by" ->
# "writing of", "drama" -> "dramatic", the last sentence first. The concept rule misses each.
PARAPHRASES = [
    ("Any more films written by Ethan Coen you could suggest?", {"writer": "Ethan Coen"},
     "Okay! any more flick writing of Ethan Coen you could suggest, correct?"),
    ("Just checking, do you have more drama films like that?", {"genre": "Drama"},
     "Okay! just checking, do you have more dramatic flick like that, correct?"),
    ("I'd now rather see films written by Quentin Tarantino. I don't care about Documentary anymore.",
     {"writer": "Quentin Tarantino"},
     "Sure thing, friend! So you don't care about Documentary anymore. you'd now rather see flick writing of "
     "Quentin Tarantino, right?"),
    # gemma3-270m asked to restate the customer (bench: few-shot, temperature 0), copied as said
    ("Any more films written by Ethan Coen you could suggest?", {"writer": "Ethan Coen"},
     "I'd like to see more films by Ethan Coen."),
    ("I liked the cast of E.T. the Extra-Terrestrial. Who else is good in science fiction films?",
     {"genre": "Science Fiction"}, "You liked the cast of E.T. the Extra-Terrestrial."),
]


@pytest.mark.parametrize("user_text, constraints, reply", PARAPHRASES)
def test_a_light_paraphrase_of_the_user_is_flagged(cat_ex, user_text, constraints, reply):
    m = _echo(cat_ex, user_text, reply, constraints)
    assert m["echo"] == 1 and m["near_copy"] >= NEAR_COPY
    # the concept rule alone (the flag before) misses it
    _, ex = cat_ex
    u = set(ex.extract(user_text))
    assert echo_turn(u, set(ex.extract(reply)), named_film=False) == 0


def test_an_honest_recommendation_reusing_a_constraint_word_is_not_flagged(cat_ex):
    user_text = "Any more films written by Ethan Coen you could suggest?"
    reply = "You might enjoy Fargo (1996), another film written by Ethan Coen."
    m = _echo(cat_ex, user_text, reply, {"writer": "Ethan Coen"}, mentioned=["Fargo"])
    assert m["echo"] == 0 and m["n_recommended_new"] == 1
    # named before, Fargo is no new recommendation, but the reply names a film of its own: no copy
    m = _echo(cat_ex, user_text, reply, {"writer": "Ethan Coen"}, mentioned=["Fargo"], earlier=["Fargo"])
    assert m["n_recommended_new"] == 0 and m["echo"] == 0
    # and a film's own attributes are not the user's values (half or more must be)
    _, ex = cat_ex
    reply = "For films written by Ethan Coen, a crime film from 1996 with Frances McDormand."
    assert echo_turn(set(ex.extract(user_text)), set(ex.extract(reply)), named_film=False,
                     near_copy=near_copy(user_text, reply)) == 0


@pytest.mark.parametrize("user_text, reply, mentioned, earlier", [
    # reference agents' own turns that recommend nothing new (configs/crs_reference.yaml, seed 7)
    ("I enjoyed the plot of Memories of Murder. Are there more films written by Bong Joon-ho like it?",
     'You might like "Memories of Murder". "The Blind Side" is another good one.',
     ["Memories of Murder", "The Blind Side"], []),                                              # titles_only
    ("To be clear, I'm after films written by Quentin Tarantino. What fits?",
     "You could watch Bowling for Columbine (2002), a documentary film directed by Michael Moore, starring "
     "Michael Moore; it fits films written by Quentin Tarantino.",
     ["Bowling for Columbine"], ["Bowling for Columbine"]),                                      # restating
    ("What other films starring Clint Eastwood have a story like Gran Torino?",
     'How about "Toy Story" or "The Host"?', ["Toy Story", "The Host"], []),                      # random
])
def test_reference_turns_that_recommend_nothing_new_are_not_near_copies(cat_ex, user_text, reply, mentioned, earlier):
    assert all(i in cat_ex[0].by_id for i in mentioned)
    assert _echo(cat_ex, user_text, reply, {}, mentioned=mentioned, earlier=earlier)["echo"] == 0


def test_near_copy_by_set_lookups_equals_the_pairwise_stem_match():
    """near_copy finds a matching reply word by set lookups; it must give what comparing every pair
    of stems with ``_match`` gives (equal, a shared 5-letter prefix, one a >= 4-letter prefix of the other)."""
    import random
    from convsim.evaluation.crs.near_copy import _match, content_words, near_copy
    words = ("drama dramatic romance romantic writ written writer star starring starr comedy comedies "
             "thriller thrill coen coens ethan action act actor acting anime animation nolan").split()
    rng = random.Random(3)
    for _ in range(2000):
        a = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        b = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        u, s = content_words(a), content_words(b)
        pairwise = sum(any(_match(w, x) for x in s) for w in u) / len(u) if u and s else None
        assert near_copy(a, b) == pairwise, (a, b)
