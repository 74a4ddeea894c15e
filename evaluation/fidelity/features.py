"""Distances between simulated and human user turns, each with a dialogue-level bootstrap CI.

Every measure is a function of two lists of dialogues (``corpus.py``'s shape) returning
``(human_value, simulated_value, distance)``; :func:`distance_table` runs them all and resamples
dialogues (with replacement, both sides independently) for a percentile CI of each distance.

==================  ===============================================  ==========================
measure             per-unit value                                   distance
==================  ===============================================  ==========================
words_per_turn      words in a user turn                             Wasserstein-1 (words)
turns_per_dialogue  user turns in a dialogue                         Wasserstein-1 (turns)
slots_per_turn      distinct slots informed in a user turn           Wasserstein-1 (slots)
first_turn_slots    distinct slots informed in the first user turn   Wasserstein-1 (slots)
constraint_order    the order in which search constraints are first  Jensen-Shannon distance
                    informed (``food>area``), first three                (base 2, 0..1)
act_mix             a turn's set of intents, among the intents the   Jensen-Shannon distance
                    human corpus annotates (others count as none)
request_share       requests / (requests + informs) over all acts    |sim - human|
distinct_1/2        distinct n-grams / n-grams in a window of 50     |sim - human|
                    turns, averaged over random windows (distinct-n
                    falls as text grows: a fixed window makes
                    corpora of any size comparable)
word_mix            the frequency of each word over all user turns   Jensen-Shannon distance
                    (the vocabulary as people use it: a simulator
                    repeating itself or missing people's words
                    drifts even when every word it says is known)
oov_share           tokens outside the vocabulary of a reference     sim - human (one-sided:
                    half of the human corpus; the human value is      fewer unknown words than
                    the other half's                                  people is no defect)
==================  ===============================================  ==========================

The Wasserstein and Jensen-Shannon distances are scipy's (``scipy.stats.wasserstein_distance``,
``scipy.spatial.distance.jensenshannon``). Two samples of the same population give small positive
distances (sampling noise), not zero: read a distance beside the human-vs-human one (the
``human_split`` column of the runner).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import wasserstein_distance

TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
SEARCH_INTENTS = ("inform",)
NOT_CONSTRAINTS = ("phone", "address", "postcode", "entrancefee", "trainid", "price", "duration", "ref")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def tokens_of(turn: dict) -> list[str]:
    """The turn's tokens, computed once (cached in the turn under ``_tokens``)."""
    tok = turn.get("_tokens")
    if tok is None:
        tok = turn["_tokens"] = tokens(turn["text"])
    return tok


def informed(turn: dict) -> set[str]:
    return {s for i, s in turn["acts"] if i == "inform" and s}


def _words(dialogues):
    return [len(tokens_of(t)) for d in dialogues for t in d["turns"]]


def _turns(dialogues):
    return [len(d["turns"]) for d in dialogues]


def _slots(dialogues):
    return [len(informed(t)) for d in dialogues for t in d["turns"]]


def _first(dialogues):
    return [len(informed(d["turns"][0])) for d in dialogues]


def order_signature(dialogue: dict, k: int = 3) -> str:
    seen: list[str] = []
    for t in dialogue["turns"]:
        for i, s in t["acts"]:
            if i == "inform" and s and s not in seen and s not in NOT_CONSTRAINTS and not s.startswith("book"):
                seen.append(s)
    return ">".join(seen[:k]) or "(none)"


def _orders(dialogues):
    return [order_signature(d) for d in dialogues]


def act_label(turn: dict, intents: set[str]) -> str:
    cached = turn.get("_act_label")
    if cached is not None and cached[0] is intents:
        return cached[1]
    label = "+".join(sorted({i for i, _ in turn["acts"] if i in intents})) or "(none)"
    turn["_act_label"] = (intents, label)
    return label


def human_intents(human: Sequence[dict]) -> set[str]:
    return {i for d in human for t in d["turns"] for i, _ in t["acts"]}


def _js(a: Sequence[str], b: Sequence[str]) -> float:
    ca, cb = Counter(a), Counter(b)
    keys = sorted(set(ca) | set(cb))
    if not keys or not a or not b:
        return float("nan")
    p = np.array([ca[k] for k in keys], dtype=float)
    q = np.array([cb[k] for k in keys], dtype=float)
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2))


def _w(a: Sequence[float], b: Sequence[float]) -> float:
    return float(wasserstein_distance(a, b)) if len(a) and len(b) else float("nan")


def _top(values: Sequence[str], k: int = 2) -> str:
    c = Counter(values)
    n = sum(c.values()) or 1
    return ", ".join(f"{key} {cnt / n:.2f}" for key, cnt in c.most_common(k))


def _numeric(extract: Callable) -> Callable:
    def measure(human, sim, _ctx):
        h, s = extract(human), extract(sim)
        return (float(np.mean(h)) if h else float("nan"), float(np.mean(s)) if s else float("nan"), _w(h, s))
    return measure


def _categorical(extract: Callable) -> Callable:
    def measure(human, sim, ctx):
        h, s = extract(human, ctx), extract(sim, ctx)
        return _top(h), _top(s), _js(h, s)
    return measure


def _request_share(dialogues) -> float:
    c = Counter(i for d in dialogues for t in d["turns"] for i, _ in t["acts"] if i in ("request", "inform"))
    total = c["request"] + c["inform"]
    return c["request"] / total if total else float("nan")


DISTINCT_WINDOW = 50  # turns per window of distinct-n


