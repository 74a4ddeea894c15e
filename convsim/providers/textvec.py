"""Fast ``transform`` for fitted scikit-learn word vectorisers: the same matrix, less Python.

scikit-learn's ``CountVectorizer.transform`` (and ``TfidfVectorizer``'s) builds every feature of
every text — each unigram, and for ``ngram_range=(1, 2)`` a joined string for every adjacent pair
— and only then looks each up in the fitted vocabulary, dropping the unknown ones. On short
dialogue turns nearly every bigram is unknown: in bench/metrics_scale.py that lookup loop was
about a fifth of TAS/CAS. :class:`FastCounts` looks up only what can be in the vocabulary (a pair
is joined only when its first word starts some vocabulary bigram) and builds the CSR count matrix
itself, sorted as scikit-learn sorts it, so the result is the same matrix, bit for bit (tests
compare it with scikit-learn's on varied text). TF-IDF weighting, L2 normalisation and LDA then run
in scikit-learn as before.

It handles the configurations convsim fits (``analyzer="word"``, default preprocessing with
``lowercase`` and no accent stripping, a ``token_pattern``, optional stop words, word 1- or
1–2-grams, ``input="content"``); any other vectoriser (for instance one loaded from an older
run's ``topics_lda.joblib`` with other settings) goes through its own ``transform``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


def _supported(vec) -> bool:
    return (getattr(vec, "analyzer", None) == "word" and getattr(vec, "preprocessor", 0) is None
            and getattr(vec, "tokenizer", 0) is None and not getattr(vec, "strip_accents", 1)
            and getattr(vec, "input", None) == "content" and getattr(vec, "ngram_range", None) in ((1, 1), (1, 2))
            and not getattr(vec, "binary", True) and isinstance(getattr(vec, "vocabulary_", None), dict)
            and isinstance(getattr(vec, "token_pattern", None), str))


class FastCounts:
    """``transform(texts)`` equal to ``vec.transform(texts)`` for a fitted Count/TfidfVectorizer."""

    def __init__(self, vec) -> None:
        self.vec = vec
        self.fast = _supported(vec)
        if not self.fast:
            return
        self.vocab: dict[str, int] = vec.vocabulary_
        self.pattern = re.compile(vec.token_pattern)
        if self.pattern.groups > 1:  # scikit-learn refuses these; let it say so
            self.fast = False
            return
        self.lower = bool(vec.lowercase)
        stop = vec.get_stop_words()
        self.stop = frozenset(stop) if stop is not None else None
        self.bigrams = vec.ngram_range == (1, 2)
        # a pair "a b" can be a feature only if "a" starts some vocabulary bigram
        self.first = frozenset(f.split(" ", 1)[0] for f in self.vocab if " " in f) if self.bigrams else frozenset()
        from sklearn.feature_extraction.text import TfidfVectorizer
        self.tfidf = getattr(vec, "_tfidf", None) if isinstance(vec, TfidfVectorizer) else None
        if isinstance(vec, TfidfVectorizer) and self.tfidf is None:
            self.fast = False

    def counts(self, texts: Sequence[str]):
        """The raw count matrix of texts (``str``; ``CountVectorizer.transform``, for a TF-IDF
        vectoriser before weighting)."""
        vocab, stop, first, findall = self.vocab, self.stop, self.first, self.pattern.findall
        indices: list[int] = []
        values: list[int] = []
        indptr = [0]
        for doc in texts:
            tokens = findall(doc.lower() if self.lower else doc)
            if stop is not None:
                tokens = [t for t in tokens if t not in stop]
            row: dict[int, int] = {}
            for t in tokens:
                k = vocab.get(t)
                if k is not None:
                    row[k] = row.get(k, 0) + 1
            if self.bigrams:
                for a, b in zip(tokens, tokens[1:]):
                    if a in first:
                        k = vocab.get(a + " " + b)
                        if k is not None:
                            row[k] = row.get(k, 0) + 1
            for k in sorted(row):
                indices.append(k)
                values.append(row[k])
            indptr.append(len(indices))
        kind = np.int64 if indptr[-1] > np.iinfo(np.int32).max else np.int32
        return sp.csr_matrix((np.asarray(values, dtype=self.vec.dtype), np.asarray(indices, dtype=kind),
                              np.asarray(indptr, dtype=kind)), shape=(len(indptr) - 1, len(vocab)))

    def transform(self, texts: Sequence[str]):
        """What ``vec.transform(texts)`` returns (TF-IDF weighted for a ``TfidfVectorizer``)."""
        texts = list(texts)
        if not self.fast or not all(isinstance(t, str) for t in texts):  # bytes, NaN: scikit-learn's rules
            return self.vec.transform(texts)
        counts = self.counts(texts)
        return self.weighted(counts) if self.tfidf is not None else counts

    def weighted(self, counts):
        """``TfidfTransformer.transform(counts, copy=False)``: the same steps on the same arrays
        (log + 1 for ``sublinear_tf``, times ``idf_``, scikit-learn's own in-place row normaliser),
        without its input validation, which costs ~1 ms a call: as much as weighting 40 texts."""
        t = self.tfidf
        try:
            from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l1, inplace_csr_row_normalize_l2
        except ImportError:  # moved in another scikit-learn: its transform is the reference
            return t.transform(counts, copy=False)
        if counts.dtype not in (np.float64, np.float32) or t.norm not in (None, "l1", "l2"):
            return t.transform(counts, copy=False)
        if t.sublinear_tf:
            np.log(counts.data, counts.data)
            counts.data += 1.0
        if hasattr(t, "idf_"):
            counts.data *= t.idf_[counts.indices]
        if t.norm == "l2":
            inplace_csr_row_normalize_l2(counts)
        elif t.norm == "l1":
            inplace_csr_row_normalize_l1(counts)
        return counts
