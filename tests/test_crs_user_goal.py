"""The LLM user that writes its turn from its goal and its reaction (agents/crs/user_goal.py, model
role ``user``): its prompt carries the user's preference, its planned act and its reaction with the
film's catalog attributes, never the rule template's sentence; an answer that names a film the user
was never shown, drops its reaction or is garbage falls back to the rule turn, flagged and counted.
Offline: the model is a scripted double (tests/doubles.py)."""

import re

import pytest

from convsim import load_graph_module
from convsim.agents.crs.user import UserSimParams, user_turn
from convsim.agents.crs.user_goal import goal_turn
from crs_fixtures import catalog, extractor  # noqa: F401  (fixtures)
from doubles import ScriptedModel, goal_answer

PROMPT = open(load_graph_module("crs_shift").PROMPTS / "user_goal.txt", encoding="utf-8").read()


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 12]


def rejecting_turn(catalog, seed=5):
    """Turn 2 of a user whose recommender named a film that does not fit its genre."""
    p = UserSimParams(first_shift_turn=3, shift_prob=0.0, contradiction_prob=0.0)
    first = user_turn(None, turn=1, seed=seed, catalog=catalog, params=p)
    genre = first.state["constraints"]["genre"]
    misfit = next(m for m in catalog.movies if genre not in m.values("genre"))
    second = user_turn(first.state, turn=2, seed=seed, catalog=catalog, params=p, system_titles=[misfit.id],
                       hidden=first.hidden)
    history = [("user", first.template), ("system", f"How about {misfit.title}?")]
    return p, first, second, misfit, history


def test_the_prompt_carries_the_goal_and_the_reaction_not_the_template(catalog, extractor):
    p, first, out, misfit, history = rejecting_turn(catalog)
    assert out.meta["reaction"]["kind"] == "reject"
    model = ScriptedModel(goal_answer)
    goal_turn(model, PROMPT, out, catalog, extractor, history)
    prompt = model.prompts[0]
    genre = out.meta["constraints"]["genre"]
    own_genre = misfit.values("genre")[0].lower()
    assert f"What you want now: {genre.lower()} films" in prompt  # the preference
    assert f"Turn down {misfit.title}" in prompt  # the reaction ...
    assert f"it is a {own_genre} film, and you want {genre.lower()} films" in prompt  # ... from the catalog
    assert f"named to you so far: {misfit.title}" in prompt  # the films it was shown
    # the rule turn's words are not in it: neither the whole template nor any of its sentences
    assert out.template not in prompt
    assert not [s for s in sentences(out.template) if s in prompt], out.template
    assert "I asked for" not in prompt  # the rule reason's wording
    # the control: the paraphrase path's prompt is the template to rephrase (what this test rejects)
    from convsim.agents.crs.user import paraphrase
    para = ScriptedModel(out.template)
    paraphrase(para, open(load_graph_module("crs_shift").PROMPTS / "user_paraphrase.txt").read(),
               out.template, history, [])
    assert [s for s in sentences(out.template) if s in para.prompts[0]]

    # a shift: the new focus and the bridge it keeps, not the shift template
    state, hidden = out.state, out.hidden
    shift = user_turn(state, turn=3, seed=5, catalog=catalog, params=p, system_titles=[], hidden=hidden)
    assert shift.meta["stage"] == "shift"
    model = ScriptedModel(goal_answer)
    goal_turn(model, PROMPT, shift, catalog, extractor, history)
    ev = shift.meta["shift"]
    assert str(ev["to_focus"][1]) in model.prompts[0] and "Change" in model.prompts[0]
    assert not [s for s in sentences(shift.template) if s in model.prompts[0]], shift.template


def test_a_faithful_answer_is_said_and_its_films_are_read_from_its_text(catalog, extractor):
    _, _, out, misfit, history = rejecting_turn(catalog)
    text, meta = goal_turn(ScriptedModel(goal_answer), PROMPT, out, catalog, extractor, history)
    assert meta["paraphrase"]["ok"] is True and meta["paraphrase"]["mode"] == "goal"
    assert text != out.template and misfit.title in text
    assert meta["mentioned_ids"] == extractor.extract_titles(text)
    assert meta["template"] == out.template  # the rule turn kept beside what was said