def _distinct(dialogues, n: int, rng, window: int = DISTINCT_WINDOW) -> float:
    """Mean distinct-n over random windows of ``window`` turns (all turns when fewer): distinct-n
    falls as text grows, so a fixed window makes corpora of any size comparable."""
    turns = [_grams(t, n) for d in dialogues for t in d["turns"]]
    if not turns:
        return float("nan")
    order = rng.permutation(len(turns))
    chunks = [order[i:i + window] for i in range(0, max(len(turns) - window + 1, 1), window)]
    values = []
    for chunk in chunks:
        grams = [turns[i] for i in chunk]
        total = sum(len(g) for g in grams)
        if total:
            values.append(len(set().union(*grams)) / total)
    return float(np.mean(values)) if values else float("nan")


def _grams(turn: dict, n: int) -> tuple:
    key = f"_grams{n}"
    if key not in turn:
        w = tokens_of(turn)
        turn[key] = tuple(" ".join(w[i:i + n]) for i in range(len(w) - n + 1))
    return turn[key]


def _distinct_measure(n: int) -> Callable:
    def measure(human, sim, ctx):
        rng = np.random.default_rng(ctx["seed"])
        h, s = _distinct(human, n, rng), _distinct(sim, n, rng)
        return h, s, abs(s - h)
    return measure


def _words_said(dialogues) -> list[str]:
    return [w for d in dialogues for t in d["turns"] for w in tokens_of(t)]


def _oov(dialogues, vocab: set[str]) -> float:
    unknown = total = 0
    for d in dialogues:
        for t in d["turns"]:
            cached = t.get("_oov")
            if cached is None or cached[0] is not vocab:
                cached = t["_oov"] = (vocab, sum(w not in vocab for w in tokens_of(t)), len(tokens_of(t)))
            unknown += cached[1]
            total += cached[2]
    return unknown / total if total else float("nan")


def _oov_measure(human, sim, ctx):
    vocab = ctx["vocab"]
    h, s = _oov(human, vocab), _oov(sim, vocab)
    return h, s, s - h


MEASURES: dict[str, tuple[Callable, str, str]] = {
    "words_per_turn": (_numeric(_words), "mean", "Wasserstein (words)"),
    "turns_per_dialogue": (_numeric(_turns), "mean", "Wasserstein (turns)"),
    "slots_per_turn": (_numeric(_slots), "mean", "Wasserstein (slots)"),
    "first_turn_slots": (_numeric(_first), "mean", "Wasserstein (slots)"),
    "constraint_order": (_categorical(lambda ds, _c: _orders(ds)), "top orders", "Jensen-Shannon"),
    "act_mix": (_categorical(lambda ds, c: [act_label(t, c["intents"]) for d in ds for t in d["turns"]]),
                "top act sets", "Jensen-Shannon"),
    "request_share": (lambda h, s, _c: (_request_share(h), _request_share(s),
                                        abs(_request_share(s) - _request_share(h))), "share", "|difference|"),
    "distinct_1": (_distinct_measure(1), "distinct-1", "|difference|"),
    "distinct_2": (_distinct_measure(2), "distinct-2", "|difference|"),
    "word_mix": (_categorical(lambda ds, _c: _words_said(ds)), "top words", "Jensen-Shannon"),
    "oov_share": (_oov_measure, "share", "sim - human"),
}


def split_reference(human: Sequence[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """The human corpus in two random halves: the vocabulary half and the compared half."""
    idx = np.random.default_rng(seed).permutation(len(human))
    half = len(human) // 2
    return [human[i] for i in idx[:half]], [human[i] for i in idx[half:]]


def context(human: Sequence[dict], seed: int = 0) -> tuple[dict, list[dict]]:
    """What every measure needs beside the two corpora: the human intent set, the reference
    vocabulary (from one half of the human corpus), and the compared human half for oov_share."""
    ref, rest = split_reference(human, seed)
    return {"intents": human_intents(human), "vocab": {w for d in ref for t in d["turns"] for w in tokens_of(t)},
            "seed": seed, "human_rest": rest}, rest


def distance_table(human: Sequence[dict], sim: Sequence[dict], *, n_boot: int = 200, seed: int = 0,
                   ctx: dict | None = None, measures: Sequence[str] | None = None) -> list[dict]:
    """One row per measure: human value, simulated value, distance and its bootstrap CI (95%,
    percentile, dialogues resampled on both sides)."""
    if ctx is None:
        ctx, _ = context(human, seed)
    human = list(human)
    sim = list(sim)
    rows = []
    rng = np.random.default_rng(seed + 1)
    for name in measures or MEASURES:
        fn, value_kind, dist_kind = MEASURES[name]
        base = ctx["human_rest"] if name == "oov_share" else human
        hv, sv, dist = fn(base, sim, ctx)
        boots = []
        for b in range(n_boot):
            hb = [base[i] for i in rng.integers(0, len(base), len(base))]
            sb = [sim[i] for i in rng.integers(0, len(sim), len(sim))]
            boots.append(fn(hb, sb, dict(ctx, seed=seed + 7 + b))[2])
        boots = np.asarray([x for x in boots if np.isfinite(x)], dtype=float)
        lo, hi = (np.percentile(boots, [2.5, 97.5]) if len(boots) else (float("nan"), float("nan")))
        rows.append({"measure": name, "value": value_kind, "distance_kind": dist_kind,
                     "human": hv, "simulated": sv, "distance": dist, "ci_low": float(lo), "ci_high": float(hi),
                     "n_human": len(base), "n_simulated": len(sim)})
    return rows
