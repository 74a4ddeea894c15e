"""Metric-validity fixes of the CRS evaluation (docs/crs_shift.md "Where TAS is gameable"):
copying and a fixed film must not hide from the echo flag, a logged list longer than K must not buy
coverage, the reference checks must state the orderings that must hold and the known gaming results,
simulator figures must stay out of the between-variant tests, and the oracle's logged list must be
its ranking by taste."""

import pytest

from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.evaluation.crs.coverage import coverage_metrics
from convsim.evaluation.crs.nodes import TASSettings, turn_evaluation
from convsim.evaluation.crs.validity import reference_checks


@pytest.fixture(scope="module")
def cat_ex():
    cat = load_movie_catalog()
    return cat, ConceptExtractor(cat)


def _user(text, constraints, turn=2):
    return {"turn": turn, "text": text, "meta": {"constraints": constraints}}


def test_parrot_scores_the_tas_maximum_and_is_flagged(cat_ex):
    """A verbatim copy: CC = CR = 1, I = 1, TAS = 1 + 1 - 1 = 1 (the maximum); it names the user's
    film only, which is no recommendation, so the turn is an echo (it was not: 'names a film')."""
    cat, ex = cat_ex
    text = "I enjoyed the plot of The Exorcist. Are there more horror films like it?"
    assert ex.extract_titles(text) == ["The Exorcist"]
    user = _user(text, {"genre": "Horror"})
    system = {"turn": 2, "text": text, "meta": {"mentioned_ids": ["The Exorcist"]}}
    m, _ = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings())
    assert m["cc"] == 1.0 and m["cr"] == pytest.approx(1.0) and m["copy_penalty"] == 1.0
    assert m["tas"] == pytest.approx(1.0)
    assert m["echo"] == 1 and m["n_recommended_new"] == 0


def test_echo_plus_a_fixed_film_is_flagged(cat_ex):
    """'Noted: you want horror films. Anything else? Try "Titanic".': Titanic is no horror film
    (unrelated to the request), and once named it is no new recommendation either."""
    cat, ex = cat_ex
    user = _user("Can you suggest a good horror film for tonight?", {"genre": "Horror"})
    system = {"turn": 2, "text": 'Noted: you want horror films. Anything else? Try "Titanic".',
              "meta": {"mentioned_ids": ["Titanic"]}}
    m, _ = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings())
    assert m["echo"] == 1  # unrelated to the user's constraints
    drama = _user("Can you suggest a good drama film for tonight?", {"genre": "Drama"})
    system_d = dict(system, text='Noted: you want drama films. Anything else? Try "Titanic".')
    m, _ = turn_evaluation(drama, system_d, extractor=ex, idf=cat.idf, settings=TASSettings())
    assert m["echo"] == 0  # Titanic is a drama: the first naming recommends it
    m, _ = turn_evaluation(drama, system_d, extractor=ex, idf=cat.idf, settings=TASSettings(),
                           earlier_named={"Titanic"})
    assert m["echo"] == 1  # the same film again: nothing new


def test_a_new_fitting_film_is_still_a_recommendation(cat_ex):
    cat, ex = cat_ex
    user = _user("Can you suggest a good horror film for tonight?", {"genre": "Horror"})
    system = {"turn": 2, "text": 'Noted: you want horror films. Try "The Others".',
              "meta": {"mentioned_ids": ["The Others"]}}
    m, _ = turn_evaluation(user, system, extractor=ex, idf=cat.idf, settings=TASSettings(),
                           earlier_named={"The Exorcist"})
    assert m["echo"] == 0 and m["n_recommended_new"] == 1


def _transcript(lists):
    out = []
    for t, ids in enumerate(lists, 1):
        out += [{"turn": t, "speaker": "user", "text": "x", "meta": {}},
                {"turn": t, "speaker": "system", "text": "y", "meta": {"rec_ids": ids}}]
    return out


def test_coverage_reads_each_list_to_top_k_only():
    """Logging the whole catalog in one turn gave pc_final 1.0 (above the oracle)."""
    filler = [f"f{i}" for i in range(40)]
    targets = {"t1", "t2"}
    flood = _transcript([filler + ["t1", "t2"]])
    out = coverage_metrics(flood, targets)  # the default K is Params.top_k's default, 10
    assert out["pc_final"] == 0.0 and out["recall_at_10"] == 0.0
    assert coverage_metrics(flood, targets, top_k=41)["pc_final"] == 0.5
    assert coverage_metrics(flood, targets, top_k=100)["pc_final"] == 1.0
    honest = _transcript([["t1"] + filler[:9], ["t2"] + filler[:9]])
    assert coverage_metrics(honest, targets, top_k=10)["pc_final"] == 1.0
    with pytest.raises(ValueError):
        coverage_metrics(honest, targets, top_k=0)


def test_graph_cuts_logged_lists_to_the_runs_top_k():
    from convsim import load_graph_module
    from types import SimpleNamespace
    module = load_graph_module("crs_shift")
    p = module.Params(top_k=3, topic_mode="keyword")
    ids = [m.id for m in load_movie_catalog().movies]
    state = {"transcript": [{"turn": 1, "speaker": "user", "text": "horror films?", "meta": {"shift_event": False}},
                            {"turn": 1, "speaker": "system", "text": "ok", "meta": {"rec_ids": ids}}],
             "user_state": {"targets": ids[5:10]}, "dialogue_metrics": {}}
    ctx = module.Context(params=p, seed=1, session_id="u0001")
    out = module.evaluate_tas_cas(state, SimpleNamespace(context=ctx))["dialogue_metrics"]
    assert out["pc_final"] == 0.0  # the targets sit at ranks 6-10, past K = 3


