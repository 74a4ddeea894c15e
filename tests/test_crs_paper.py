"""Paper mode (configs/crs_paper001.yaml): the paper's detector and the OpenDialKG KB, model none."""

import json

import pytest
import yaml

import convsim
from conftest import SHARED_DATA, ROOT

KB = SHARED_DATA / "opendialkg" / "opendialkg_movie_data.json"


def test_paper_config_states_the_papers_settings():
    cfg = yaml.safe_load((ROOT / "configs" / "crs_paper001.yaml").read_text())
    p = cfg["params"]
    assert (p["shift_rule"], p["shift_compare"], p["recovery_shifts"], p["topic_mode"]) == \
        ("or", "consecutive", "detector", "lda")
    assert p["tau"] == 0.65 and p["catalog_path"].endswith("opendialkg/opendialkg_movie_data.json")
    models = yaml.safe_load((ROOT / "configs" / "crs_models.yaml").read_text())["params"]
    for key in ("shift_rule", "shift_compare", "recovery_shifts", "catalog_path", "recovery_search",
                "tas_cas_tfidf", "user_negation"):
        assert models[key] == p[key], f"the six-model config runs in paper mode ({key})"
    assert models["accept_title_prob"] == 0.0


@pytest.mark.skipif(not KB.exists(), reason=f"OpenDialKG KB not found at {KB}")
def test_paper_mode_runs_two_short_sessions_on_the_kb(tmp_path):
    run_dir = convsim.run(ROOT / "configs" / "crs_paper001.yaml", out=str(tmp_path),
                          run_id="paper", sessions=2, set_params=["n_turns=5", "first_shift_turn=3"],
                          analyze=False)
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    kb_titles = set(json.loads(KB.read_text(encoding="utf-8")))
    for r in records:
        dm = r["dialogue_metrics"]
        assert dm["tas_cas_shift_source"] == "detector" and dm["tas_cas_topic_mode"] == "lda"
        assert dm["tas_cas_recovery_search"] == "to_end"
        named = [e["meta"]["mentioned_ids"] for e in r["transcript"] if e["speaker"] == "system"]
        assert any(named)
        assert all(i in kb_titles for ids in named for i in ids), "films come from the KB"
