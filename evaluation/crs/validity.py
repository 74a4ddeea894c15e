"""Validity of the CRS metrics against reference systems of known quality
(configs/crs_reference.yaml, docs/crs_shift.md "Reference systems").

A metric that claims to measure recommendation quality must order the references the way their
construction orders them. ``reference_checks`` states each claim and whether a run meets it:

* recall_at_10 and pc_final: oracle > random and oracle > template (the oracle ranks by the
  user's true taste); recall_at_1: oracle > random;
* target_recall_at_10 of the oracle below 1.0 (it does not know the targets, only the taste they
  were drawn from);
* the adaptation metrics (the headline, evaluation/crs/adaptation.py): oracle > template > random;
* echo_turn_share: echo, parrot, echo_plus_fixed_film flagged (>= 0.5 of their turns), no
  film-naming reference flagged (< 0.1); restate_turn_share: no honest reference flagged (< 0.1);
* every gaming reference (also restate_titles and paraphrase) flagged or at/below the template on
  every adaptation metric;
and it flags **every variant of the run** (a researcher's own agents too, whatever their name) on
behaviour (:func:`flag_reasons`): echo or restating share >= 0.5, or a grounded TAS above the
template's while following shifts or naming fitting films worse;
* judge_heuristic_personalization (when reported): random < oracle; otherwise the heuristic
  judge must not be reported.

It also states the **known gaming results** (keys starting ``gameable:``): orderings in which a
reference of no recommendation value beats a recommender, on metrics that cannot tell them apart
by construction (TAS rewards restating and copying the user; DST precision rewards naming only the
user's constraints; the hallucination count punishes naming a film's attributes). True means the
metric is still gameable as docs/metrics.md and docs/crs_shift.md say; a False one means the
documented note is stale. They are facts to read beside the metric, not goals.

``reference_validity(run_dir)`` is the run's analysis hook: it prints the ordering of every
reference variant per metric and writes ``reference_validity.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from convsim.results.recordset import RecordSet
from convsim.results.summary import SCORED_STATUSES

# the headline adaptation metrics (evaluation/crs/adaptation.py): higher is better, read on the films named
ADAPTATION_METRICS = ("adapt_shift_rate", "named_precision", "hit_rate", "target_recall_at_10")
ORDERED_METRICS = (*ADAPTATION_METRICS, "restate_turn_share", "recall_at_10", "recall_at_1", "pc_final", "tas_grounded", "tas_cas",
                   "tas_cas_ti_norm", "tas_cas_rd_norm", "recovery_rate", "echo_turn_share",
                   "dst_precision_mean", "dst_f1_mean", "dst_joint_mean",
                   "hallucinated_concepts_total", "judge_heuristic_coherence",
                   "judge_heuristic_personalization")

# the shipped gaming references (convsim.agents.crs.references.GAMING_AGENTS; a test keeps the two equal):
# they have no recommendation value by construction, so the echo share must flag them
GAMING_REFERENCES = ("echo", "parrot", "echo_plus_fixed_film", "restate_titles", "paraphrase")
ECHO_FLAGGED = ("echo", "parrot", "echo_plus_fixed_film")  # the echo share must flag these three
FLAG_SHARE = 0.5    # a variant restating (or echoing) in at least this share of its turns is flagged
HONEST_SHARE = 0.1  # a film-naming reference must stay under this share
GAMEABLE = "gameable: "  # the prefix of a known gaming result

# (metric, winner, loser, why): the known gaming results, each a ">=" between two references
GAMING_RESULTS = (
    ("tas_grounded", "parrot", "template", "TAS is gameable by copying: a verbatim copy scores 1 + 1 - 1 = 1, the maximum"),
    ("tas_grounded", "echo", "template", "TAS is gameable by restating the user's concepts without a film"),
    ("tas_grounded", "echo_plus_fixed_film", "template", "one fixed film beside the echo keeps TAS near the echo's"),
    ("recovery_rate", "parrot", "template", "grounded recovery (CC >= tau) is reached by copying, not by following the shift"),
    ("tas_cas", "echo", "template", "TAS/CAS is 60 % embedding similarity of u_i and s_i, which restating maximises"),
    ("tas_cas_ti_norm", "echo", "oracle", "no film named, no old topic carried: no interference"),
    ("tas_cas_rd_norm", "echo", "oracle", "restating the new request is 'recovery' at once"),
    ("dst_precision_mean", "echo", "oracle", "E(S) = the user's concepts: precision 1 without tracking state"),
    ("dst_f1_mean", "echo", "oracle", "as dst_precision"),
    ("dst_joint_mean", "echo", "oracle", "as dst_precision"),
    ("judge_heuristic_coherence", "echo", "oracle", "the heuristic counts words shared with the user turn"),
    ("hallucinated_concepts_total", "oracle", "echo", "naming a film's attributes counts as hallucinating; "
     "lower is not better here"),
)


def agent_of(record: Mapping) -> str:
    return str((record.get("params") or {}).get("crs_agent", "template"))


def agent_means(records: Sequence[Mapping], metrics: Sequence[str] = ORDERED_METRICS
                ) -> dict[str, dict[str, float | None]]:
    """``{agent: {metric: mean over scored sessions}}`` (None when no session has the metric)."""
    values: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if r.get("status", "ok") not in SCORED_STATUSES:
            continue
        dm = r.get("dialogue_metrics") or {}
        row = values.setdefault(agent_of(r), {m: [] for m in metrics})
        for m in metrics:
            v = dm.get(m)
            if isinstance(v, (int, float)) and math.isfinite(v):
                row[m].append(float(v))
    return {a: {m: (sum(v) / len(v) if v else None) for m, v in row.items()}
            for a, row in values.items()}


def _gt(means, metric, hi, lo) -> bool | None:
    a, b = means.get(hi, {}).get(metric), means.get(lo, {}).get(metric)
    return None if a is None or b is None else a > b


def _ge(means, metric, hi, lo) -> bool | None:
    a, b = means.get(hi, {}).get(metric), means.get(lo, {}).get(metric)
    return None if a is None or b is None else a >= b


def reference_checks(means: Mapping[str, Mapping[str, float | None]]) -> dict[str, bool | None]:
    """Each claimed ordering -> True / False (None when the run lacks the variants), then each
    known gaming result (``gameable: ...``) -> True while the metric is still gameable that way."""
    checks = {}
    for metric in ("recall_at_10", "pc_final"):
        for lo in ("random", "template"):
            checks[f"{metric}: oracle > {lo}"] = _gt(means, metric, "oracle", lo)
    checks["recall_at_1: oracle > random"] = _gt(means, "recall_at_1", "oracle", "random")
    for metric in ADAPTATION_METRICS:  # the headline: oracle > template > random
        checks[f"{metric}: oracle > template"] = _gt(means, metric, "oracle", "template")
        checks[f"{metric}: template > random"] = _gt(means, metric, "template", "random")
    oracle_recall = means.get("oracle", {}).get("target_recall_at_10")
    checks["target_recall_at_10: oracle < 1.0"] = None if oracle_recall is None else oracle_recall < 1.0
    for agent in ECHO_FLAGGED:
        share = means.get(agent, {}).get("echo_turn_share")
        checks[f"echo_turn_share: {agent} flagged"] = None if share is None else share >= FLAG_SHARE
    naming = [m.get("echo_turn_share") for a, m in means.items() if a not in GAMING_REFERENCES]
    checks["echo_turn_share: film-naming systems not flagged"] = (
        None if not naming or None in naming else all(v < HONEST_SHARE for v in naming))
    honest = [m.get("restate_turn_share") for a, m in means.items() if a in HONEST_REFERENCES]
    checks["restate_turn_share: honest references not flagged"] = (
        None if not honest or None in honest else all(v < HONEST_SHARE for v in honest))
    for agent in GAMING_REFERENCES:
        checks[f"gaming: {agent} flagged or at/below the template"] = _flagged_or_not_above(means, agent)

    checks["judge_heuristic_personalization: oracle > random"] = _gt(
        means, "judge_heuristic_personalization", "oracle", "random")
    for metric, hi, lo, why in GAMING_RESULTS:
        checks[f"{GAMEABLE}{metric}: {hi} >= {lo} ({why})"] = _ge(means, metric, hi, lo)
    return checks


HONEST_REFERENCES = ("template", "oracle", "titles_only", "random")


TAS_LEAD = 0.05  # a TAS lead over the template larger than this must come with films


def flag_reasons(row: Mapping[str, float | None], base: Mapping[str, float | None] | None = None) -> list[str]:
    """Why a variant is flagged as gaming, on behaviour whatever its name or wording (empty: not flagged):
    it echoes (restates, names no film) or restates the user's values without a named film carrying them
    in at least FLAG_SHARE of its turns; or (``base``: the template's means) its grounded TAS is above
    the template's by more than TAS_LEAD while it follows shifts or names fitting films worse
    (adapt_shift_rate or named_precision below the template's): TAS won on words, not films."""
    reasons = [f"{m} {row[m]:.2f} >= {FLAG_SHARE}" for m in ("echo_turn_share", "restate_turn_share")
               if (row.get(m) or 0.0) >= FLAG_SHARE]
    if base and row.get("tas_grounded") is not None and base.get("tas_grounded") is not None \
            and row["tas_grounded"] > base["tas_grounded"] + TAS_LEAD:
        worse = [m for m in ("adapt_shift_rate", "named_precision")
                 if (row.get(m) or 0.0) < (base.get(m) or 0.0) - 1e-9]
        if worse:
            reasons.append(f"TAS above the template's without better films ({', '.join(worse)} below)")
    return reasons


def flagged(row: Mapping[str, float | None], base: Mapping[str, float | None] | None = None) -> bool:
    return bool(flag_reasons(row, base))


def _flagged_or_not_above(means, agent) -> bool | None:
    """True when ``agent`` is flagged, or scores at or below the template on every adaptation metric."""
    row, base = means.get(agent), means.get("template")
    if row is None or base is None:
        return None
    if flagged(row, base):
        return True
    pairs = [(row.get(m), base.get(m)) for m in ADAPTATION_METRICS]
    return all(a is None or b is None or a <= b + 1e-9 for a, b in pairs)


def variant_flags(means: Mapping[str, Mapping[str, float | None]]) -> dict[str, list[str]]:
    """Every variant of the run (the shipped references and any other agent) -> its flag reasons."""
    base = means.get("template")
    return {agent: flag_reasons(row, base if agent != "template" else None) for agent, row in means.items()}


def ordering(means: Mapping[str, Mapping[str, float | None]], metric: str) -> list[tuple[str, float]]:
    rows = [(a, m[metric]) for a, m in means.items() if m.get(metric) is not None]
    return sorted(rows, key=lambda r: -r[1])


def reference_validity(run_dir: Path) -> dict:
    means = agent_means(RecordSet.scan(Path(run_dir) / "results.jsonl"))  # read one record at a time
    out = {"means": means, "checks": reference_checks(means), "flags": variant_flags(means),
           "ordering": {m: ordering(means, m) for m in ORDERED_METRICS}}
    (Path(run_dir) / "reference_validity.json").write_text(json.dumps(out, indent=2),
                                                          encoding="utf-8")
    for metric, rows in out["ordering"].items():
        if rows:
            print(f"{metric}: " + " > ".join(f"{a} {v:.3f}" for a, v in rows))
    for agent, reasons in sorted(out["flags"].items()):  # every variant, flagged on behaviour or not
        print(f"  variant {agent}: " + (f"FLAGGED as gaming ({'; '.join(reasons)})" if reasons else "not flagged"))
    for claim, ok in out["checks"].items():
        if claim.startswith(GAMEABLE):  # a known weakness: True = still gameable as documented
            print(f"  [{'GAMEABLE' if ok else 'n/a' if ok is None else 'no longer (update the docs)'}] "
                  f"{claim[len(GAMEABLE):]}")
        else:
            print(f"  [{'ok' if ok else 'n/a' if ok is None else 'FAILED'}] {claim}")
    return out