def _unseen_film(catalog, allowed):
    return next(m for m in catalog.movies if m.id not in allowed and len(m.title) > 8
                and m.title[0].isupper() and " " in m.title)


@pytest.mark.parametrize("kind", ["unseen_film", "empty", "two_turns", "no_reaction", "new_preference", "nul"])
def test_a_bad_answer_falls_back_to_the_rule_turn(catalog, extractor, kind):
    _, _, out, misfit, history = rejecting_turn(catalog)
    good = goal_answer(_prompt_of(out, catalog, extractor, history))
    allowed = set(out.state["shown"]) | set(out.state["introduced"])
    answer = {"unseen_film": f"{good} Or maybe {_unseen_film(catalog, allowed).title}?",
              "empty": "", "two_turns": f"USER: {good}\nSYSTEM: Sure.",
              "no_reaction": good.replace(misfit.title, "that one"),
              "new_preference": f"{good} I only watch westerns from 1962.", "nul": f"{good}\x00"}[kind]
    text, meta = goal_turn(ScriptedModel(answer), PROMPT, out, catalog, extractor, history)
    assert text == out.template and meta["mentioned_ids"] == out.meta["mentioned_ids"]
    record = meta["paraphrase"]
    assert record["ok"] is False and record["raw"] == answer and record["reason"]
    if kind == "unseen_film":
        assert record["reason"].startswith("names a film it was never shown")


def _prompt_of(out, catalog, extractor, history):
    model = ScriptedModel(goal_answer)
    goal_turn(model, PROMPT, out, catalog, extractor, history)
    return model.prompts[0]


def _sessions(module, model, n=2, **params):
    p = module.Params(n_turns=8, judge=False, topic_mode="keyword", **params)
    out = []
    for init in list(module.sessions(p, None))[:n]:
        ctx = module.Context(params=p, seed=int(init["session_id"][1:]), session_id=init["session_id"],
                             models={"user": model})
        out.append(module.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                       context=ctx))
    return out


def test_in_the_graph_the_model_writes_the_turns_and_a_user_naming_unseen_films_is_counted():
    module = load_graph_module("crs_shift")
    for o in _sessions(module, ScriptedModel(goal_answer)):
        users = [e for e in o["transcript"] if e["speaker"] == "user"]
        assert all(u["meta"]["paraphrase"]["ok"] for u in users), [u["meta"]["paraphrase"] for u in users]
        assert all(u["text"] != u["meta"]["template"] for u in users)
        m = o["dialogue_metrics"]
        assert m["realism_user_model_fallback_share"] == 0.0 and m["realism_user_model_unseen_rejected"] == 0
        assert m["realism_unseen_mention_share"] in (None, 0.0) and m["realism_reaction_rate"] > 0
        for u in users:  # every reaction it had is said: its film is named in the model's text
            reaction = u["meta"]["reaction"] or {}
            if reaction.get("kind") in ("accept", "accept_target", "reject", "repeat"):
                assert reaction["film"] in u["meta"]["mentioned_ids"]
        assert not [f for f in module.simulator_checks(o) if f["check"] == "user_model_failed"]
    # the defect: a user model that adds a film nobody named to every turn
    def lie(prompt):  # a catalog film the prompt does not allow
        allowed = prompt.split("name no film other than these: ", 1)[1].split("; ask for nothing")[0]
        film = next(t for t in ("Skyfall", "The Godfather", "Mission: Impossible – Fallout") if t not in allowed)
        return f"{goal_answer(prompt)} Have you seen {film}?"
    liar = ScriptedModel(lie)
    for o in _sessions(module, liar):
        users = [e for e in o["transcript"] if e["speaker"] == "user"]
        m = o["dialogue_metrics"]
        assert m["realism_user_model_unseen_rejected"] == len(users)
        assert m["realism_user_model_fallback_share"] == 1.0 and m["user_paraphrase_fallbacks"] == len(users)
        assert all(u["text"] == u["meta"]["template"] for u in users)  # the rule turns were said
        assert m["realism_unseen_mention_share"] in (None, 0.0)
        assert [f for f in module.simulator_checks(o) if f["check"] == "user_model_failed"]
