"""The catalog-grounded CRS (agents/crs/recommender.py) with the project catalog and extractor."""

import pytest

from convsim.agents.crs.recommender import (
    CRSParams, crs_turn, new_crs_state, retrieve, update_constraints,
)
from crs_fixtures import catalog, extractor  # noqa: F401  (fixtures)
from doubles import ScriptedModel


def update(state, text, extractor, turn=1):
    out = update_constraints(state, text, extractor.extract(text), turn)
    out.pop("update")
    return out


def test_constraints_are_replaced_per_field_and_negations_remove(extractor):
    s = update(new_crs_state(), "I'd like a drama starring Tom Hanks.", extractor)
    assert s["constraints"] == {"genre": ["Drama"], "actor": ["Tom Hanks"]}
    s = update(s, "Actually, show me comedy films instead.", extractor, turn=2)
    assert s["constraints"] == {"genre": ["Comedy"], "actor": ["Tom Hanks"]}
    s = update(s, "Hmm, forget what I said about Tom Hanks; that doesn't matter.", extractor, turn=3)
    assert s["constraints"] == {"genre": ["Comedy"]}
    s = update(s, "I don't care about comedy anymore, surprise me.", extractor, turn=4)
    assert s["constraints"] == {}


def test_last_mention_decides_and_corrections(extractor):
    s = update(new_crs_state(), "Hmm, maybe not drama films... no, actually drama films are "
               "exactly what I want.", extractor)
    assert s["constraints"] == {"genre": ["Drama"]}
    s = update(s, "Actually, scratch that: I said drama but I really meant comedy films.",
               extractor, turn=2)
    assert s["constraints"] == {"genre": ["Comedy"]}


def test_role_cue_disambiguates_people(catalog, extractor):
    person = next(p for p in catalog.values("director") if catalog.items_with("writer", p)
                  and p in catalog.values("writer"))
    text = f"Show me films written by {person}."
    assert ("writer", person) in extractor.extract(text)
    s = update(new_crs_state(), text, extractor)
    assert s["constraints"] == {"writer": [person]}


def test_retrieval_relaxes_the_oldest_field_and_records_it(catalog):
    genre, actor = "Western", "Tom Hanks"
    assert catalog.search({"genre": genre}) and not catalog.search({"genre": genre, "actor": actor})
    state = dict(new_crs_state(), constraints={"genre": [genre], "actor": [actor]},
                 stated_at={"genre": 1, "actor": 2})
    ranked, relaxed, n = retrieve(catalog, state, set())
    assert relaxed == ["genre"]
    assert ranked and all(actor in m.actors for m in ranked)


def test_retrieval_is_deterministic_and_prefers_unseen(catalog):
    state = dict(new_crs_state(), constraints={"genre": ["Drama"]}, stated_at={"genre": 1})
    first, _, _ = retrieve(catalog, state, {("genre", "Drama")})
    again, _, _ = retrieve(catalog, state, {("genre", "Drama")})
    assert [m.id for m in first] == [m.id for m in again]
    seen = dict(state, shown=[first[0].id])
    after, _, _ = retrieve(catalog, seen, {("genre", "Drama")})
    assert after[-1].id == first[0].id and after[0].id == first[1].id


def run_turn(catalog, extractor, text, state=None, turn=1, params=CRSParams(), **kw):
    concepts = extractor.extract(text)
    return crs_turn(state or new_crs_state(), user_text=text, user_concepts=concepts,
                    history_concepts=set(concepts), turn=turn, seed=1, catalog=catalog,
                    extractor=extractor, params=params, **kw)


def test_template_answer_names_catalog_films_matching_the_request(catalog, extractor):
    text, state, meta = run_turn(catalog, extractor, "Any drama films starring Tom Hanks?")
    assert meta["mentioned_ids"] and all(i in catalog.by_id for i in meta["mentioned_ids"])
    for i in meta["mentioned_ids"]:
        assert "Tom Hanks" in catalog.by_id[i].actors
    assert meta["off_catalog_titles"] == []
    assert meta["rec_ids"][:len(meta["mentioned_ids"])] == meta["mentioned_ids"]
    assert len(meta["rec_ids"]) == min(10, meta["n_candidates"])
    assert state["shown"] == meta["mentioned_ids"]


