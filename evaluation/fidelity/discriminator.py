"""Can a classifier tell the simulated user from the human one?

A scikit-learn pipeline -- TF-IDF word 1-2-grams of the user's words plus the standardised numeric
features of ``features.py`` (words, slots informed, requests, informs, position; per dialogue
their means and the turn count) -- into a class-balanced logistic regression, cross-validated
(``StratifiedGroupKFold``: the turns of one dialogue never sit on both sides of a split, so a
dialogue's own wording cannot leak). The score is the ROC AUC of the out-of-fold probabilities:
0.5 = indistinguishable, 1.0 = always told apart. Its 95% CI resamples *dialogues* (the out-of-fold
scores of a dialogue's turns move together).

Cross-validated AUC is biased below 0.5 when the two sides do not differ (a test fold's items pull
the training means of their own class away from themselves: "anti-learning"; about 0.48 for one
half of WOZ 2.0 against the other). So the same CV is also run ``null_repeats`` times with the
dialogues' labels shuffled, and the reported ``auc`` and its CI are shifted by that chance level's
distance from 0.5 (clipped to [0, 1]), the CI widened by the shuffled runs' spread (1.96 sd, added
in quadrature to the bootstrap's half-widths); ``auc_raw`` and ``null_auc`` keep the uncorrected
figures.
The most telling features are the largest
coefficients of the model fitted on all of the data (positive: simulated-like).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from convsim.evaluation.fidelity.features import informed, tokens_of

TURN_FEATURES = ("n_words", "n_informed", "n_requests", "n_informs", "position")
DIALOGUE_FEATURES = ("n_turns", "mean_words", "mean_informed", "first_informed", "n_requests", "n_informs")


def turn_frame(dialogues: Sequence[dict], label: int) -> pd.DataFrame:
    rows = []
    for d in dialogues:
        for i, t in enumerate(d["turns"]):
            intents = [a for a, _ in t["acts"]]
            rows.append({"text": " ".join(tokens_of(t)), "n_words": len(tokens_of(t)),
                         "n_informed": len(informed(t)), "n_requests": intents.count("request"),
                         "n_informs": intents.count("inform"), "position": i, "group": d["id"], "y": label})
    return pd.DataFrame(rows)


def dialogue_frame(dialogues: Sequence[dict], label: int) -> pd.DataFrame:
    rows = []
    for d in dialogues:
        turns = d["turns"]
        intents = [a for t in turns for a, _ in t["acts"]]
        rows.append({"text": " | ".join(" ".join(tokens_of(t)) for t in turns), "n_turns": len(turns),
                     "mean_words": float(np.mean([len(tokens_of(t)) for t in turns])),
                     "mean_informed": float(np.mean([len(informed(t)) for t in turns])),
                     "first_informed": len(informed(turns[0])), "n_requests": intents.count("request"),
                     "n_informs": intents.count("inform"), "group": d["id"], "y": label})
    return pd.DataFrame(rows)


def _pipeline(numeric: Sequence[str], seed: int) -> Pipeline:
    return Pipeline([
        ("features", ColumnTransformer([
            ("words", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, token_pattern=r"\S+"), "text"),
            ("numeric", StandardScaler(), list(numeric))])),
        # liblinear: the same fit as lbfgs on these sparse features (AUCs equal to three decimals on
        # WOZ 2.0) at about a third of the CPU (bench/fidelity_solver.py: 6.8 s vs 23.4 s for one
        # turn-level discriminator)
        ("clf", LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000, random_state=seed,
                                   solver="liblinear"))])


def _auc_ci(y: np.ndarray, p: np.ndarray, groups: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    uniq, inv = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inv == g) for g in range(len(uniq))]
    by_class = [[g for g in range(len(uniq)) if y[members[g][0]] == c] for c in (0, 1)]
    aucs = []
    for _ in range(n_boot):  # stratified by class: every replicate keeps both
        pick = [g for cls in by_class for g in rng.choice(cls, size=len(cls), replace=True)]
        idx = np.concatenate([members[g] for g in pick])
        aucs.append(roc_auc_score(y[idx], p[idx]))
    lo, hi = np.percentile(aucs, [2.5, 97.5])
    return float(lo), float(hi)


def discriminate(human: Sequence[dict], sim: Sequence[dict], *, level: str = "turn", folds: int = 5,
                 n_boot: int = 300, seed: int = 0, top: int = 8, null_repeats: int = 4) -> dict:
    """ROC AUC [95% CI] of telling ``sim`` (positive class) from ``human`` user turns
    (``level="turn"``) or whole dialogues (``"dialogue"``), and the most telling features."""
    frame_of, numeric = (turn_frame, TURN_FEATURES) if level == "turn" else (dialogue_frame, DIALOGUE_FEATURES)
    data = pd.concat([frame_of(human, 0), frame_of(sim, 1)], ignore_index=True)
    data["group"] = data["group"].astype(str) + "|" + data["y"].astype(str)
    y, groups = data["y"].to_numpy(), data["group"].to_numpy()
    n_groups = [len(set(groups[y == c])) for c in (0, 1)]
    k = min(folds, *n_groups)
    if k < 2:
        return {"level": level, "auc": None, "ci_low": None, "ci_high": None, "n_human": n_groups[0],
                "n_simulated": n_groups[1], "telling": [], "note": "fewer than 2 dialogues on one side"}
    p = _out_of_fold(data, y, groups, numeric, k, seed)
    raw = float(roc_auc_score(y, p))
    raw_lo, raw_hi = _auc_ci(y, p, groups, n_boot, seed)
    # the chance level of the procedure itself: whole dialogues' labels shuffled, same CV
    rng = np.random.default_rng(seed + 17)
    uniq, inv = np.unique(groups, return_inverse=True)
    group_y = np.array([y[inv == g][0] for g in range(len(uniq))])
    null = []
    for r in range(null_repeats):
        y_null = rng.permutation(group_y)[inv]
        null.append(float(roc_auc_score(y_null, _out_of_fold(data, y_null, groups, numeric, k, seed + 1 + r))))
    shift = (float(np.mean(null)) - 0.5) if null else 0.0
    spread = 1.96 * float(np.std(null, ddof=1)) if len(null) > 1 else 0.0  # the split's own noise
    auc = float(np.clip(raw - shift, 0.0, 1.0))
    lo = float(np.clip(raw - shift - np.hypot(raw - raw_lo, spread), 0.0, 1.0))
    hi = float(np.clip(raw - shift + np.hypot(raw_hi - raw, spread), 0.0, 1.0))
    full = _pipeline(numeric, seed).fit(data, y)
    names = full.named_steps["features"].get_feature_names_out()
    coef = full.named_steps["clf"].coef_[0]
    order = np.argsort(-np.abs(coef))[:top]
    telling = [{"feature": str(names[i]).split("__", 1)[-1], "kind": str(names[i]).split("__", 1)[0],
                "weight": float(coef[i]), "leans": "simulated" if coef[i] > 0 else "human"} for i in order]
    return {"level": level, "auc": auc, "ci_low": lo, "ci_high": hi, "auc_raw": raw, "ci_low_raw": raw_lo,
            "ci_high_raw": raw_hi, "null_auc": null, "n_human": n_groups[0], "n_simulated": n_groups[1],
            "folds": k, "telling": telling}


def _out_of_fold(data: pd.DataFrame, y: np.ndarray, groups: np.ndarray, numeric, k: int, seed: int) -> np.ndarray:
    cv = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    p = np.zeros(len(data))
    for train, test in cv.split(data, y, groups):
        model = _pipeline(numeric, seed).fit(data.iloc[train], y[train])
        p[test] = model.predict_proba(data.iloc[test])[:, 1]
    return p
