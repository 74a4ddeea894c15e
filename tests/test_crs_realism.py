"""evaluation/crs/realism.py: simulator realism figures that can fail. Each test injects the defect
a figure measures (a user naming a film never shown, a user ignoring the films named, shifts without
a bridge, one wording for every shift) and shows the figure moves."""

from convsim.evaluation.crs.realism import realism_metrics


def user(turn, *, mentioned=(), own=None, reaction=None, shift=None, stage="details", text="x"):
    return {"speaker": "user", "turn": turn, "text": text,
            "meta": {"mentioned_ids": list(mentioned), "own_example": own, "reaction": reaction,
                     "shift": shift, "stage": stage, "template": text, "constraints": {}}}


def system(turn, named=()):
    return {"speaker": "system", "turn": turn, "text": "", "meta": {"mentioned_ids": list(named)}}


def test_unseen_mentions_are_counted():
    good = [user(1, mentioned=["A"], own="A"), system(1, ["B"]), user(2, mentioned=["B"])]
    bad = [user(1), system(1, ["B"]), user(2, mentioned=["Skyfall"])]
    assert realism_metrics(good)["realism_unseen_mention_share"] == 0.0
    assert realism_metrics(bad)["realism_unseen_mention_share"] == 1.0
    assert realism_metrics([user(1)])["realism_unseen_mention_share"] is None


def test_a_user_that_ignores_the_films_named_has_reaction_rate_zero():
    reacts = [user(1), system(1, ["B"]), user(2, reaction={"kind": "reject"}), system(2, []),
              user(3, reaction={"kind": "ask"})]
    ignores = [user(1), system(1, ["B"]), user(2, reaction=None)]
    assert realism_metrics(reacts)["realism_reaction_rate"] == 1.0
    assert realism_metrics(ignores)["realism_reaction_rate"] == 0.0


def test_bridge_share_and_forms():
    def shift(turn, kept, text):
        return user(turn, stage="shift", text=text,
                    shift={"bridge_kept": kept, "bridge_value": "Drama", "dropped": [], "from_focus": ["genre", "X"]})
    varied = [shift(2, True, "Speaking of Drama, I want 1999."), shift(3, True, "New idea: 2005.")]
    same = [shift(2, False, "I'd now rather see 1999."), shift(3, False, "I'd now rather see 2005.")]
    assert realism_metrics(varied)["realism_bridge_share"] == 1.0
    assert realism_metrics(same)["realism_bridge_share"] == 0.0
    assert realism_metrics(varied)["realism_forms"] == 1.0
    assert realism_metrics(same)["realism_forms"] == 0.5


def test_a_line_said_again_right_away_is_a_form_repeat():
    def waver(turn, text):
        return user(turn, stage="contradiction", text=text)
    again = [waver(3, "Hmm, maybe not 1992... no, actually 1992 it is."),
             waver(4, "Hmm, maybe not 1992... no, actually 1992 it is.")]
    varied = [waver(3, "Hmm, maybe not 1992... no, actually 1992 it is."),
              waver(4, "I'm having second thoughts about 1992. No, I'll stay with 1992."),
              waver(5, "Hmm, maybe not 1992... no, actually 1992 it is.")]  # not consecutive: allowed
    assert realism_metrics(again)["realism_form_repeats"] == 1.0
    assert realism_metrics(varied)["realism_form_repeats"] == 0.0
    assert realism_metrics(again[:1])["realism_form_repeats"] is None


def test_a_reaction_counts_as_said_only_when_the_turn_names_its_film():
    said = [user(1), system(1, ["B"]), user(2, mentioned=["B"], reaction={"kind": "reject", "film": "B"})]
    unsaid = [user(1), system(1, ["B"]), user(2, mentioned=[], reaction={"kind": "reject", "film": "B"})]
    assert realism_metrics(said)["realism_reaction_rate"] == 1.0
    assert realism_metrics(unsaid)["realism_reaction_rate"] == 0.0
