"""convsim.evaluation.crs.topics.lda_transform: the vectorised LDA E-step gives scikit-learn's transform (to
rounding, < 1e-12) and LdaTopics the same topic sets; anything unexpected goes through sklearn."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.feature_extraction.text import CountVectorizer

from convsim.catalog.movies.catalog import load_movie_catalog
from convsim.evaluation.crs import topics
from convsim.evaluation.crs.topics import LdaTopics, catalog_documents, lda_for_run, lda_transform

TOL = 1e-12


@pytest.fixture(scope="module")
def catalog_model():
    movies = load_movie_catalog().movies
    return movies, lda_for_run(catalog_documents(movies), None)  # the run's model (n_topics=20, seed 0)


def catalog_texts(movies, vocab, n_mixes: int = 1500, seed: int = 0) -> list[str]:
    """Texts like a session's and harder: plots, titles, genre requests, people, random mixes of
    vocabulary and other words, single words, repeated words, texts with no vocabulary word."""
    rng = np.random.default_rng(seed)
    vocab = list(vocab)
    genres = sorted({g for m in movies for g in m.genres})
    people = sorted({p for m in movies for p in (*m.actors, *m.directors)})
    other = "the who it really want please movie film great hello thanks maybe watch 1999 ok".split()
    texts = [m.plot or "" for m in movies] + [m.title for m in movies]
    texts += [f"I'm in the mood for a {g.lower()} movie. Could you recommend a few?" for g in genres]
    texts += [f"Something {a.lower()} but also {b.lower()}, like {m.title}?"
              for a, b, m in zip(rng.choice(genres, 200), rng.choice(genres, 200), rng.choice(movies, 200))]
    texts += [f"Who else is good, like {p}? {m.plot}" for p, m in zip(rng.choice(people, 200), rng.choice(movies, 200))]
    for _ in range(n_mixes):
        words = list(rng.choice(vocab, int(rng.integers(1, 40)))) + list(rng.choice(other, int(rng.integers(0, 6))))
        rng.shuffle(words)
        texts.append(" ".join(words))
    texts += vocab  # every vocabulary word alone
    texts += [" ".join([w] * int(k)) for w, k in zip(rng.choice(vocab, 300), rng.integers(2, 25, 300))]
    texts += [" ".join(list(rng.choice(vocab, 3)) * int(k)) for k in rng.integers(2, 12, 200)]
    texts += ["", "   ", "who stars in it?", "hello there", "1999 2001", "ok ok ok", "Thanks!"]
    return texts


def test_the_catalog_model_gives_sklearns_weights_and_topic_sets(catalog_model, monkeypatch):
    movies, model = catalog_model
    texts = catalog_texts(movies, model.vectorizer.get_feature_names_out())
    counts = model._counts(texts)
    assert counts.shape[0] > 3000 and (np.diff(counts.indptr) == 0).sum() >= 7  # empty rows too
    ref = model.lda.transform(counts)
    got = lda_transform(model.lda, counts)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert np.abs(got - ref).max() < TOL
    fast_sets = model.topics_many(texts)
    with monkeypatch.context() as m:
        m.setattr(topics, "lda_transform", lambda lda, x: lda.transform(x))
        slow_sets = LdaTopics(model.vectorizer, model.lda).topics_many(texts)
    assert fast_sets == slow_sets
    assert sum(bool(s) for s in fast_sets) > 2000  # the sets are not trivially empty
    # the catalog documents themselves (long texts)
    docs = model._counts(catalog_documents(movies))
    assert np.abs(lda_transform(model.lda, docs) - model.lda.transform(docs)).max() < TOL


def test_chunks_and_one_document_calls_give_the_same(catalog_model, monkeypatch):
    movies, model = catalog_model
    texts = catalog_texts(movies, model.vectorizer.get_feature_names_out(), n_mixes=200, seed=1)
    counts = model._counts(texts)
    ref = model.lda.transform(counts)
    monkeypatch.setattr(topics, "_ESTEP_DOCS", 7)
    monkeypatch.setattr(topics, "_ESTEP_CELLS", 20 * 30)  # long texts get a chunk of their own
    assert np.abs(lda_transform(model.lda, counts) - ref).max() < TOL
    for i in range(0, counts.shape[0], 97):
        assert np.abs(lda_transform(model.lda, counts[i:i + 1]) - ref[i:i + 1]).max() < TOL
    assert lda_transform(model.lda, counts[:0]).shape == (0, 20)



def test_a_texts_weights_do_not_depend_on_its_batch(catalog_model):
    # bit for bit: padding to a longer companion adds exact zeros, chunks and dropped rows change nothing
    movies, model = catalog_model
    texts = catalog_texts(movies, model.vectorizer.get_feature_names_out(), n_mixes=100, seed=2)
    counts = model._counts(texts)
    counts = counts[np.diff(counts.indptr) > 0]
    together = lda_transform(model.lda, counts)
    rng = np.random.default_rng(0)
    for i in rng.choice(counts.shape[0], 150, replace=False):
        alone = lda_transform(model.lda, counts[i:i + 1])
        assert np.array_equal(alone[0], together[i])
        company = sp.vstack([counts[rng.integers(0, counts.shape[0], int(rng.integers(1, 60)))], counts[i]]).tocsr()
        assert np.array_equal(lda_transform(model.lda, company)[-1], together[i])

TOY = ["a detective hunts a killer in the rain of a dark city",
       "two lovers meet in paris and romance and comedy follow",
       "space pilots fight an empire far away in science fiction",
       "a family road trip turns into a comedy of errors",
       "the killer returns to the city and the detective must stop him",
       "romance in paris again with more comedy and a dark secret",
       "the empire strikes the pilots in space with a dark fleet",
       "a family comedy at a road wedding in paris"] * 3


def _toy(**kw):
    vec = CountVectorizer().fit(TOY)
    params = dict(n_components=5, doc_topic_prior=0.5, topic_word_prior=0.2, max_doc_update_iter=5,
                  random_state=3, learning_method="batch", max_iter=20)
    params.update(kw)
    return vec, LatentDirichletAllocation(**params).fit(vec.transform(TOY))


def _toy_counts(vec, n=400, seed=0):
    rng = np.random.default_rng(seed)
    words = vec.get_feature_names_out()
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 30)))) for _ in range(n)] + TOY
    return vec.transform(texts)


@pytest.mark.parametrize("kw", [
    {},  # max_doc_update_iter=5: the cap binds
    {"max_doc_update_iter": 200, "mean_change_tol": 1e-6, "n_components": 7},
    {"max_doc_update_iter": 0},  # no iteration: sklearn's uniform start
    {"doc_topic_prior": 1e-7, "mean_change_tol": 1e-2, "max_doc_update_iter": 40},  # psi's x <= 1e-6 branch
])
def test_a_toy_model_with_other_hyperparameters(kw):
    vec, lda = _toy(**kw)
    counts = _toy_counts(vec)
    ref = lda.transform(counts)
    assert np.abs(lda_transform(lda, counts) - ref).max() < TOL
    # float32 counts: sklearn casts them to the model's float64, and so does lda_transform
    assert np.abs(lda_transform(lda, counts.astype(np.float32)) - ref).max() < TOL
    # fractional counts (a TF-IDF-like matrix) and unsorted, duplicate column indices
    frac = counts.multiply(0.37).tocsr()
    assert np.abs(lda_transform(lda, frac) - lda.transform(frac)).max() < TOL
    odd = sp.csr_matrix((np.array([1.0, 2, 3, 1]), np.array([5, 3, 5, 0]), np.array([0, 3, 3, 4])),
                        shape=(3, counts.shape[1]))
    assert np.abs(lda_transform(lda, odd) - lda.transform(odd)).max() < TOL


def test_the_iteration_cap_binds_in_the_toy_model():
    vec, capped = _toy()
    counts = _toy_counts(vec)
    uncapped = LatentDirichletAllocation(**{**capped.get_params(), "max_doc_update_iter": 300})
    uncapped.components_, uncapped.exp_dirichlet_component_ = capped.components_, capped.exp_dirichlet_component_
    uncapped.doc_topic_prior_, uncapped.n_features_in_ = capped.doc_topic_prior_, capped.n_features_in_
    a, b = lda_transform(capped, counts), lda_transform(uncapped, counts)
    assert np.abs(a - b).max() > 1e-3  # the cap changed some documents' weights...
    assert np.abs(b - uncapped.transform(counts)).max() < TOL  # ...and both match sklearn
    assert np.abs(a - capped.transform(counts)).max() < TOL


def _calls(obj, monkeypatch):
    calls = []
    real = obj.transform

    def counted(X, **kw):
        calls.append(X.shape)
        return real(X, **kw)
    monkeypatch.setattr(obj, "transform", counted)
    return calls


def test_unexpected_models_and_inputs_go_through_sklearn(monkeypatch):
    vec, lda = _toy()
    counts = _toy_counts(vec, n=50)
    ref = lda.transform(counts)

    calls = _calls(lda, monkeypatch)
    assert np.abs(lda_transform(lda, counts) - ref).max() < TOL and calls == []  # the vectorised path
    # a dense matrix, a COO matrix: scikit-learn's own transform
    assert np.array_equal(lda_transform(lda, counts.toarray()), ref) and len(calls) == 1
    assert np.array_equal(lda_transform(lda, counts.tocoo()), ref) and len(calls) == 2
    # inputs scikit-learn refuses: its error
    bad = counts.astype(float)
    bad.data[0] = -1.0
    with pytest.raises(ValueError, match="Negative"):
        lda_transform(lda, bad)
    with pytest.raises(ValueError):
        lda_transform(lda, counts[:, :-1])

    class Subclass(LatentDirichletAllocation):
        pass
    sub = Subclass(**lda.get_params())
    sub.__dict__.update({k: v for k, v in lda.__dict__.items() if k.endswith("_")})
    calls = _calls(sub, monkeypatch)
    assert np.array_equal(lda_transform(sub, counts), ref) and len(calls) == 1

    # a fitted model missing an attribute the E-step reads: sklearn's transform, and its error
    for attr in ("exp_dirichlet_component_", "doc_topic_prior_"):
        vec2, broken = _toy()
        delattr(broken, attr)
        with pytest.raises(AttributeError):
            lda_transform(broken, counts)

    class Duck:  # not an LDA at all
        def transform(self, X):
            return np.full((X.shape[0], 2), 0.5)
    assert lda_transform(Duck(), counts).shape == (counts.shape[0], 2)


def test_a_float32_model_goes_through_sklearn(monkeypatch):
    vec = CountVectorizer().fit(TOY)
    lda = LatentDirichletAllocation(n_components=4, random_state=0, max_iter=10).fit(
        vec.transform(TOY).astype(np.float32))
    assert lda.components_.dtype == np.float32
    counts = _toy_counts(vec, n=60)
    ref = lda.transform(counts)
    calls = _calls(lda, monkeypatch)
    got = lda_transform(lda, counts)
    assert got.dtype == np.float32 and np.array_equal(got, ref) and len(calls) == 1
