"""TAS/CAS and anchor metrics of one CRS transcript, and the graph nodes that add them.

``tas_cas_for_transcript`` turns a transcript (``{"turn", "speaker", "text", "meta"}`` items,
user turns carrying the simulator's ``shift_event``) into the inputs of convsim.evaluation.crs.tas_cas:
texts, topic sets, embedding similarities (computed once per dialogue, batched), true shifts.
``tas_cas_node`` and ``pepper_judge_node`` are the dialogue-stage nodes graphs/crs_shift.py
runs after the last turn; each merges its metrics into ``dialogue_metrics``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from convsim import make_embedder
from convsim.evaluation.crs.coverage import coverage_metrics, hidden_targets
from convsim.evaluation.crs.tas_cas import CAS_WEIGHTS, tas_cas_dialogue
from convsim.evaluation.crs.topics import make_topic_extractor
from convsim.lazy import cached_once


def _user_meta(turn: Mapping) -> dict:
    meta = turn.get("meta") or {}
    inner = meta.get("user_meta")
    return inner if isinstance(inner, dict) else meta


def turn_pairs(transcript: Sequence[Mapping]) -> list[tuple[Mapping, Mapping]]:
    """(user, system) pairs in order: each user turn with the first system turn after it."""
    pairs, pending = [], None
    for t in transcript:
        if str(t.get("speaker", "")).lower() == "user":
            pending = t
        elif pending is not None:
            pairs.append((pending, t))
            pending = None
    return pairs


# encodings of texts outside the dialogue (topic joins), per embedder: held weakly, so they go with their
# embedder (keyed by id(embedder), an id reused after collection read the old embedder's vectors)
_MISSES: "weakref.WeakKeyDictionary[object, dict[str, np.ndarray]]" = weakref.WeakKeyDictionary()
_MISSES_MAX = 100_000  # texts memoised per embedder


class VectorSim:
    """Cosine similarity over vectors encoded once (rows L2-normalised by the embedder). Texts that were
    not pre-encoded (joined topic words) are encoded on first use and memoised per embedder."""

    def __init__(self, embedder, texts: Sequence[str], vectors: np.ndarray | None = None,
                 index: Mapping[str, int] | None = None):
        """``vectors``: the texts' rows, encoded already (row ``i`` for ``texts[i]``, or for a
        text ``t`` row ``index[t]`` when ``index`` is given: a batch's matrix shared by its dialogues)."""
        if vectors is None:
            uniq = list(dict.fromkeys(texts))
            self.index = {t: i for i, t in enumerate(uniq)}
            self.vectors = embedder.encode(uniq) if uniq else np.zeros((0, 1))
        else:
            self.index = index if index is not None else {t: i for i, t in enumerate(texts)}
            self.vectors = vectors
        self.embedder = embedder

    def vector(self, text: str) -> np.ndarray:
        i = self.index.get(text)
        if i is not None:
            return self.vectors[i]
        memo = _MISSES.get(self.embedder)
        if memo is None:
            memo = _MISSES.setdefault(self.embedder, {})
        vec = memo.get(text)
        if vec is None:
            if len(memo) >= _MISSES_MAX:
                memo.clear()
            vec = memo[text] = self.embedder.encode([text])[0]
        return vec

    def __call__(self, a: str, b: str) -> float:
        return float(np.dot(self.vector(a), self.vector(b)))

    def segment(self, texts: Sequence[str]):
        """``segment_sim(seg, i)``: cosine of u_i to the centroid of the segment's turns."""
        index, vectors = self.index, self.vectors

        def segment_sim(seg: Sequence[int], i: int) -> float:
            rows = [index.get(texts[j]) for j in seg]
            if None in rows:  # a text encoded apart (not one of the batch's)
                c = np.sum([self.vector(texts[j]) for j in seg], axis=0)
            else:  # the same rows summed the same way (axis 0 of the stacked rows), one numpy call
                c = vectors[rows].sum(axis=0)
            norm = float(np.sqrt(c.dot(c)))  # what np.linalg.norm computes for a vector, without its checks
            return float(np.dot(c, self.vector(texts[i])) / norm) if norm else 0.0
        return segment_sim


def _texts(pairs) -> list[str]:
    return [str(p[0].get("text", "")) for p in pairs] + [str(p[1].get("text", "")) for p in pairs]


def _tas_cas(pairs, topic_sets, sim: VectorSim, topic_name: str, weights, rule, compare="segment",
             recovery_on="simulator", recovery_search="segment", segment_topics_of=None) -> dict:
    if not pairs:
        return {"tas_cas": None}
    n = len(pairs)
    texts = _texts(pairs)
    has_meta = any("shift_event" in _user_meta(p[0]) for p in pairs)
    true = [i for i, p in enumerate(pairs) if _user_meta(p[0]).get("shift_event")] if has_meta else None
    out = tas_cas_dialogue(texts[:n], texts[n:], topic_sets[:n], topic_sets[n:], sim=sim, true_shifts=true,
                           weights=weights, rule=rule, segment_sim=sim.segment(texts[:n]),
                           compare=compare, recovery_on=recovery_on, recovery_search=recovery_search,
                           segment_topics_of=segment_topics_of)
    out["tas_cas_topic_mode"] = topic_name
    return out


def tas_cas_for_transcript(transcript: Sequence[Mapping], *, topics, embedder,
                           weights: Mapping[str, float] = CAS_WEIGHTS, rule: str = "and",
                           compare: str = "segment", recovery_on: str = "simulator",
                           recovery_search: str = "segment") -> dict:
    """The ``tas_cas*`` and ``shift_detect*`` metrics of one transcript (convsim.evaluation.crs.tas_cas)."""
    return tas_cas_many([transcript], topics=topics, embedder=embedder, weights=weights, rule=rule,
                        compare=compare, recovery_on=recovery_on, recovery_search=recovery_search)[0]


