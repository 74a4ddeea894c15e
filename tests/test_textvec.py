"""convsim.providers.textvec.FastCounts gives scikit-learn's transform matrix, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from convsim.providers.textvec import FastCounts

CORPUS = ["A detective hunts a killer in the rain of a dark city.",
          "Two lovers meet in Paris; romance and comedy follow.",
          "Space pilots fight an empire far away: science fiction at its best.",
          "A family road trip turns into a comedy of errors.",
          "The killer returns to the city, and the detective must stop him.",
          "Romance in Paris again, with more comedy and a dark secret."] * 2

TEXTS = ["", "   ", "the of and", "I want a dark detective story in the rain",
         "romance comedy ROMANCE comedy", "science fiction, science-fiction; SCIENCE FICTION!!",
         "Ça va? Élan vital — naïve café in Paris", "日本語 テキスト 映画 comedy",
         "don't won't it's the killer's city", "detective detective detective killer",
         "a b c d e f", "space pilots space pilots empire", "_under_score_ 123 4567 ab12 city",
         "dark city dark city of the dark", "x" * 300]


def _same(a, b) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)  # exact, not approximate


@pytest.mark.parametrize("make", [
    lambda: TfidfVectorizer(ngram_range=(1, 2), stop_words="english", sublinear_tf=True, max_features=40),
    lambda: TfidfVectorizer(ngram_range=(1, 2)),
    lambda: TfidfVectorizer(norm="l1", use_idf=False, sublinear_tf=True),
    lambda: TfidfVectorizer(norm=None, smooth_idf=False, dtype=np.float32),
    lambda: TfidfVectorizer(norm="l2", dtype=np.float32, stop_words="english"),
    lambda: CountVectorizer(stop_words=["the", "a", "of", "dark"], token_pattern=r"(?u)\b[a-zA-Z]{3,}\b",
                            min_df=1, max_features=30),
    lambda: CountVectorizer(lowercase=False),
])
def test_fast_counts_equal_scikit_learn(make):
    vec = make().fit(CORPUS)
    fast = FastCounts(vec)
    assert fast.fast
    _same(vec.transform(TEXTS), fast.transform(TEXTS))
    _same(vec.transform(CORPUS), fast.transform(CORPUS))
    for text in TEXTS:  # one text a call, as a session's stray texts are encoded
        _same(vec.transform([text]), fast.transform([text]))


def test_an_unsupported_vectoriser_goes_through_its_own_transform():
    for vec in (CountVectorizer(strip_accents="unicode"), CountVectorizer(ngram_range=(1, 3)),
                CountVectorizer(binary=True), CountVectorizer(analyzer="char")):
        vec.fit(CORPUS)
        fast = FastCounts(vec)
        assert not fast.fast
        _same(vec.transform(TEXTS), fast.transform(TEXTS))


def test_the_shipped_embedder_and_topics_use_it_and_match(tmp_path):
    from convsim.catalog.movies.catalog import load_movie_catalog
    from convsim.evaluation.crs.tas_cas_eval import _embedder, topic_extractor
    catalog = load_movie_catalog()
    emb = _embedder("tfidf", catalog)
    topics = topic_extractor("lda", catalog, tmp_path)
    texts = TEXTS + [f"{m.title}: {m.plot}" for m in catalog.movies[:50]]
    _same(emb._vec.transform(texts), emb._transform(texts))
    _same(topics.vectorizer.transform(texts), topics._counts(texts))
    # densified in float32 directly: the same rows as densifying in float64 and casting
    dense = np.asarray(emb._vec.transform(texts).todense(), dtype=np.float32)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    assert len(texts) >= 64 and np.array_equal(emb.encode(texts), dense / norms)  # the sparse path
    assert np.array_equal(emb.encode(texts[:10]), (dense / norms)[:10])  # a few texts: the dense path
    # texts without an in-vocabulary word skip the LDA E-step: the others' topics are unchanged
    theta = topics.lda.transform(topics.vectorizer.transform(texts))
    empty = np.diff(topics.vectorizer.transform(texts).indptr) == 0
    assert empty.any() and not empty.all()
    for text, row, is_empty in zip(texts, theta, empty):
        expected = frozenset() if is_empty else frozenset().union(
            *(topics.topic_words[k] for k in np.flatnonzero(row >= topics.min_prob)))
        assert topics.topics(text) == expected
    # and in one call (rows whose topics are the same share one set)
    assert topics.topics_many(texts * 3) == [topics.topics(t) for t in texts] * 3