def _means(**over):
    base = {"oracle": {"recall_at_10": 0.6, "recall_at_1": 0.3, "pc_final": 0.8, "tas_grounded": 0.4,
                       "echo_turn_share": 0.0},
            "template": {"recall_at_10": 0.1, "recall_at_1": 0.0, "pc_final": 0.5, "tas_grounded": 0.42,
                         "echo_turn_share": 0.0},
            "random": {"recall_at_10": 0.1, "recall_at_1": 0.0, "pc_final": 0.3, "tas_grounded": 0.0,
                       "echo_turn_share": 0.0},
            "parrot": {"tas_grounded": 1.0, "echo_turn_share": 0.9},
            "echo_plus_fixed_film": {"tas_grounded": 0.9, "echo_turn_share": 0.1},
            "echo": {"tas_grounded": 0.9, "echo_turn_share": 0.9}}
    for agent, row in over.items():
        base[agent] = {**base[agent], **row}
    return base


def test_reference_checks_state_orderings_and_gaming_results():
    from convsim.evaluation.crs.validity import GAMEABLE
    checks = reference_checks(_means())
    assert checks["recall_at_10: oracle > template"] is True
    assert checks["pc_final: oracle > template"] is True
    assert checks["recall_at_1: oracle > random"] is True
    assert checks["echo_turn_share: parrot flagged"] is True
    # a gaming reference the flag misses fails its claim (echo_plus_fixed_film at 0.1 here)
    assert checks["echo_turn_share: echo_plus_fixed_film flagged"] is False
    # gaming references are not "film-naming systems"
    assert checks["echo_turn_share: film-naming systems not flagged"] is True
    gaming = {k: v for k, v in checks.items() if k.startswith(GAMEABLE)}
    copy = [k for k in gaming if "tas_grounded: parrot >= template" in k]
    assert copy and gaming[copy[0]] is True and "copying" in copy[0]
    assert reference_checks(_means(oracle={"pc_final": 0.4}))["pc_final: oracle > template"] is False


def test_simulator_figures_are_not_tested_between_variants():
    from convsim import load_graph_module
    from convsim.evaluation.reporting.run_stats import run_statistics
    module = load_graph_module("crs_shift")
    assert "shift_detect_precision" in module.UNCOMPARED_METRICS
    assert "tas_echo_ceiling" in module.UNCOMPARED_METRICS
    assert not set(module.UNCOMPARED_METRICS) & set(module.SUMMARY_METRICS)
    records = [{"variant": v, "session_id": f"u{i}", "trial": 0, "seed": i, "status": "ok",
                "dialogue_metrics": {"tas_grounded": i * (1 + (v == "b")) / 10, "tas_echo_ceiling": 0.9 - i / 100}}
               for v in ("a", "b") for i in range(1, 7)]
    out = run_statistics(records, uncompared=module.UNCOMPARED_METRICS)
    assert "anova" in out["metrics"]["tas_grounded"]
    ceiling = out["metrics"]["tas_echo_ceiling"]
    assert "anova" not in ceiling and "wilcoxon" not in ceiling and "simulator" in ceiling["not_compared"]
    assert ceiling["variants"]["a"]["n"] == 6
    assert all(r["metric"] != "tas_echo_ceiling" for r in out["across_metrics"]["rows"])


def test_oracle_logs_its_taste_ranking_not_its_fresh_films_first():
    """The oracle names the best films not yet shown; by the last turn those are its ~40th best.
    Logged first, they pushed every target off the top: recall_at_1 was 0 in every session."""
    from convsim import load_graph_module
    module = load_graph_module("crs_shift")
    p = module.Params(n_turns=8, crs_agent="oracle", topic_mode="keyword", accept_title_prob=0.0,
                      judge=False)
    out = module.graph.invoke({"session_id": "u0001", "turn": 0, "user_state": None, "crs_state": {},
                               "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                              context=module.Context(params=p, seed=3, session_id="u0001"))
    from convsim.agents.crs.profile import utility
    from convsim.agents.crs.references import oracle_ranking
    cat = load_movie_catalog()
    taste = utility(cat, out["user_state"]["liked"])
    users = [e for e in out["transcript"] if e["speaker"] == "user"]
    systems = [e for e in out["transcript"] if e["speaker"] == "system"]
    for u, s in zip(users, systems):
        by_taste = oracle_ranking(cat, taste, u["meta"]["constraints"], set())[:p.top_k]
        rec, named = s["meta"]["rec_ids"], s["meta"]["mentioned_ids"]
        extra = [i for i in named if i not in by_taste]
        # its ranking by taste, best first; the films it named this turn kept at the end
        assert rec == by_taste[:p.top_k - len(extra)] + extra, u["turn"]
        assert len(rec) == p.top_k and set(named) <= set(rec)
    # from turn 2 on it names films it has not shown, which are not its first-ranked ones
    assert any(s["meta"]["mentioned_ids"][0] != s["meta"]["rec_ids"][0] for s in systems[1:])
