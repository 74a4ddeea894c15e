"""Simulator health (evaluation/crs/health.py): each figure moves when its defect is injected, and
the shipped simulator meets the health targets on a full-length session batch."""

import pytest

from convsim.agents.crs.user import UserSimParams, user_turn
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim import load_graph_module
from convsim.evaluation.crs.health import pooled_health, session_health, shift_changed_focus


def u(turn, constraints, n, shift=None, reaction=None):
    return {"speaker": "user", "turn": turn, "meta": {"turn": turn, "constraints": constraints,
                                                      "n_satisfying": n, "shift": shift,
                                                      "reaction": reaction}}


def s(*ids):
    return {"speaker": "system", "meta": {"mentioned_ids": list(ids)}}


def test_hand_computed_session_health():
    shift_same_anchor = {"from_focus": ["genre", "Drama"], "to_focus": ["actor", "A"],
                         "from_anchor": "m1", "to_anchor": "m1"}
    shift_old_value = {"from_focus": ["actor", "A"], "to_focus": ["genre", "Drama"],
                       "from_anchor": "m1", "to_anchor": "m2"}
    tr = [u(1, {"genre": "Drama"}, 10), s("a", "b"),
          u(2, {"genre": "Drama", "actor": "A"}, 1, shift=shift_same_anchor), s("a"),
          u(3, {"genre": "Drama", "actor": "A"}, 2, shift=shift_old_value,
            reaction={"accepted": "a"}), s("a", "c")]
    h = session_health(tr)
    assert h["health_candidates_ge3_share"] == pytest.approx(1 / 3)
    assert h["health_candidates_min"] == 1
    assert h["health_repeat_rate"] == pytest.approx(2 / 5)  # a named 3 times: 2 repeats of 5
    assert h["health_n_shifts"] == 2
    assert h["health_shifts_anchor_changed"] == 1
    # the second shift asks for genre=Drama, which the user already required
    assert h["health_shifts_focus_changed"] == 1
    assert h["health_first_reaction_turn"] == 3
    pooled = pooled_health([{"transcript": tr}, {"transcript": tr[:2]}])
    assert pooled["pairing"] == "reactive" and pooled["pairing_first_divergence_turn_min"] == 3
    assert pooled["health_repeat_rate"] == pytest.approx(2 / 7)
    assert pooled_health([{"transcript": tr[:2]}])["pairing"] == "strict"


def test_focus_change_needs_a_new_value():
    ev = {"from_focus": ["genre", "Drama"], "to_focus": ["genre", "Drama"]}
    assert not shift_changed_focus(ev, {})
    ev = {"from_focus": ["genre", "Drama"], "to_focus": ["actor", "A"]}
    assert not shift_changed_focus(ev, {"actor": "A"})
    assert shift_changed_focus(ev, {"actor": "B"})


@pytest.fixture(scope="module")
def catalog():
    return load_movie_catalog()


def test_min_candidates_is_honoured_at_every_turn(catalog):
    for min_candidates in (5, 12):
        p = UserSimParams(min_candidates=min_candidates, shift_prob=0.5)
        for seed in range(6):
            state = None
            for t in range(1, 21):
                out = user_turn(state, turn=t, seed=seed, catalog=catalog, params=p)
                state = out.state
                if out.meta["shift"]:
                    assert out.meta["n_satisfying"] >= min_candidates


def test_targets_are_hidden_and_follow_the_shifts(catalog):
    p = UserSimParams(accept_title_prob=1.0)
    for seed in range(6):
        state, hidden, said, shifted = None, None, [], False
        for t in range(1, 21):
            out = user_turn(state, turn=t, seed=seed, catalog=catalog, params=p, hidden=hidden)
            state, hidden = out.state, out.hidden
            said.append(out.template)
            assert "targets" not in state, "the hidden targets are in no state an agent reads"
            assert out.meta["anchor"] not in hidden["targets"]
            shifted = shifted or out.meta["shift_event"]
            if shifted:  # after a shift, the targets are films that satisfy the new preference
                fitting = {m.id for m in catalog.search(out.meta["constraints"])}
                assert set(hidden["targets"]) <= fitting
        assert shifted and 1 <= len(hidden["targets"]) <= 5
        for target in hidden["targets"]:  # never named by a user the system showed nothing
            assert not any(catalog.by_id[target].title in text for text in said)


def test_health_targets_on_50_sessions_of_20_turns():
    """Done means: >= 90% of recommender turns with >= 3 candidates, < 20% repeated
    recommendations, every shift changes the focus value (template CRS, model none)."""
    module = load_graph_module("crs_shift")
    p = module.Params(n_turns=20, judge=False, topic_mode="keyword")
    records = []
    for init in module.sessions(p, None):
        ctx = module.Context(params=p, seed=int(init["session_id"][1:]), session_id=init["session_id"])
        records.append(module.graph.invoke({**init, "transcript": [], "turn_metrics": [],
                                            "dialogue_metrics": {}}, context=ctx))
    h = pooled_health(records)
    assert h["health_candidates_ge3_share"] >= 0.9
    assert h["health_repeat_rate"] < 0.2
    assert h["health_shifts_total"] > 50
    assert h["health_shifts_focus_changed"] == h["health_shifts_total"]
    assert h["health_shifts_anchor_changed"] == h["health_shifts_total"]
