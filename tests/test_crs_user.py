"""The rule-based user simulator (agents/crs/user.py): determinism, shifts, reaction, paraphrase."""

import pytest

from convsim.agents.crs.user import (
    SEQUENTIAL_ORDER, UserSimParams, gold_concepts, paraphrase, user_turn,
)
from convsim.catalog.movies.catalog import load_movie_catalog
from convsim import ConvsimError
from doubles import ScriptedModel


@pytest.fixture(scope="module")
def catalog():
    return load_movie_catalog()


def simulate(catalog, seed, params, n_turns=20, titles_for_turn=None):
    state, turns = None, []
    for t in range(1, n_turns + 1):
        titles = titles_for_turn(t, state) if titles_for_turn else None
        out = user_turn(state, turn=t, seed=seed, catalog=catalog, params=params,
                        system_titles=titles)
        state = out.state
        turns.append(out)
    return turns


def test_same_seed_same_dialogue_and_different_seed_differs(catalog):
    p = UserSimParams()
    a = simulate(catalog, 11, p)
    b = simulate(catalog, 11, p)
    assert [t.template for t in a] == [t.template for t in b]
    assert [t.meta for t in a] == [t.meta for t in b]
    c = simulate(catalog, 12, p)
    assert [t.template for t in a] != [t.template for t in c]


def test_meta_has_the_documented_keys_every_turn(catalog):
    for out in simulate(catalog, 3, UserSimParams()):
        for key in ("focus_field", "focus_value", "shift_event", "shift", "constraints", "anchor",
                    "stage", "template"):
            assert key in out.meta
        assert out.meta["template"] == out.template
        assert out.meta["focus_field"] in SEQUENTIAL_ORDER


def test_forced_first_shift_and_follow_up(catalog):
    p = UserSimParams(shift_prob=0.0, contradiction_prob=0.0, details_per_anchor=4,
                      first_shift_turn=4)
    turns = simulate(catalog, 5, p, n_turns=8)
    stages = [t.meta["stage"] for t in turns]
    # opening, two details, forced shift at 4, follow-up, then 4 fresh detail questions
    assert stages == ["initial", "details", "details", "shift", "follow_up", "details",
                      "details", "details"]


def test_details_exhaustion_forces_a_shift(catalog):
    p = UserSimParams(shift_prob=0.0, contradiction_prob=0.0, details_per_anchor=2,
                      first_shift_turn=19)
    stages = [t.meta["stage"] for t in simulate(catalog, 5, p, n_turns=7)]
    assert stages == ["initial", "details", "details", "shift", "follow_up", "details", "details"]


@pytest.mark.parametrize("seed", range(8))
def test_shift_events_are_well_formed(catalog, seed):
    turns = simulate(catalog, seed, UserSimParams(), n_turns=20)
    shifts = [t.meta["shift"] for t in turns if t.meta["shift_event"]]
    assert shifts, "20 turns with the original's defaults always hold a shift (forced at 12)"
    prev_anchor, prev_constraints = None, {}
    for t in turns:
        meta = t.meta
        if meta["shift_event"]:
            ev = meta["shift"]
            assert ev["turn"] == meta["turn"]
            assert ev["to_focus"] == [meta["focus_field"], meta["focus_value"]]
            assert ev["from_focus"][0] != ev["to_focus"][0], "a shift changes the focus field"
            anchor = catalog.by_id[ev["from_anchor"]]
            bridge = (ev["bridge_field"], ev["bridge_value"])
            assert bridge[1] in anchor.values(bridge[0]) or list(bridge) == ev["from_focus"]
            if ev["bridge_kept"]:
                assert meta["constraints"][ev["bridge_field"]] == ev["bridge_value"]
            else:
                dropped = " or ".join(str(v) for _, v in ev["dropped"])
                asked = t.template.replace(dropped, "") if dropped else t.template  # the drop tail names it
                assert ev["bridge_value"] not in asked, "an unkept bridge is not asked for"
            assert meta["constraints"][meta["focus_field"]] == meta["focus_value"]
            assert len(catalog.search(meta["constraints"])) >= UserSimParams().min_candidates
            assert meta["n_satisfying"] == len(catalog.search(meta["constraints"]))
            assert ev["from_anchor"] == prev_anchor
            assert ev["to_anchor"] != ev["from_anchor"], "an anchor is not kept across a shift"
            before = prev_constraints | {ev["from_focus"][0]: ev["from_focus"][1]}
            assert before.get(ev["to_focus"][0]) != ev["to_focus"][1], "the focus value is new"
        prev_constraints = dict(meta["constraints"])
        prev_anchor = meta["anchor"]
    for i, t in enumerate(turns[:-1]):
        if t.meta["shift_event"]:
            assert turns[i + 1].meta["stage"] == "follow_up"


def test_anchor_satisfies_constraints(catalog):
    for t in simulate(catalog, 21, UserSimParams(contradiction_prob=0.0)):
        movie = catalog.by_id[t.meta["anchor"]]
        if t.meta["stage"] != "contradiction":
            assert all(v in movie.values(f) for f, v in t.meta["constraints"].items())


def test_sequential_bias_one_takes_the_next_field(catalog):
    p = UserSimParams(sequential_bias=1.0, shift_prob=0.0, contradiction_prob=0.0,
                      first_shift_turn=3)
    turns = simulate(catalog, 9, p, n_turns=4)
    ev = turns[2].meta["shift"]
    assert ev["from_focus"][0] == "genre"
    # next after genre in actor > director > genre > writer > language > year (unless the bridge's
    # films lack a writer, when the next field with values is used)
    assert ev["to_focus"][0] in ("writer", "language")