def test_template_gives_one_reason_and_only_restating_restates(catalog, extractor):
    """The template CRS names films with the fact linking them to the latest request; it does
    not restate every constraint (the restating reference does)."""
    state = None
    for turn, text in enumerate(["I want a drama.", "Something in English please.",
                                 "Ideally starring Tom Hanks."], 1):
        answer, state, meta = run_turn(catalog, extractor, text, state=state, turn=turn)
    assert set(meta["constraints"]) == {"genre", "language", "actor"}
    assert "English" not in answer, "an older constraint is not restated"
    assert "Tom Hanks" in answer
    restating, _, _ = run_turn(catalog, extractor, "Any drama films in English starring Tom Hanks?",
                               params=CRSParams(agent="restating"))
    assert {("genre", "Drama"), ("language", "English"), ("actor", "Tom Hanks")} <= \
        extractor.extract(restating)


def test_top_k_is_a_parameter(catalog, extractor):
    _, _, meta = run_turn(catalog, extractor, "I want a drama.", params=CRSParams(top_k=3))
    assert len(meta["rec_ids"]) == 3


@pytest.fixture
def prompt(project_root):
    return (project_root / "prompts" / "crs_respond.txt").read_text(encoding="utf-8")


def test_llm_answer_lists_candidates_without_restating_and_counts_off_catalog(
        catalog, extractor, prompt):
    model = ScriptedModel('You will love "The Marvellous Zorblax Returns" and also Cast Away.')
    text, _, meta = run_turn(catalog, extractor, "Any drama films starring Tom Hanks?",
                             model=model, prompt_template=prompt,
                             history=[("user", "Any drama films starring Tom Hanks?")])
    sent = model.prompts[0]
    assert "restat" not in sent.lower()
    assert "Any drama films starring Tom Hanks?" in sent
    listed = [m for m in catalog.search({"actor": "Tom Hanks", "genre": "Drama"})]
    assert any(m.title in sent for m in listed)
    assert "The Marvellous Zorblax Returns" in meta["off_catalog_titles"]
    assert "Cast Away" not in meta["off_catalog_titles"]
    assert meta["mentioned_ids"] == ["Cast Away"]
    assert meta["generation"] == {"ok": True, "raw": model.answer, "reason": None}


def test_empty_llm_answer_is_flagged_with_its_raw_text_and_the_template_speaks(catalog, extractor, prompt):
    text, _, meta = run_turn(catalog, extractor, "A comedy please.", model=ScriptedModel("  "),
                             prompt_template=prompt, history=[])
    template_text, _, _ = run_turn(catalog, extractor, "A comedy please.")
    assert text == template_text != ""  # the empty answer is never the system's turn
    assert meta["generation"]["ok"] is False and meta["generation"]["raw"] == "  "
    assert meta["generation"]["fallback"] == "template" and meta["generation"]["reason"] == "empty answer"


def test_retrieve_widens_rather_than_repeats(catalog):
    """With every match already shown, new films of a relaxed request come before repeats."""
    state = {"constraints": {"genre": ["Drama"], "actor": ["Tom Hanks"]},
             "stated_at": {"genre": 1, "actor": 2}, "shown": []}
    matches, _, _ = retrieve(catalog, state, set())
    seen = dict(state, shown=[m.id for m in matches])
    widened, _, _ = retrieve(catalog, seen, set(), n_fresh=2)
    assert widened[0].id not in seen["shown"] and widened[1].id not in seen["shown"]
    # the oldest constraint (genre) was relaxed: the new films still star Tom Hanks
    assert all("Tom Hanks" in m.actors for m in widened[:2])
    no_widening, _, _ = retrieve(catalog, seen, set(), n_fresh=0)
    assert {m.id for m in no_widening} == set(seen["shown"])


def test_retrieve_with_a_limit_ranks_the_same_head_without_sorting_everything(catalog):
    state = {"constraints": {"genre": ["Drama"]}, "stated_at": {"genre": 1}, "shown": []}
    history = {("genre", "Drama"), ("actor", "Tom Hanks")}
    full, _, n = retrieve(catalog, state, history)
    head, _, n_head = retrieve(catalog, state, history, limit=7)
    assert [m.id for m in head] == [m.id for m in full[:7]] and n == n_head == len(full)
    seen = dict(state, shown=[m.id for m in full[:3]])
    full_seen, _, _ = retrieve(catalog, seen, history)
    head_seen, _, _ = retrieve(catalog, seen, history, limit=5)
    assert [m.id for m in head_seen] == [m.id for m in full_seen[:5]]