def tas_cas_many(transcripts: Sequence[Sequence[Mapping]], *, topics, embedder,
                 weights: Mapping[str, float] = CAS_WEIGHTS, rule: str = "and", batch: int = 64,
                 compare: str = "segment", recovery_on: str = "simulator",
                 recovery_search: str = "segment") -> list[dict]:
    """``tas_cas_for_transcript`` over many transcripts, topics and embeddings computed per batch
    (one vectoriser / LDA call per batch instead of per dialogue). With ``recovery_search="to_end"``
    (the paper's) a segment's topics are those of its joined user text, as the paper's code took them."""
    segment_topics_of = topics.topics_many if recovery_search == "to_end" else None
    out: list[dict] = []
    for start in range(0, len(transcripts), batch):
        chunk = [turn_pairs(t) for t in transcripts[start:start + batch]]
        texts = [x for pairs in chunk for x in _texts(pairs)]
        topic_sets = topics.topics_many(texts) if texts else []
        uniq = list(dict.fromkeys(texts))
        row = {t: i for i, t in enumerate(uniq)}
        vectors = embedder.encode(uniq) if uniq else None  # one row per distinct text, shared
        pos = 0
        for pairs in chunk:
            k = 2 * len(pairs)
            sim = VectorSim(embedder, texts[pos:pos + k], vectors if k else None, index=row)
            out.append(_tas_cas(pairs, topic_sets[pos:pos + k], sim, topics.name, weights, rule,
                                compare, recovery_on, recovery_search, segment_topics_of))
            pos += k
    return out


# --------------------------------------------------------------------------- graph nodes

TFIDF_MODES = ("project", "paper")


@cached_once(maxsize=4)
def _embedder(spec: str, catalog, tfidf: str = "project") -> object:
    """The TAS/CAS similarity embedder. For ``spec="tfidf"``, ``tfidf="project"`` fits one document
    per film ("title plot") with sublinear TF (1 + ln tf); ``"paper"`` is the original CAS embedder:
    titles and plots as separate documents, raw term counts (scikit-learn's default). Both: word 1-2
    grams, English stop words, 4,096 features, L2 rows."""
    if tfidf not in TFIDF_MODES:
        raise ValueError(f"tfidf must be one of {TFIDF_MODES}, got {tfidf!r}")
    if tfidf == "paper":
        corpus = [x for m in catalog.movies for x in (m.title, m.plot) if x]
        return make_embedder(spec, corpus=corpus, sublinear_tf=False)
    corpus = [f"{m.title} {m.plot}" for m in catalog.movies]
    return make_embedder(spec, corpus=corpus, sublinear_tf=True)


_TOPICS: "OrderedDict[tuple, tuple[object, object]]" = OrderedDict()  # key -> (catalog, extractor)
_TOPICS_LOCK = threading.Lock()  # sessions in threads wait for one LDA training, not train it each
_TOPICS_KEPT = 8  # the extractors of the last few runs of a process (one LDA model each), not all


def topic_extractor(mode: str, catalog, run_dir, model=None):
    """The run's shared topic extractor. Kept with its catalog, so a catalog that took the id of a
    collected one never gets the other's extractor; the oldest is dropped past ``_TOPICS_KEPT``."""
    if mode == "llm":  # LLM topics are per model handle; not shared across sessions
        return make_topic_extractor(mode, catalog.movies, run_dir=run_dir, model=model)
    key = (mode, id(catalog), str(run_dir))
    with _TOPICS_LOCK:
        entry = _TOPICS.get(key)
        if entry is None or entry[0] is not catalog:
            entry = _TOPICS[key] = (catalog, make_topic_extractor(mode, catalog.movies, run_dir=run_dir))
        _TOPICS.move_to_end(key)
        while len(_TOPICS) > _TOPICS_KEPT:
            _TOPICS.popitem(last=False)
        return entry[1]


def tas_cas_metrics(state: Mapping, *, catalog, embedder_spec: str = "tfidf", topic_mode: str = "lda",
                    run_dir=None, model=None, rule: str = "and", compare: str = "segment",
                    recovery_on: str = "simulator", details: dict | None = None,
                    top_k: int = 10, recovery_search: str = "segment", tfidf: str = "project") -> dict:
    """TAS/CAS + PEPPER coverage / Recall@K of a finished session's state (each logged top-k list
    read to its first ``top_k`` ids, the run's K).

    With ``topic_mode="llm"`` the topics model's invalid answers (each text then takes the keyword
    topics) are counted (``topic_model_failures``), the mode reads ``llm+keyword-fallback`` when
    any text fell back, and each failure with its raw answer goes to ``details["topic_failures"]``.
    """
    transcript = state.get("transcript") or []
    topics = topic_extractor(topic_mode, catalog, run_dir, model)
    out = tas_cas_for_transcript(transcript, topics=topics, embedder=_embedder(embedder_spec, catalog, tfidf),
                                 rule=rule, compare=compare, recovery_on=recovery_on,
                                 recovery_search=recovery_search)
    out.update(coverage_metrics(transcript, hidden_targets(state), top_k=top_k))  # lists cut to the run's K
    if topic_mode == "llm":
        failures = list(getattr(topics, "failures", None) or [])  # this session's extractor (not shared)
        out["topic_model_failures"] = len(failures)
        if failures and out.get("tas_cas_topic_mode") == "llm":
            out["tas_cas_topic_mode"] = "llm+keyword-fallback"
        if details is not None:
            details["topic_failures"] = failures
    return out


def merge_dialogue_metrics(state: Mapping, new: Mapping) -> dict:
    return {"dialogue_metrics": {**(state.get("dialogue_metrics") or {}), **new}}
