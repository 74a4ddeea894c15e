"""evaluation/crs/adaptation.py: adaptation measured on the films named (issue 34). Each test
injects the defect a metric measures and shows the metric moves the right way."""

import pytest

from convsim.evaluation.crs.adaptation import (
    acceptance, adaptation_metrics, named_precision, satisfies, shift_adaptation, target_recall,
    turn_adapts,
)


class Film:
    def __init__(self, **fields):
        self.fields = fields

    def values(self, field):
        return tuple(self.fields.get(field, ()))


BY_ID = {
    "c1": Film(genre=["Comedy"], year=["1999"]), "c2": Film(genre=["Comedy"], year=["2005"]),
    "c3": Film(genre=["Comedy", "Drama"], year=["1999"]), "d1": Film(genre=["Drama"], year=["1999"]),
    "d2": Film(genre=["Drama"], year=["2001"]), "h1": Film(genre=["Horror"], year=["1999"]),
    **{f"x{i}": Film(genre=["Western"], year=["1950"]) for i in range(25)},
}


def user(turn, constraints, shift=False, reaction=None, mentioned=()):
    return {"speaker": "user", "turn": turn, "text": "",
            "meta": {"constraints": constraints, "shift_event": shift, "reaction": reaction,
                     "mentioned_ids": list(mentioned)}}


def system(turn, named, rec=None):
    return {"speaker": "system", "turn": turn, "text": "",
            "meta": {"mentioned_ids": list(named), "rec_ids": list(rec if rec is not None else named)}}


def session(replies, *, shift_at=3, reactions=None):
    """4 turns: Comedy, then at ``shift_at`` a shift to Drama; ``replies``: named films per turn."""
    out = []
    for t, named in enumerate(replies, start=1):
        c = {"genre": "Drama"} if t >= shift_at else {"genre": "Comedy"}
        out += [user(t, c, shift=t == shift_at, reaction=(reactions or {}).get(t)), system(t, named)]
    return out


def metrics(transcript, targets=(), window=2):
    return adaptation_metrics(transcript, BY_ID, set(targets), window=window, k=10)[0]


def test_satisfies_needs_every_constraint():
    assert satisfies(BY_ID["c3"].values, {"genre": "drama", "year": 1999})
    assert not satisfies(BY_ID["c1"].values, {"genre": "Comedy", "year": "2005"})
    assert not satisfies(None, {})  # off the catalog: satisfies nothing
    assert satisfies(BY_ID["h1"].values, {})


def test_following_the_shift_adapts_ignoring_it_does_not():
    follows = metrics(session([["c1"], ["c2"], ["d1"], ["d2"]]))
    ignores = metrics(session([["c1"], ["c2"], ["c1"], ["c2"]]))
    assert follows["adapt_shift_rate"] == 1.0 and follows["adapt_delay"] == 0
    assert ignores["adapt_shift_rate"] == 0.0 and ignores["adapt_delay"] is None
    late = metrics(session([["c1"], ["c2"], ["h1"], ["d1"]]))  # one turn late, inside W = 2
    assert late["adapt_shift_rate"] == 1.0 and late["adapt_delay"] == 1
    assert metrics(session([["c1"], ["c2"], ["h1"], ["d1"]]), window=1)["adapt_shift_rate"] == 0.0


def test_a_dump_of_titles_is_no_adaptation():
    dump = [f"x{i}" for i in range(24)] + ["d1"]
    m = metrics(session([["c1"], ["c2"], dump, ["c2"]]))
    assert m["adapt_shift_rate"] == 0.0
    assert m["named_precision"] < 0.2
    assert not turn_adapts(1, 25) and turn_adapts(1, 2) and not turn_adapts(0, 0)


def test_repeats_and_the_users_own_films_recommend_nothing():
    # the system names the user's own film (the parrot) and then repeats the same film every turn
    t = session([["c1"], ["c1"], ["d1"], ["d1"]])
    t[4]["meta"]["mentioned_ids"] = []  # (user turn 3 names nothing)
    t[4] = user(3, {"genre": "Drama"}, shift=True, mentioned=["d1"])
    m = metrics(t)
    assert m["adapt_shift_rate"] == 0.0
    assert m["named_precision"] == pytest.approx(1 / 4)  # only the first c1 is new and fits
    assert named_precision([0, 0], [0, 0]) is None


