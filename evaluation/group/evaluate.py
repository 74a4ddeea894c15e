"""All group-planning metrics of one dialogue (M1–M16, W1–W3) from plain data.

Used by the graph's ``evaluate_dialogue`` node and by ``convsim.evaluation.group.dialogue_csv.evaluate_group_csv``.
Thresholds are recorded with the embedder's name in the returned settings.
"""

from __future__ import annotations

from convsim.catalog.travel import KINDS, TravelDB
from convsim import make_embedder
from convsim.evaluation.group.metrics import dialogue_only_metrics, strategy_effect_rate
from convsim.evaluation.group.plan_metrics import (M8_THRESHOLD, M10_THRESHOLD, M15_THRESHOLD, concession_rate,
                                           fairness_gini, placed_addressing_rate, plan_coherence,
                                           plan_grounding_rate, plan_repairs, preference_addressing_rate,
                                           semantic_satisfaction,
                                           serendipity)
from convsim.evaluation.group.plan_feasibility import plan_satisfaction
from convsim.evaluation.group.plan_parse import intent_slot, stated_preferences


SEMANTIC_METRICS = ("M8 semantic channel", "M10 semantic channel", "M12", "M14", "M15")


def semantic_label(embedder_name: str) -> str:
    """How to read the semantic metrics: sentence-transformer cosines at the spec's thresholds,
    or, with TF-IDF, lexical approximations (TF-IDF cosines are far lower than
    sentence-transformer cosines, so the spec's thresholds rarely fire)."""
    if str(embedder_name).startswith("tfidf"):
        return f"lexical approximation (TF-IDF cosine; {', '.join(SEMANTIC_METRICS)})"
    return f"semantic ({embedder_name}; spec thresholds M8 0.45, M10 0.42, M15 0.30)"


def embedder_corpus(db: TravelDB) -> list[str]:
    """Every record's description: with the dialogue's utterances, the TF-IDF fitting corpus."""
    return [TravelDB.record_text(k, r) for k in KINDS for r in getattr(db, k)]


class CachedSimilarity:
    """An embedder whose texts are encoded once each (the metrics compare the same few dozen
    texts hundreds of times); same ``name`` and cosine as the wrapped embedder."""

    def __init__(self, embedder):
        self.inner, self.name, self._vecs = embedder, embedder.name, {}

    def _vec(self, text: str):
        if text not in self._vecs:
            self._vecs[text] = self.inner.encode([text])[0]
        return self._vecs[text]

    def encode(self, texts: list[str]):
        return self.inner.encode(texts)

    def similarity(self, a: str, b: str) -> float:
        return float(self._vec(a) @ self._vec(b))


def dialogue_embedder(spec: str, db: TravelDB, turns: list[dict]):
    """The semantic metrics' embedder for one dialogue: fitted (TF-IDF) on the dialogue's catalog
    records and utterances, so a live session and its exported CSV score the same."""
    return CachedSimilarity(make_embedder(spec, corpus=embedder_corpus(db) + [t["utterance"] for t in turns]))


def transcript_to_turns(transcript: list[dict]) -> list[dict]:
    """Engine transcript items -> metric turns ``{"speaker", "intent", "utterance", "meta"}``."""
    return [{"speaker": t["speaker"], "intent": (t.get("meta") or {}).get("intent", ""),
             "utterance": t["text"], "meta": t.get("meta") or {}} for t in transcript]


def evaluate_group_dialogue(turns: list[dict], plan: dict | None, db: TravelDB, *, flags: dict,
                            embedder, members: list[dict] | None = None) -> tuple[dict, dict]:
    """``(metrics, settings)``; ``members`` (simulation only) adds welfare over every member's
    private preferences (``W*_all_members``), which C1 cannot show in its dialogue."""
    plan = plan or {}
    out = dialogue_only_metrics(turns, flags)
    prefs = stated_preferences(turns)
    synth = " ".join(t["utterance"] for t in turns if t["intent"].startswith("sys_synthesize_"))
    plan_text = " ".join([t["utterance"] for t in turns if t["intent"] == "sys_present_plan"]
                         + [str(plan.get("raw_output", ""))]).strip()
    out["M8"] = preference_addressing_rate(prefs, f"{synth} {plan_text}", embedder=embedder)
    out["M8a"] = preference_addressing_rate(prefs, synth, embedder=embedder)
    out["M8b"] = preference_addressing_rate(prefs, plan_text, embedder=embedder)
    # what the plan places, not what it says (the paste of every wish raises M8, not this)
    out["M8_placed"] = placed_addressing_rate(prefs, plan=plan, db=db, embedder=embedder)
    out["M9"] = plan_grounding_rate(plan, db)
    out["M9_repairs"] = plan_repairs(plan)
    # satisfaction of the plan a member would live through, scaled by the plan's precision, capped
    # at 0 for an over-full plan (evaluation/group/plan_feasibility.py)
    group_size = int(flags.get("member_count") or max(len({m for m, _ in prefs}), 1))
    scored = plan_satisfaction(prefs, plan=plan, db=db, embedder=embedder, group_size=group_size)
    table = scored["table"]
    out.update(scored["metrics"])
    # M4 from behaviour: a named strategy counts only when its effect is in the lived plan (the
    # table's verdicts, none for an over-full plan: its quality factor is 0)
    quality = scored["metrics"].get("plan_quality_factor")
    met = {k: bool(ch["room_type"] if k[1] == "lodging" and ch.get("room_type") is not None else ch["satisfied"])
           and (quality is None or quality > 0) for k, ch in table.items()}
    out["M4"] = strategy_effect_rate(turns, met, use_social_theory=bool(flags.get("use_social_theory")))
    out["M10_pairs"] = len(table)
    out["M10_satisfied_pairs"] = sum(ch["satisfied"] for ch in table.values())
    out["M12"], member_means = semantic_satisfaction(prefs, plan=plan, embedder=embedder, db=db)
    out["M13"] = fairness_gini(member_means)
    # M14 reads the synthesis's own explanation; a turn without the field (a CSV written
    # elsewhere) falls back to its utterance, and the settings say so
    explanations: dict[str, str] = {}
    fallback = False
    for t in turns:
        if t["intent"].startswith("sys_synthesize_"):
            meta = t.get("meta") or {}
            own = meta.get("resolution_explanation") if "resolution_explanation" in meta else t["utterance"]
            fallback |= "resolution_explanation" not in meta
            if own:
                slot = intent_slot(t["intent"])
                explanations[slot] = f"{explanations.get(slot, '')} {own}".strip()
    out["M14"] = concession_rate(prefs, explanations, embedder=embedder)
    out["M15"] = serendipity(plan, db, list(prefs.values()), embedder=embedder)
    out["M16"] = plan_coherence(plan)
    if members:
        private = {(m["name"], s): p["text"] for m in members for s, p in m["preferences"].items()}
        all_w = plan_satisfaction(private, plan=plan, db=db, embedder=embedder, group_size=group_size)["metrics"]
        out.update({f"{k}_all_members": all_w[k] for k in ("W1", "W2", "W3", "W3_zero_members", "M11")})
    name = getattr(embedder, "name", str(embedder))
    settings = {"embedder": name,
                "thresholds": {"M8": M8_THRESHOLD, "M10": M10_THRESHOLD, "M15": M15_THRESHOLD},
                "spec": "docs/group_planning.md",
                "semantic_label": semantic_label(name),
                "M14_explanation_source": "synthesis utterance (no resolution_explanation field)" if fallback
                else "resolution_explanation"}
    return out, settings
