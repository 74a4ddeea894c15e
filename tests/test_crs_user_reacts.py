"""The simulated movie-seeker reacts to the films named to it (issue 34): a recommended target that
fits its current preference changes its next turn; it rejects a film that does not fit with a reason
from the film's attributes; it asks again when nothing was named; it never names a film it was not
shown (unless it states it as its own example); strict pairing keeps its turns the same."""

import pytest

from convsim import load_graph_module
from convsim.agents.crs.user import UserSimParams, rejection_reason, user_turn
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor


@pytest.fixture(scope="module")
def catalog():
    return load_movie_catalog()


def first_turns(catalog, seed, params, upto):
    state, hidden = None, None
    for t in range(1, upto + 1):
        out = user_turn(state, turn=t, seed=seed, catalog=catalog, params=params, hidden=hidden)
        state, hidden = out.state, out.hidden
    return state, hidden


def next_turn(catalog, seed, params, state, hidden, turn, titles):
    return user_turn(state, turn=turn, seed=seed, catalog=catalog, params=params, hidden=hidden,
                     system_titles=titles)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_recommended_target_that_fits_changes_the_next_turn(catalog, seed):
    p = UserSimParams(shift_prob=0.0, contradiction_prob=0.0, first_shift_turn=3)
    state, hidden = first_turns(catalog, seed, p, 3)  # the first shift is at turn 3
    fitting_targets = [t for t in hidden["targets"]
                       if t in {m.id for m in catalog.search(state["constraints"])}]
    assert fitting_targets, "after a shift the targets satisfy the new preference"
    target = fitting_targets[0]
    other = next(m.id for m in catalog.search(state["constraints"])
                 if m.id not in hidden["targets"] and m.id != state["anchor"])
    found = next_turn(catalog, seed, p, state, hidden, 4, [target])
    plain = next_turn(catalog, seed, p, state, hidden, 4, [other])
    assert found.template != plain.template
    assert found.meta["reaction"]["kind"] == "accept_target" and found.meta["satisfied"]
    assert catalog.by_id[target].title in found.template
    assert found.hidden["found"] == [target] and found.meta["anchor"] == target
    # the defect: the same target named to a non-reactive (strict) user changes nothing said
    strict = UserSimParams(shift_prob=0.0, contradiction_prob=0.0, first_shift_turn=3, reactive=False)
    s_state, s_hidden = first_turns(catalog, seed, strict, 3)
    a = next_turn(catalog, seed, strict, s_state, s_hidden, 4, [target])
    b = next_turn(catalog, seed, strict, s_state, s_hidden, 4, [other])
    assert a.template == b.template and a.meta["reaction"] is None
    assert a.meta["would_react"]["kind"] == "accept_target"  # logged for hit_rate, not said


def test_a_film_that_does_not_fit_is_rejected_with_a_reason_from_its_attributes(catalog):
    p = UserSimParams(shift_prob=0.0, contradiction_prob=0.0)
    state, hidden = first_turns(catalog, 5, p, 1)
    genre = state["constraints"]["genre"]
    misfit = next(m for m in catalog.movies if genre not in m.values("genre"))
    out = next_turn(catalog, 5, p, state, hidden, 2, [misfit.id])
    assert out.meta["reaction"]["kind"] == "reject"
    own = misfit.values("genre")[0].lower()
    assert f"{own} film and I asked for {genre.lower()}" in out.template
    assert rejection_reason(misfit, {"year": "1800"}) == f"that one is from {misfit.values('year')[0]} and I asked for 1800"
    assert rejection_reason(misfit, {"genre": misfit.values("genre")[0]}) is None
    asked = next_turn(catalog, 5, p, state, hidden, 2, [])
    assert asked.meta["reaction"]["kind"] == "ask" and asked.template != out.template


@pytest.mark.parametrize("agent", ["template", "random", "oracle", "parrot", "echo_plus_fixed_film"])
def test_the_user_never_names_a_film_it_was_not_shown(agent):
    module = load_graph_module("crs_shift")
    p = module.Params(n_turns=20, crs_agent=agent, judge=False, topic_mode="keyword")
    extractor = ConceptExtractor(load_movie_catalog())
    for init in list(module.sessions(p, None))[:4]:
        ctx = module.Context(params=p, seed=int(init["session_id"][1:]), session_id=init["session_id"])
        out = module.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                  context=ctx)
        shown, own = set(), set()
        for e in out["transcript"]:
            if e["speaker"] == "system":
                shown.update(e["meta"]["mentioned_ids"])
                continue
            if e["meta"].get("own_example"):
                own.add(e["meta"]["own_example"])
            said = set(extractor.extract_titles(e["text"])) | set(e["meta"]["mentioned_ids"])
            assert said <= shown | own, (agent, e["turn"], e["text"])
        assert "targets" not in out["user_state"]


