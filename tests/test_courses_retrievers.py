"""Course retrievers: BM25 equals rank_bm25, RRF by hand, quality on the shipped test set."""
from __future__ import annotations

import numpy as np
import pytest

from convsim.agents.courses.retrievers import (
    BM25Retriever, EmbeddingRetriever, get_retriever, reciprocal_rank_fusion, retrieval_query,
)
from convsim.catalog.courses import course_text, load_courses, load_test_set, tokenize
from convsim import ConvsimError, embeddings_available
from convsim.evaluation.retrieval.metrics import recall_at_k

COURSES = load_courses()


def test_bm25_scores_equal_rank_bm25():
    rank_bm25 = pytest.importorskip("rank_bm25")
    reference = rank_bm25.BM25Okapi([tokenize(course_text(c)) for c in COURSES])
    ours = BM25Retriever(COURSES)
    for query in ("Python programming. How do I learn Python?", "contract law", "the the of",
                  "deep learning neural networks neural", "zzz unknown words"):
        q = tokenize(query)
        assert np.allclose(ours.scores(q), reference.get_scores(q)), query


def test_rankings_are_ordered_unique_and_cut_at_k():
    for kind in ("tfidf", "bm25"):
        ranking = get_retriever(kind).search("machine learning", 7)
        assert [r["rank"] for r in ranking] == list(range(1, 8))
        assert len({r["subjectCode"] for r in ranking}) == 7
        assert all(a["score"] >= b["score"] for a, b in zip(ranking, ranking[1:]))


def test_reciprocal_rank_fusion_by_hand():
    a = [{"subjectCode": "X", "rank": 1}, {"subjectCode": "Y", "rank": 2}]
    b = [{"subjectCode": "Y", "rank": 1}, {"subjectCode": "Z", "rank": 2}]
    fused = reciprocal_rank_fusion([a, b], 3, c=60)
    assert [f["subjectCode"] for f in fused] == ["Y", "X", "Z"]
    assert fused[0]["score"] == pytest.approx(1 / 62 + 1 / 61, abs=1e-6)
    assert fused[1]["score"] == pytest.approx(1 / 61, abs=1e-6)


@pytest.mark.parametrize("kind", ["tfidf", "bm25"])
def test_lexical_retrievers_find_the_gold_courses(kind):
    """A regression guard: mean gold Recall@10 on the shipped test set stays high."""
    retriever = get_retriever(kind)
    recalls = []
    for case in load_test_set().cases:
        ranking = retriever.search(retrieval_query(case.question, case.skill), 10)
        labels = [case.gold_relevance.get(r["subjectCode"], 0) for r in ranking]
        recalls.append(recall_at_k(labels, sum(v >= 2 for v in case.gold_relevance.values()), 10))
    defined = [r for r in recalls if r is not None]
    assert len(defined) == len(recalls) - 1           # v1-033 (Java) has nothing relevant
    assert np.mean(defined) > 0.85


def test_embedding_retriever_without_the_extra_says_what_to_install():
    if embeddings_available():
        pytest.skip("the embeddings extra is installed here")
    with pytest.raises(ConvsimError, match="embeddings extra"):
        EmbeddingRetriever(COURSES, "st:minilm")


def test_embedding_retriever_with_the_tfidf_embedder_ranks():
    retriever = EmbeddingRetriever(COURSES, "tfidf")
    top = retriever.search("Spanish language conversation", 3)
    names = {c["subjectCode"]: c["subjectName"] for c in COURSES}
    assert any("Spanish" in names[r["subjectCode"]] for r in top)


def test_unknown_retriever_is_a_clear_error():
    with pytest.raises(ConvsimError, match="unknown retriever"):
        get_retriever("bm26")