def test_shift_schedule_never_depends_on_the_system(catalog):
    p = UserSimParams(accept_title_prob=1.0)
    quiet = simulate(catalog, 4, p)

    def chatty(turn, state):  # a system naming every film that fits the user's constraints
        return [m.id for m in catalog.search(state["constraints"])][:5] if state else None

    reacting = simulate(catalog, 4, p, titles_for_turn=chatty)
    assert [t.meta["stage"] for t in quiet] == [t.meta["stage"] for t in reacting]
    assert [t.meta["turn"] for t in quiet if t.meta["shift_event"]] == \
        [t.meta["turn"] for t in reacting if t.meta["shift_event"]]
    first = next(i for i, t in enumerate(reacting) if (t.meta["reaction"] or {}).get("accepted"))
    accepted = reacting[first].meta["reaction"]["accepted"]
    assert reacting[first].meta["anchor"] == accepted
    assert reacting[first].template.startswith(catalog.by_id[accepted].title)
    assert accepted in reacting[first].meta["mentioned_ids"]


def test_no_reaction_when_probability_zero_or_titles_do_not_fit(catalog):
    p0 = UserSimParams(accept_title_prob=0.0)
    all_ids = [m.id for m in catalog.movies]
    turns = simulate(catalog, 4, p0, titles_for_turn=lambda t, s: all_ids[:10])
    assert not any(t.meta["reaction"] for t in turns)
    assert [t.template for t in turns] == [t.template for t in simulate(catalog, 4, p0)]


def test_wrong_start_and_correction(catalog):
    p = UserSimParams(wrong_genre_prob=1.0, contradiction_prob=1.0, shift_prob=0.0)
    turns = simulate(catalog, 2, p, n_turns=3)
    first = turns[0].meta
    assert first["constraints"]["genre"] != first["true_genre"]
    assert first["constraints"]["genre"].lower() in turns[0].template.lower()
    fix = turns[1].meta
    assert fix["stage"] == "contradiction" and fix["contradiction"] == "correct_genre"
    assert fix["constraints"]["genre"] == fix["true_genre"]
    assert turns[2].meta["contradiction"] != "correct_genre"


def test_gold_concepts():
    assert gold_concepts({"constraints": {"genre": "Drama", "year": 1999}}) == \
        {("genre", "Drama"), ("year", "1999")}


@pytest.mark.parametrize("bad", [{"shift_prob": 1.5}, {"first_shift_turn": 1},
                                 {"details_per_anchor": 0}])
def test_invalid_params(bad):
    with pytest.raises(ConvsimError):
        UserSimParams(**bad)


PROMPT = "History:\n{history}\nRewrite: {template}"


def test_paraphrase_accepts_a_faithful_answer():
    model = ScriptedModel('"Got any drama films with Tom Hanks?"')
    text, rec = paraphrase(model, PROMPT, "Show me drama films starring Tom Hanks.", [],
                           ["Drama", "Tom Hanks"])
    assert text == "Got any drama films with Tom Hanks?"
    assert rec == {"ok": True, "raw": '"Got any drama films with Tom Hanks?"', "reason": None}
    assert "Show me drama films starring Tom Hanks." in model.prompts[0]


@pytest.mark.parametrize("answer, reason", [
    ("", "empty"), ("   ", "empty"), ("USER: hi\nSYSTEM: hello", "more than one"),
    ("Got any good films?", "drops"), ("x" * 500, "longer"),
])
def test_paraphrase_falls_back_to_template_on_garbage(answer, reason):
    template = "Show me drama films starring Tom Hanks."
    text, rec = paraphrase(ScriptedModel(answer), PROMPT, template, [], ["Drama", "Tom Hanks"])
    assert text == template
    assert rec["ok"] is False and rec["raw"] == answer and reason in rec["reason"]


def test_the_values_a_paraphrase_must_keep_are_in_a_fixed_order(monkeypatch):
    # extract() gives a set, whose order follows string hashing: the paraphrase prompt and its
    # recorded reason differed between PYTHONHASHSEED values
    from types import SimpleNamespace

    from convsim import load_graph_module
    mod = load_graph_module("crs_shift")
    params = mod.Params(n_turns=2, user_llm="paraphrase")
    ctx = mod.Context(params=params, models={"user": ScriptedModel("unused")}, seed=1)
    ctx.extractor = SimpleNamespace(extract=lambda text: [("genre", "Mystery"), ("genre", "Biography"),
                                                         ("actor", "Mystery")])
    seen = []
    monkeypatch.setattr(mod, "paraphrase", lambda model, prompt, template, history, values:
                        (seen.append(values) or template, {"ok": True}))
    init = next(iter(mod.sessions(params, ctx)))
    mod.user({"transcript": [], **init}, SimpleNamespace(context=ctx))
    assert seen == [["Biography", "Mystery"]]


def test_no_contradiction_or_shift_line_is_said_twice_in_a_row(catalog):
    # before: "Hmm, maybe not films from 1992... no, actually films from 1992 are exactly what I want."
    # in turns 13, 14 and 15 of seed 7 (5 of 242 such turns over 40 seeds repeated the previous one)
    from convsim.evaluation.crs.realism import realism_metrics
    repeats = []
    for seed in range(40):
        turns = simulate(catalog, seed, UserSimParams(accept_title_prob=0))
        transcript = [{"speaker": "user", "turn": t.meta["turn"], "text": t.template, "meta": t.meta}
                      for t in turns]
        repeats.append(realism_metrics(transcript)["realism_form_repeats"])
    assert all(r in (None, 0.0) for r in repeats), repeats
    assert sum(r is not None for r in repeats) >= 30  # the figure was computed, not skipped