def test_simulator_checks_read_titles_as_films_not_words():
    """A rejection naming "2001: A Space Odyssey" is no retraction of the year 2001, and "Good Bye
    Lenin!" no farewell; the same words without the title still trip the checks."""
    from convsim.agents.crs.fidelity import _check_ending, _check_profile

    def state(text, mentioned):
        return {"transcript": [
            {"speaker": "user", "turn": 8, "text": text, "meta": {"stage": "details", "constraints": {"year": "2001"},
                                                                  "mentioned_ids": mentioned}},
            {"speaker": "user", "turn": 9, "text": "More?", "meta": {"stage": "details", "constraints": {}}}]}
    said = "Not 2001: A Space Odyssey: that one is from 1968 and I asked for 2001."
    assert _check_profile(state(said, ["2001: A Space Odyssey"])) == []
    assert _check_profile(state("Not 2001, please.", []))
    assert _check_ending(state("Good Bye Lenin! sounds good.", ["Good Bye Lenin!"])) == []
    assert _check_ending(state("Good bye, that's all.", []))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_satisfied_user_may_end_the_session(catalog, seed):
    """Having accepted a hidden target (a film that fits its preference and its taste), the user thanks
    and leaves with ``end_when_satisfied_prob``; a film that is no target, or probability 0, or the
    strict user, never ends it."""
    base = dict(shift_prob=0.0, contradiction_prob=0.0, first_shift_turn=3)
    leaves, stays = UserSimParams(**base, end_when_satisfied_prob=1.0), UserSimParams(**base)
    state, hidden = first_turns(catalog, seed, leaves, 3)
    target = next(t for t in hidden["targets"] if t in {m.id for m in catalog.search(state["constraints"])})
    other = next(m.id for m in catalog.search(state["constraints"])
                 if m.id not in hidden["targets"] and m.id != state["anchor"])
    ended = next_turn(catalog, seed, leaves, state, hidden, 4, [target])
    assert ended.meta["end_session"] and ended.meta["stage"] == "end" and ended.meta["satisfied"]
    assert catalog.by_id[target].title in ended.template
    assert not next_turn(catalog, seed, leaves, state, hidden, 4, [other]).meta["end_session"]
    assert not next_turn(catalog, seed, stays, state, hidden, 4, [target]).meta["end_session"]
    strict = UserSimParams(**base, end_when_satisfied_prob=1.0, reactive=False)
    s_state, s_hidden = first_turns(catalog, seed, strict, 3)
    s = next_turn(catalog, seed, strict, s_state, s_hidden, 4, [target])
    plain = next_turn(catalog, seed, UserSimParams(**base, reactive=False), s_state, s_hidden, 4, [target])
    assert not s.meta["end_session"] and s.template == plain.template and s.meta == plain.meta


def _run(module, **params):
    p = module.Params(judge=False, topic_mode="keyword", **params)
    out = []
    for init in list(module.sessions(p, None))[:3]:
        ctx = module.Context(params=p, seed=int(init["session_id"][1:]), session_id=init["session_id"])
        out.append(module.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                       context=ctx))
    return out


def test_the_graph_stops_when_the_user_ends_and_strict_pairing_is_unchanged():
    module = load_graph_module("crs_shift")
    ended = _run(module, n_turns=12, crs_agent="oracle", end_when_satisfied_prob=1.0)
    assert any(len(o["transcript"]) < 24 for o in ended)
    for o in ended:
        users = [e for e in o["transcript"] if e["speaker"] == "user"]
        assert o["transcript"][-1]["speaker"] == "system"  # the recommender's closing reply
        assert [u["meta"]["end_session"] for u in users[:-1]] == [False] * (len(users) - 1)
        if users[-1]["meta"]["end_session"]:
            first = next(u["turn"] for u in users if (u["meta"]["reaction"] or {}).get("accepted"))
            assert o["dialogue_metrics"]["turns_to_accept"] == first - 1
            assert o["dialogue_metrics"]["accepted_any"] == 1
            assert o["dialogue_metrics"]["n_turns"] == users[-1]["turn"]
    # strict pairing: the non-reactive user never ends; its turns are those of end_when_satisfied_prob 0
    for prob_1, prob_0 in zip(_run(module, n_turns=12, crs_agent="oracle", user_mode="strict",
                                   end_when_satisfied_prob=1.0),
                              _run(module, n_turns=12, crs_agent="oracle", user_mode="strict")):
        assert len(prob_1["transcript"]) == 24
        assert [e["text"] for e in prob_1["transcript"]] == [e["text"] for e in prob_0["transcript"]]
        assert prob_1["dialogue_metrics"]["turns_to_accept"] == prob_0["dialogue_metrics"]["turns_to_accept"]
