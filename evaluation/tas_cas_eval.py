"""TAS/CAS and anchor metrics of one CRS transcript, and the graph nodes that add them.

``tas_cas_for_transcript`` turns a transcript (``{"turn", "speaker", "text", "meta"}`` items,
user turns carrying the simulator's ``shift_event``) into the inputs of evaluation.tas_cas:
texts, topic sets, embedding similarities (computed once per dialogue, batched), true shifts.
``tas_cas_node`` and ``pepper_judge_node`` are the dialogue-stage nodes graphs/crs_shift.py
runs after the last turn; each merges its metrics into ``dialogue_metrics``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from convsim import make_embedder
from evaluation.crs_coverage import coverage_metrics
from evaluation.tas_cas import CAS_WEIGHTS, tas_cas_dialogue
from evaluation.topics import make_topic_extractor


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


class VectorSim:
    """Cosine similarity over vectors encoded once (rows L2-normalised by the embedder)."""

    def __init__(self, embedder, texts: Sequence[str]):
        self.index = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        self.vectors = embedder.encode(list(self.index)) if self.index else np.zeros((0, 1))
        self.embedder = embedder

    def vector(self, text: str) -> np.ndarray:
        i = self.index.get(text)
        return self.vectors[i] if i is not None else self.embedder.encode([text])[0]

    def __call__(self, a: str, b: str) -> float:
        return float(np.dot(self.vector(a), self.vector(b)))

    def segment(self, texts: Sequence[str]):
        """``segment_sim(seg, i)``: cosine of u_i to the centroid of the segment's turns."""
        def segment_sim(seg: Sequence[int], i: int) -> float:
            c = np.sum([self.vector(texts[j]) for j in seg], axis=0)
            norm = float(np.linalg.norm(c))
            return float(np.dot(c, self.vector(texts[i])) / norm) if norm else 0.0
        return segment_sim


def tas_cas_for_transcript(transcript: Sequence[Mapping], *, topics, embedder,
                           weights: Mapping[str, float] = CAS_WEIGHTS, rule: str = "and") -> dict:
    """The ``tas_cas*`` and ``shift_detect*`` metrics of one transcript (evaluation.tas_cas)."""
    pairs = turn_pairs(transcript)
    u = [str(p[0].get("text", "")) for p in pairs]
    s = [str(p[1].get("text", "")) for p in pairs]
    if not pairs:
        return {"tas_cas": None}
    all_topics = topics.topics_many(u + s)
    sim = VectorSim(embedder, u + s)
    has_meta = any("shift_event" in _user_meta(p[0]) for p in pairs)
    true = [i for i, p in enumerate(pairs) if _user_meta(p[0]).get("shift_event")] if has_meta else None
    out = tas_cas_dialogue(u, s, all_topics[:len(u)], all_topics[len(u):], sim=sim, true_shifts=true,
                           weights=weights, rule=rule, segment_sim=sim.segment(u))
    out["tas_cas_topic_mode"] = topics.name
    return out


# --------------------------------------------------------------------------- graph nodes

@functools.lru_cache(maxsize=4)
def _embedder(spec: str, catalog) -> object:
    corpus = [f"{m.title} {m.plot}" for m in catalog.movies]
    return make_embedder(spec, corpus=corpus)


_TOPICS: dict[tuple, object] = {}


def topic_extractor(mode: str, catalog, run_dir, model=None):
    key = (mode, id(catalog), str(run_dir))
    if mode == "llm":  # LLM topics are per model handle; not shared across sessions
        return make_topic_extractor(mode, catalog.movies, run_dir=run_dir, model=model)
    if key not in _TOPICS:
        _TOPICS[key] = make_topic_extractor(mode, catalog.movies, run_dir=run_dir)
    return _TOPICS[key]


def tas_cas_metrics(state: Mapping, *, catalog, embedder_spec: str = "tfidf", topic_mode: str = "lda",
                    run_dir=None, model=None) -> dict:
    """TAS/CAS + PEPPER coverage / Recall@K of a finished session's state."""
    transcript = state.get("transcript") or []
    topics = topic_extractor(topic_mode, catalog, run_dir, model)
    out = tas_cas_for_transcript(transcript, topics=topics, embedder=_embedder(embedder_spec, catalog))
    out.update(coverage_metrics(transcript))
    return out


def merge_dialogue_metrics(state: Mapping, new: Mapping) -> dict:
    return {"dialogue_metrics": {**(state.get("dialogue_metrics") or {}), **new}}
