"""Topic extraction for TAS/CAS: LDA (default), a keyword heuristic (fallback), an LLM mode.

Every extractor has ``name`` and ``topics(text) -> frozenset[str]``; an empty set means the text
carries no topic information (the shift detector then ignores it).

* :class:`LdaTopics`: scikit-learn ``LatentDirichletAllocation`` trained on the catalog's plots and
  genres (one document per movie). A text's topics are the top words of every LDA topic whose
  weight in the text is at least ``min_prob`` (the original: top-5 words of the dominant topic,
  p >= 0.1); a text with no in-vocabulary word has none. Saved with the run
  (``<run_dir>/topics_lda.joblib``) and reloaded from there, so a run's topics can be reproduced.
  Its E-step runs all texts of a batch at once (:func:`lda_transform`), giving scikit-learn's
  ``transform`` to rounding.
* :class:`KeywordTopics`: the catalog's genre names and frequent plot words found in the text
  (word boundaries), used when LDA cannot be trained or loaded.
* :class:`LlmTopics`: a chat model lists the topics as JSON; a failed answer falls back to the
  keyword heuristic and the failure is counted (``failures``) with its raw answer.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import joblib
import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from convsim.providers.textvec import FastCounts
from convsim.lazy import cached_once

log = logging.getLogger(__name__)

LDA_FILE = "topics_lda.joblib"
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_STOP = frozenset("""the a an and or of to in on for with that this what who how about like some any more movie
movies film films me you it is are be do does something have has was were his her their they them he she
its from into after when while where which him she but not all one two can will would could should there
just really want looking mood recommend recommendation please also other than then only very much""".split())


def catalog_documents(movies: Sequence) -> list[str]:
    """One LDA document per movie: its plot and its genres (``convsim.catalog.movies.catalog.Movie`` or dicts)."""
    docs = []
    for m in movies:
        plot = getattr(m, "plot", None) if not isinstance(m, dict) else m.get("plot")
        genres = getattr(m, "genres", None) if not isinstance(m, dict) else m.get("genre")
        docs.append(" ".join([plot or "", *(genres or [])]))
    return docs


_ESTEP_DOCS = 4096  # documents per chunk of the vectorised E-step
_ESTEP_CELLS = 1 << 22  # and at most this many (document, word slot, topic) cells: 32 MB of float64


def _estep_inputs(lda, X):
    """What :func:`lda_transform` needs from a fitted ``LatentDirichletAllocation``, or ``None`` when
    the model or the input is not the kind it reproduces (then scikit-learn's ``transform`` runs)."""
    try:
        from sklearn.decomposition import LatentDirichletAllocation
        from sklearn.decomposition._online_lda_fast import _dirichlet_expectation_2d
    except ImportError:  # scikit-learn's internals moved: its own transform is the reference
        return None
    if type(lda) is not LatentDirichletAllocation or not sp.issparse(X) or X.format != "csr":
        return None
    try:
        comp, beta = lda.components_, lda.exp_dirichlet_component_
        prior, max_iter, tol = float(lda.doc_topic_prior_), int(lda.max_doc_update_iter), float(lda.mean_change_tol)
    except (AttributeError, TypeError, ValueError):
        return None
    # float64 only: a float32 model's E-step mixes float and double arithmetic in Cython
    if not (isinstance(comp, np.ndarray) and isinstance(beta, np.ndarray) and comp.dtype == np.float64
            and beta.dtype == np.float64 and beta.ndim == 2 and beta.shape == comp.shape
            and X.shape[1] == beta.shape[1] == getattr(lda, "n_features_in_", beta.shape[1])):
        return None
    data = np.asarray(X.data, dtype=np.float64)
    if data.size and not (np.isfinite(data).all() and data.min() >= 0):
        return None  # scikit-learn raises on these: let it
    return _dirichlet_expectation_2d, np.ascontiguousarray(beta.T), prior, max_iter, tol, data


def lda_transform(lda, X) -> np.ndarray:
    """``lda.transform(X)`` for a fitted scikit-learn ``LatentDirichletAllocation`` and a CSR count
    matrix, with the E-step run on all documents at once instead of one by one in Python.

    scikit-learn's ``_update_doc_distribution`` iterates each document on its own: from
    ``gamma = 1`` (``exp(E[log theta])`` by its ``_dirichlet_expectation_2d``), at most
    ``max_doc_update_iter`` times, ``phi_norm = exp(E[log theta]) . exp(E[log beta])[:, ids] + eps``,
    ``gamma = exp(E[log theta]) * ((counts / phi_norm) . exp(E[log beta])[:, ids].T) + doc_topic_prior``,
    ``exp(E[log theta]) = exp(psi(gamma) - psi(sum gamma))``, stopping once the mean absolute change of
    ``gamma`` is below ``mean_change_tol``; ``transform`` then normalises each row. Here the same
    iteration runs on a chunk of documents padded to its longest (sorted by length, so the padding
    is small), and a document is recorded, and later dropped, at the iteration where its own mean
    change falls below the tolerance, or at the cap: the same stopping rule and cap, per document.
    Every parameter is the fitted model's (``exp_dirichlet_component_``, ``doc_topic_prior_``,
    ``max_doc_update_iter``, ``mean_change_tol``, float64 ``eps``), and so is the digamma: its Cython
    ``_dirichlet_expectation_2d``, an approximation of psi that differs from ``scipy.special.psi``
    by up to ~2e-9, too much to use here.

    The result matches scikit-learn's to ~1e-15 (tests: < 1e-12 on thousands of texts), not bit for
    bit: the sums over topics and words run in another order than its BLAS dot products, and ``exp``
    is numpy's, so each iterate differs from scikit-learn's in the last bits. The stopping iteration
    is therefore the same except when a document's mean change lands within rounding (~1e-19) of
    the tolerance, a measure-zero tie that no test has met. The sums are ``einsum``'s, which adds a
    document's words in order, so the padding's zero counts come last and add exactly nothing: a
    text's weights are the same, bit for bit, whatever other texts share its batch (``matmul`` is
    ~10% faster, but its kernels change with the padded length, and with them the last bits).
    Chunks of at most 4,096 documents and ~4M cells bound the memory. A model of another kind (a
    subclass, a float32 model, missing attributes), a matrix that is not CSR, or counts
    scikit-learn would reject go through ``lda.transform``.
    """
    got = _estep_inputs(lda, X)
    if got is None:
        return lda.transform(X)
    dirichlet_expectation_2d, beta_t, prior, max_iter, tol, data = got
    n_topics = beta_t.shape[1]
    eps = np.finfo(np.float64).eps
    indptr, indices = X.indptr, X.indices
    n_docs = X.shape[0]
    lengths = np.diff(indptr)
    order = np.argsort(lengths, kind="stable")
    sorted_len = np.maximum(lengths[order], 1)
    gamma = np.empty((n_docs, n_topics))
    exp_theta0 = np.exp(dirichlet_expectation_2d(np.ones((1, n_topics))))
    start = 0
    while start < n_docs:
        # lengths ascend, so a chunk's cells are its size times its last document's length
        ends = np.arange(1, min(_ESTEP_DOCS, n_docs - start) + 1)
        cells = ends * sorted_len[start:start + len(ends)] * n_topics
        stop = start + max(1, int(np.searchsorted(cells, _ESTEP_CELLS, side="right")))
        docs = order[start:stop]
        start = stop
        lens = lengths[docs]
        slots = np.arange(int(lens.max()))
        filled = slots < lens[:, None]
        src = (indptr[docs][:, None] + slots)[filled]
        ids = np.zeros(filled.shape, dtype=np.intp)
        ids[filled] = indices[src]
        counts = np.zeros(filled.shape)
        counts[filled] = data[src]
        beta_d = beta_t[ids]  # (docs, slots, topics)
        exp_theta = np.repeat(exp_theta0, len(docs), axis=0)
        last = np.ones((len(docs), n_topics))
        going = np.ones(len(docs), dtype=bool)  # not converged yet
        n_going = len(docs)
        for _ in range(max_iter):
            phi_norm = np.einsum("dwk,dk->dw", beta_d, exp_theta)
            phi_norm += eps
            new = np.einsum("dw,dwk->dk", counts / phi_norm, beta_d)
            new *= exp_theta
            new += prior
            done = np.add.reduce(np.abs(last - new), axis=1) / n_topics < tol  # scikit-learn's mean_change
            last = new
            done &= going  # a converged document's later iterates are discarded
            if done.any():
                gamma[docs[done]] = new[done]
                going &= ~done
                n_going -= int(np.count_nonzero(done))
                if not n_going:
                    break
                if 4 * n_going < 3 * len(docs):  # drop the converged rows once they are a quarter
                    docs, beta_d, counts, last = docs[going], beta_d[going], counts[going], last[going]
                    going = np.ones(n_going, dtype=bool)
            exp_theta = np.exp(dirichlet_expectation_2d(last))
        else:  # the iteration cap: the documents still going keep their last iterate
            gamma[docs[going]] = last[going]
    gamma /= gamma.sum(axis=1)[:, np.newaxis]
    return gamma


class LdaTopics:
    name = "lda"

    def __init__(self, vectorizer, lda, *, top_words: int = 5, min_prob: float = 0.2, dominant: bool = False):
        """``dominant=False``: a text's topics are the words of every LDA topic with weight >=
        ``min_prob``; ``True``: the words of its one dominant topic when its weight is >= ``min_prob``
        (the paper's ``extract_topics_lda``: top-5 words of the best topic, minimum probability 0.1)."""
        self.vectorizer, self.lda = vectorizer, lda
        self.top_words, self.min_prob, self.dominant = top_words, min_prob, dominant
        self._counts = FastCounts(vectorizer).transform  # vectorizer.transform's matrix, less Python
        vocab = np.array(vectorizer.get_feature_names_out())
        # A topic that learned nothing has a flat word distribution; its "top words" would be
        # arbitrary, so it contributes no words.
        self.topic_words = [frozenset(vocab[np.argsort(row)[::-1][:top_words]])
                            if row.max() > 2 * np.median(row) else frozenset() for row in lda.components_]

    @classmethod
    def train(cls, documents: Sequence[str], *, n_topics: int = 20, seed: int = 0, **kw) -> "LdaTopics":
        from sklearn.decomposition import LatentDirichletAllocation
        from sklearn.feature_extraction.text import CountVectorizer
        vec = CountVectorizer(stop_words=sorted(_STOP | _sklearn_stop()), token_pattern=r"(?u)\b[a-zA-Z]{3,}\b",
                              min_df=2, max_df=0.3, max_features=4000)
        counts = vec.fit_transform(documents)
        lda = LatentDirichletAllocation(n_components=n_topics, random_state=seed, learning_method="batch",
                                        max_iter=15).fit(counts)
        return cls(vec, lda, **kw)

    def save(self, path: Path) -> Path:
        joblib.dump({"vectorizer": self.vectorizer, "lda": self.lda, "top_words": self.top_words,
                     "min_prob": self.min_prob}, path)
        return path

    @classmethod
    def load(cls, path: Path) -> "LdaTopics":
        blob = joblib.load(path)
        return cls(blob["vectorizer"], blob["lda"], top_words=blob["top_words"], min_prob=blob["min_prob"])

    def topics_many(self, texts: Sequence[str]) -> list[frozenset[str]]:
        # Template utterances repeat; the LDA E-step is the cost, so each distinct text runs once.
        uniq = list(dict.fromkeys(t or "" for t in texts))
        found = dict(zip(uniq, self._topics_distinct(uniq)))
        return [found[t or ""] for t in texts]

    def _topics_distinct(self, texts: Sequence[str]) -> list[frozenset[str]]:
        counts = self._counts(texts)
        # The E-step treats each text on its own, so texts with no in-vocabulary word (no topics)
        # are left out of it: the others' weights are the same, bit for bit.
        filled = np.flatnonzero(np.diff(counts.indptr) > 0)
        out = [frozenset()] * counts.shape[0]
        if not len(filled):
            return out
        weights = lda_transform(self.lda, counts[filled])
        chosen = weights >= self.min_prob
        if self.dominant:  # only the best topic (the first on a tie, as max() over the paper's list)
            best = np.zeros_like(chosen)
            best[np.arange(len(weights)), np.argmax(weights, axis=1)] = True
            chosen &= best
        # A text's topics are the union of its chosen topics' words: one union per distinct choice
        # (a few dozen in thousands of texts), each row's choice read as the bytes of its bits.
        width = (chosen.shape[1] + 7) // 8
        packed = np.packbits(chosen, axis=1).tobytes()
        words_of: dict[bytes, frozenset[str]] = {}
        for n, i in enumerate(filled.tolist()):
            key = packed[n * width:(n + 1) * width]
            words = words_of.get(key)
            if words is None:
                words = words_of[key] = frozenset().union(*(self.topic_words[k] for k in np.flatnonzero(chosen[n])))
            out[i] = words
        return out

    def topics(self, text: str) -> frozenset[str]:
        return self.topics_many([text])[0]


def _sklearn_stop() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return frozenset(ENGLISH_STOP_WORDS)


class KeywordTopics:
    """Topics = catalog keywords in the text: genre names plus the ``n_plot_words`` most frequent
    plot words (document frequency, stop words removed)."""

    name = "keyword"

    def __init__(self, keywords: Sequence[str]):
        self.keywords = frozenset(k.lower() for k in keywords if k)
        multi = sorted((k for k in self.keywords if " " in k), key=lambda k: (-len(k), k))  # not set order
        self._multi = [(k, re.compile(rf"(?<!\w){re.escape(k)}(?!\w)")) for k in multi]

    @classmethod
    def from_catalog(cls, movies: Sequence, *, n_plot_words: int = 300) -> "KeywordTopics":
        df: Counter = Counter()
        genres: set[str] = set()
        for doc, m in zip(catalog_documents(movies), movies):
            genres.update(g.lower() for g in ((m.get("genre") if isinstance(m, dict) else m.genres) or []))
            plot = doc.lower()
            df.update({w for w in _WORD.findall(plot) if w not in _STOP and w not in _sklearn_stop()})
        # ties broken by word, genres sorted: both came in set order, which follows string hashing
        top = sorted(df.items(), key=lambda item: (-item[1], item[0]))[:n_plot_words]
        return cls([*sorted(genres), *(w for w, _ in top)])

    def topics(self, text: str) -> frozenset[str]:
        low = (text or "").lower()
        found = {w for w in _WORD.findall(low) if w in self.keywords}
        found |= {k for k, rx in self._multi if rx.search(low)}
        return frozenset(found)

    def topics_many(self, texts: Sequence[str]) -> list[frozenset[str]]:
        return [self.topics(t) for t in texts]


class TopicList(BaseModel):
    topics: list[str] = Field(max_length=8, description="up to 5 short topic words or phrases")


class LlmTopics:
    """Topics from a chat model (``ChatModel.structured``); failures fall back to ``fallback``."""

    name = "llm"

    def __init__(self, model, fallback: KeywordTopics):
        self.model, self.fallback = model, fallback
        self.failures: list[dict] = []

    def topics(self, text: str) -> frozenset[str]:
        prompt = ("List the main topics (genres, themes, people, moods) of this message about movies as "
                  f"at most 5 short lowercase words or phrases.\nMessage: {text}")
        res = self.model.structured([("user", prompt)], TopicList, purpose="topics")
        if not res.ok:
            self.failures.append({"text": text, "raw": res.raw, "error": res.error})
            return self.fallback.topics(text)
        return frozenset(t.strip().lower() for t in res.value.topics if t.strip())

    def topics_many(self, texts: Sequence[str]) -> list[frozenset[str]]:
        return [self.topics(t) for t in texts]


def corpus_fingerprint(documents: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=8)
    for d in documents:
        h.update(d.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


@cached_once(maxsize=4)
def _trained(fingerprint: str, documents: tuple[str, ...], n_topics: int, seed: int) -> LdaTopics:
    return LdaTopics.train(list(documents), n_topics=n_topics, seed=seed)


@contextmanager
def _run_dir_lock(run_dir: Path):
    """An exclusive lock on the run directory while the topic model is loaded or trained: process
    and Ray workers of one machine start together, and without it each trained its own (~1.3 s of
    CPU per worker); with it the first trains and saves, the others load. No-op without flock."""
    try:
        import fcntl
    except ImportError:  # not POSIX: each process may train, as before
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def lda_for_run(documents: Sequence[str], run_dir: str | Path | None, *, n_topics: int = 20,
                seed: int = 0) -> LdaTopics:
    """The run's LDA model: loaded from ``<run_dir>/topics_lda.joblib`` when it was trained on the same
    corpus, else trained (once per process) and saved there. Processes sharing the run directory
    take turns (:func:`_run_dir_lock`), so one of them trains it."""
    if run_dir:
        with _run_dir_lock(Path(run_dir)):
            return _lda_for_run(documents, run_dir, n_topics=n_topics, seed=seed)
    return _lda_for_run(documents, None, n_topics=n_topics, seed=seed)


def _lda_for_run(documents: Sequence[str], run_dir: str | Path | None, *, n_topics: int, seed: int) -> LdaTopics:
    fp = corpus_fingerprint(documents)
    path = Path(run_dir) / LDA_FILE if run_dir else None
    if path is not None and path.exists():
        try:
            model = LdaTopics.load(path)
            if getattr(model.lda, "convsim_corpus", None) == fp:
                return model
        except Exception as exc:  # noqa: BLE001 - a damaged file is retrained, not fatal
            log.warning("cannot reload %s (%s); retraining", path, exc)
    model = _trained(fp, tuple(documents), n_topics, seed)
    model.lda.convsim_corpus = fp
    if path is not None:
        # write then rename, so a concurrent session (or worker process) never reads half a file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        model.save(tmp)
        os.replace(tmp, path)
    return model


def make_topic_extractor(mode: str, movies: Sequence, *, run_dir: str | Path | None = None, model=None):
    """``lda`` (falls back to ``keyword`` when training fails), ``keyword``, or ``llm`` (needs a model
    that is not ``none``; else keyword)."""
    keyword = KeywordTopics.from_catalog(movies)
    if mode == "keyword":
        return keyword
    if mode == "llm":
        return LlmTopics(model, keyword) if model is not None and not model.is_none else keyword
    if mode != "lda":
        raise ValueError(f"topic mode must be lda, keyword or llm, got {mode!r}")
    try:
        return lda_for_run(catalog_documents(movies), run_dir)
    except (ValueError, OSError) as exc:
        log.warning("LDA topics unavailable (%s); using the keyword heuristic", exc)
        return keyword
