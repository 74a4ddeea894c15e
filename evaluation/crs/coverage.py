"""Anchor-compatible recommendation metrics from logged top-k lists (crs.md §2.1, §4.7).

* PEPPER Preference Coverage: PC_t = |(∪_{t' ≤ t} top-k_{t'}) ∩ targets| / |targets|.
* iEvaLM Recall@K: 1 if a target is in the top-K of the *last* turn that has a recommendation list.

Each logged list is cut to the run's ``top_k`` (the K the recommender is asked for, param
``top_k``, default 10) before it is scored: coverage is the union of the lists, so an agent that
logged its whole catalog in one turn got PC = 1.0 (above the oracle's 0.75) while naming nothing.

Targets are the simulated user's *hidden* target films (agents/crs/profile.py): drawn at the
start from its latent taste, never named by the user, never shown to the CRS. They are read from
the session's final ``user_state["targets"]``; a transcript without them gets None, not a score.
(Scoring against the anchors the user named itself, as an earlier version did, gave Recall = 1.0
in every session: a recommender repeating the user's own film "found" it.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TOP_K_KEYS = ("top_k", "topk", "rec_ids", "recommended")


def preference_coverage(top_k_lists: Sequence[Sequence[str]], targets: set[str] | frozenset[str]) -> list[float] | None:
    """PC_t for t = 1..T over the per-turn top-k lists; None when there are no targets."""
    if not targets:
        return None
    seen: set[str] = set()
    wanted = set(targets)
    out = []
    for items in top_k_lists:
        seen.update(items)
        out.append(len(seen & wanted) / len(targets))
    return out


def recall_at_k(top_k_lists: Sequence[Sequence[str]], targets: set[str] | frozenset[str], k: int) -> float | None:
    """1.0 if any target is in the first k items of the last non-empty list, else 0.0; None when
    there are no targets or no turn recommended anything (iEvaLM `Rec_eval.py`)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not targets:
        return None
    lists = [items for items in top_k_lists if items]
    if not lists:
        return None
    return 1.0 if set(lists[-1][:k]) & set(targets) else 0.0


def system_top_k(turn: Mapping) -> list[str]:
    """The item ids a system turn logged (the first of TOP_K_KEYS found in its meta)."""
    meta = turn.get("meta") or {}
    for key in TOP_K_KEYS:
        if isinstance(meta.get(key), list):
            return [str(x) for x in meta[key]]
    return []


def hidden_targets(state: Mapping) -> set[str]:
    """The simulated user's hidden target films of a finished session, those valid at the end (they
    follow the user's shifts): ``state["user_hidden"]["targets"]``, else its final state's, else
    those its first turn logged in ``meta.hidden_targets`` (a transcript evaluated offline);
    empty when unknown."""
    hidden = state.get("user_hidden") or {}  # where the user keeps them (no agent slot reads it)
    if hidden.get("targets"):
        return {str(t) for t in hidden["targets"]}
    user_state = state.get("user_state") or {}
    if user_state.get("targets"):
        return {str(t) for t in user_state["targets"]}
    for turn in state.get("transcript") or []:
        meta = turn.get("meta") or {}
        if str(turn.get("speaker", "")).lower() == "user" and meta.get("hidden_targets"):
            return {str(t) for t in meta["hidden_targets"]}
    return set()


DEFAULT_TOP_K = 10  # graphs/crs_shift.Params.top_k's default


def coverage_metrics(transcript: Sequence[Mapping], targets: set[str] | frozenset[str], *,
                     ks: Sequence[int] = (1, 5, 10), top_k: int = DEFAULT_TOP_K) -> dict:
    """``pc_final`` (PC at the last turn), ``pc_mean`` (mean PC over turns) and ``recall_at_<k>``
    against the hidden ``targets``, each turn's logged list cut to its first ``top_k`` ids (the
    run's K; a longer list is not read past it, so logging more films buys no coverage)."""
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    lists = [system_top_k(t)[:top_k] for t in transcript if str(t.get("speaker", "")).lower() != "user"]
    pc = preference_coverage(lists, targets) if lists else None
    out = {"pc_final": pc[-1] if pc else None, "pc_mean": sum(pc) / len(pc) if pc else None}
    for k in ks:
        out[f"recall_at_{k}"] = recall_at_k(lists, targets, k)
    return out
