"""The semantic metrics name how they were computed: with st:minilm they are sentence-transformer
cosines at the spec's thresholds; with TF-IDF they are labelled lexical approximations."""

import pytest

from convsim.catalog.travel import TravelDB
from convsim.providers.embedders import embeddings_available
from convsim.evaluation.group.evaluate import semantic_label
from convsim.evaluation.group.plan_metrics import M10_THRESHOLD, slot_satisfaction
from convsim.graphs.group_planning import dataset_metrics

DB = TravelDB(accommodations=[], attractions=[], events=[],
              restaurants=[{"name": "Roma House", "avg_cost": 20, "cuisines": "Italian, Pizza", "rating": 4.0,
                            "City": "X"}])
PLAN = {"days": [{"days": 1, "lunch": "Roma House, X"}]}


def test_tfidf_is_labelled_a_lexical_approximation():
    assert semantic_label("tfidf").startswith("lexical approximation")
    assert semantic_label("st:all-MiniLM-L6-v2").startswith("semantic")
    recs = [{"dialogue_metrics": {}, "metric_settings": {"semantic_label": semantic_label("tfidf")}}]
    assert dataset_metrics(recs)["semantic_metrics"].startswith("lexical approximation")


@pytest.mark.skipif(not embeddings_available(), reason="embeddings extra not installed")
def test_minilm_semantic_channel_uses_the_spec_threshold():
    from convsim import make_embedder
    emb = make_embedder("st:minilm")
    # a wish in other words than the record ("pasta place"): only the semantic channel can see it
    wish = "Somewhere with good pasta and pizza, please."
    ch = slot_satisfaction(wish, "cuisine", plan=PLAN, db=DB, embedder=_Sim(emb))
    sim = _Sim(emb).similarity(wish, TravelDB.record_text("restaurants", DB.restaurants[0]))
    assert ch["semantic"] == (sim >= M10_THRESHOLD)
    assert sim >= M10_THRESHOLD and ch["satisfied"]
    far = "I want to see a football match."
    assert _Sim(emb).similarity(far, TravelDB.record_text("restaurants", DB.restaurants[0])) < M10_THRESHOLD


class _Sim:
    def __init__(self, emb):
        self.emb, self.name = emb, emb.name

    def similarity(self, a, b):
        va, vb = self.emb.encode([a, b])
        return float(va @ vb)