def test_precision_drops_with_films_that_do_not_fit():
    good = metrics(session([["c1"], ["c2"], ["d1"], ["d2"]]))["named_precision"]
    bad = metrics(session([["c1"], ["h1"], ["d1"], ["x1"]]))["named_precision"]
    assert good == 1.0 and bad == 0.5


def test_hit_rate_and_turns_to_accept_read_the_users_reaction():
    none = metrics(session([["c1"], ["c2"], ["d1"], ["d2"]]))
    accepted = metrics(session([["c1"], ["c2"], ["d1"], ["d2"]], reactions={3: {"accepted": "c2"}}))
    # never accepted: censored at T (4 turns, 3 judged), the slowest possible, never left out
    assert none["hit_rate"] == 0.0 and none["accepted_any"] == 0 and none["turns_to_accept"] == 4
    assert accepted["hit_rate"] == pytest.approx(1 / 3) and accepted["turns_to_accept"] == 2
    # accepting a film this system did not name is no hit for it
    other = metrics(session([["c1"], ["c2"], ["d1"], ["d2"]], reactions={3: {"accepted": "h1"}}))
    assert other["hit_rate"] == 0.0
    assert acceptance([True])["hit_rate"] is None  # one turn: no next user turn


def test_target_recall_reads_the_targets_valid_at_the_end():
    t = session([["c1"], ["c2"], ["d1"], ["d2"]])
    assert metrics(t, targets={"d2", "d1"})["target_recall_at_10"] == 0.5
    assert metrics(t, targets={"c1"})["target_recall_at_10"] == 0.0  # an old target named earlier
    assert metrics(t)["target_recall_at_10"] is None
    assert target_recall(["a", "b"], {"b"}, 1) == 0.0 and target_recall(["a", "b"], {"b"}, 2) == 1.0
    with pytest.raises(ValueError):
        target_recall(["a"], {"a"}, 0)


def test_shift_adaptation_without_shifts_is_none():
    assert shift_adaptation([], {}, 3)["rate"] is None
    with pytest.raises(ValueError):
        shift_adaptation([1], {}, 0)


def test_turns_to_accept_cannot_be_won_by_one_lucky_early_accept():
    """A gaming recommender (names a fixed list every turn) that one user accepts at turn 1 and nobody
    else ever does must not beat one every user accepts at turn 2: sessions without an accept count."""
    from statistics import mean
    lucky = [metrics(session([["c1"], ["c2"], ["d1"], ["d2"]], reactions={2: {"accepted": "c1"}}))] + \
        [metrics(session([["c1"], ["c2"], ["d1"], ["d2"]])) for _ in range(5)]
    steady = [metrics(session([["c1"], ["c2"], ["d1"], ["d2"]], reactions={3: {"accepted": "c2"}}))
              for _ in range(6)]
    assert mean(m["turns_to_accept"] for m in lucky) > mean(m["turns_to_accept"] for m in steady)


def test_a_session_the_user_ended_is_read_up_to_its_closing_turn():
    """A satisfied user accepts c2 in turn 3 and leaves; the recommender's reply to its goodbye (a
    misfit, no target) is no recommendation the user saw: it moves no metric; the accepted turn is
    judged."""
    t = session([["c1"], ["c2"], ["x1"]], shift_at=9, reactions={3: {"accepted": "c2"}})
    t[4]["meta"]["end_session"] = True
    m = metrics(t, targets={"c2"})
    assert m["hit_rate"] == pytest.approx(1 / 2) and m["turns_to_accept"] == 2
    assert m["named_precision"] == 1.0  # x1 (Western) of the closing reply is left out
    assert m["target_recall_at_10"] == 1.0  # the list the user accepted from, not the closing reply's
    # the defect: the same transcript read to the end, as a session of fixed length
    del t[4]["meta"]["end_session"]
    fixed = metrics(t, targets={"c2"})
    assert fixed["named_precision"] < 1.0 and fixed["target_recall_at_10"] == 0.0
    # it ended at its first accept: judged over the turns before, the accept counted, nothing censored
    quick = session([["c2"], ["x1"]], shift_at=9, reactions={2: {"accepted": "c2"}})
    quick[2]["meta"]["end_session"] = True
    q = metrics(quick, targets={"c2"})
    assert q["hit_rate"] == 1.0 and q["turns_to_accept"] == 1 and q["accepted_any"] == 1
    assert acceptance([True], last_judged=True)["hit_rate"] == 1.0
