"""The original system's logs state constraints and focus on ``plot`` and ``name``: the CRS living spec names both fields, "excluded from TAS by default and only used for
appendix/debug". The import refused them at line 1; now they are kept in the transcript, left out
of TAS and the DST gold, and counted per dialogue. With the crs_shift param ``tas_plot_name: true`` they count in TAS."""
import json
import math

from convsim.evaluation.crs.excluded_fields import excluded_counts
from convsim.evaluation.reporting.transcripts import evaluate_transcripts, read_transcripts
from convsim.running.store import read_jsonl


def _log(plot_and_name: bool) -> dict:
    extra = {"plot": ["prison", "escape"], "name": "The Shawshank Redemption"} if plot_and_name else {}
    return {"session_id": "orig1" if plot_and_name else "orig0", "variant": "llama3", "turns": [
        {"speaker": "user", "text": "I'm in the mood for a drama movie.",
         "user_meta": {"focus_field": "genre", "focus_value": "Drama", "constraints": {"genre": "Drama"},
                       "shift_event": False}},
        {"speaker": "system", "text": "Try The Green Mile, a drama.", "top_k": []},
        {"speaker": "user", "text": "Something about a prison escape, like The Shawshank Redemption?",
         "user_meta": {"focus_field": "plot" if plot_and_name else "genre",
                       "focus_value": "prison" if plot_and_name else "Drama",
                       "constraints": {"genre": "Drama", **extra}, "shift_event": plot_and_name}},
        {"speaker": "system", "text": "Escape from Alcatraz is a prison drama.", "top_k": []}]}


def test_plot_and_name_constraints_and_focus_are_read_kept_and_counted(tmp_path):
    src = tmp_path / "orig.jsonl"
    src.write_text("\n".join(json.dumps(_log(x)) for x in (True, False)) + "\n")
    records = read_transcripts(src)
    meta = records[0]["transcript"][2]["meta"]
    assert meta["constraints"] == {"genre": "Drama"}  # the TAS/DST gold: no name, no plot
    assert meta["excluded_constraints"] == {"plot": ["prison", "escape"], "name": "The Shawshank Redemption"}
    assert meta["focus_field"] == "plot" and meta["focus_excluded"] is True
    assert excluded_counts(records[0]["transcript"]) == {
        "constraints_excluded_name": 1, "constraints_excluded_plot": 2, "focus_excluded_turns": 1}

    out = evaluate_transcripts(src, out=tmp_path / "run", params={"topic_mode": "keyword", "judge": False},
                               analyze=False)
    rows = {r["session_id"]: r for r in read_jsonl(out / "results.jsonl")}
    with_fields, without = rows["orig1"], rows["orig0"]
    assert with_fields["status"] == "ok" and with_fields["dialogue_metrics"]["constraints_excluded_plot"] == 2
    assert with_fields["dialogue_metrics"]["focus_excluded_turns"] == 1
    assert "constraints_excluded_plot" not in without["dialogue_metrics"]
    # excluded from TAS and the DST gold: the same texts and TAS fields score the same with or without them
    for name in ("tas_grounded", "cc_mean", "cr_mean", "dst_precision_mean", "dst_recall_mean"):
        assert with_fields["dialogue_metrics"][name] == without["dialogue_metrics"][name], name
    assert with_fields["transcript"][2]["meta"]["excluded_constraints"]["name"] == "The Shawshank Redemption"


def test_a_mistyped_plot_constraint_still_names_line_and_field(tmp_path):
    import pytest
    from convsim import ConvsimError
    bad = _log(True)
    bad["turns"][2]["user_meta"]["constraints"]["plot"] = {"kw": 1}
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(bad) + "\n")
    with pytest.raises(ConvsimError, match=r"line 1.*constraints\.plot|constraints\.plot.*line 1"):
        read_transcripts(src)


def _evaluate(tmp_path, logs, name, **params):
    src = tmp_path / f"{name}.jsonl"
    src.write_text("\n".join(json.dumps(log) for log in logs) + "\n")
    out = evaluate_transcripts(src, out=tmp_path / name, params={"topic_mode": "keyword", "judge": False, **params},
                               analyze=False)
    return {r["session_id"]: r for r in read_jsonl(out / "results.jsonl")}


def test_plot_and_name_count_in_tas_when_enabled(tmp_path):
    """``tas_plot_name: true``: a reply that takes up the user's plot focus scores above one that
    ignores it; with the default the two score the same (the spec: excluded from TAS by default)."""
    follows = _log(True)  # "Something about a prison escape..." -> "Escape from Alcatraz is a prison drama."
    ignores = _log(True)
    ignores["session_id"] = "orig1-ignores"
    ignores["turns"][3]["text"] = "Try Forrest Gump, a drama."
    plain = _log(False)
    off = _evaluate(tmp_path, [follows, ignores, plain], "off")
    on = _evaluate(tmp_path, [follows, ignores, plain], "on", tas_plot_name=True)
    tas = {k: {s: r["dialogue_metrics"]["tas_grounded"] for s, r in rows.items()} for k, rows in (("off", off), ("on", on))}
    assert tas["off"]["orig1"] == tas["off"]["orig1-ignores"]  # plot and name are not looked at
    assert tas["on"]["orig1"] > tas["off"]["orig1"]  # the reply shares "prison" and "escape"
    assert tas["on"]["orig1-ignores"] < tas["on"]["orig1"]
    turn2 = on["orig1-ignores"]["turn_metrics"][1]
    assert turn2["cc"] == 0.0 and turn2["n_missing"] >= 2  # the plot keywords (and the title) unmet
    # a session without plot or name constraints scores the same either way; the DST gold stays the catalog's
    assert on["orig0"]["dialogue_metrics"]["tas_grounded"] == off["orig0"]["dialogue_metrics"]["tas_grounded"]
    for s in ("orig1", "orig1-ignores"):
        for name in ("dst_precision_mean", "dst_recall_mean"):
            assert on[s]["dialogue_metrics"][name] == off[s]["dialogue_metrics"][name], (s, name)


def test_plot_keyword_and_title_concepts_and_their_weights():
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.catalog.movies.concepts import ConceptExtractor
    from convsim.evaluation.crs.excluded_fields import ExcludedIdf, excluded_concepts
    cat = load_movie_catalog()
    ex = ConceptExtractor(cat)
    user = {"text": "x", "meta": {"excluded_constraints": {"plot": ["prison", "heist"], "name": "Not A Catalog Film"}}}
    got = excluded_concepts("A prison break like Cast Away or Not a Catalog Film; imprisoned heists.", user, ex)
    assert got == {("plot", "prison"), ("name", "cast away"), ("name", "not a catalog film")}  # word boundaries
    idf = ExcludedIdf(cat)
    n = len(cat.movies)
    assert idf("name", "cast away") == math.log((1 + n) / 2) + 1
    assert idf("plot", "zzzunseen") > idf("plot", "prison") > idf("plot", "a")  # rarer keywords weigh more
    assert idf("genre", "Drama") == cat.idf("genre", "Drama")
