"""The report's headline numbers, by hand: 3-significant-digit rounding, the baseline difference
and its direction, grouped warnings, status counts, and the variance decomposition across trials."""
import pytest

from convsim.evaluation.reporting.fidelity import random_effects_shares, simulator_flags, status_counts, variance_decomposition
from convsim.evaluation.reporting.headline import choose_baseline, group_warnings, headline_table, sig3


def test_sig3():
    assert [sig3(x) for x in (0.4852415358549975, 1234.5, 12, 0.000123456, -0.5, 0.0, None, 2.0)] == \
        ["0.485", "1230", "12", "0.000123", "-0.5", "0", "—", "2"]


def _rec(variant, sid, value, *, trial=0, status="ok", flags=None):
    return {"variant": variant, "session_id": sid, "trial": trial, "seed": hash((sid, trial)) % 1000,
            "status": status, "simulator_flags": flags or [], "dialogue_metrics": {"m": value}}


def test_baseline_difference_moves_with_an_injected_improvement():
    base = [0.1, 0.5, 0.3, 0.2, 0.4, 0.6]
    recs = [_rec("a", f"s{i}", v) for i, v in enumerate(base)] + \
           [_rec("b", f"s{i}", v + 0.2 + 0.01 * i) for i, v in enumerate(base)]
    table = headline_table(recs, ["a", "b"], ["m"], "a")
    row = table["rows"][0]
    assert row["cells"]["a"]["mean"] == pytest.approx(0.35) and row["cells"]["a"]["n"] == 6
    d = row["diffs"]["b"]
    assert d["test"] == "paired Wilcoxon" and d["n_paired"] == 6
    assert d["diff"] == pytest.approx(0.2 + 0.01 * 2.5) and d["ci_low"] > 0
    assert d["p_holm"] == pytest.approx(d["p"])  # one test: Holm changes nothing
    # against the other baseline the sign flips
    flipped = headline_table(recs, ["a", "b"], ["m"], "b")["rows"][0]["diffs"]["a"]
    assert flipped["diff"] == pytest.approx(-d["diff"])
    # a single variant: no difference at all
    assert headline_table(recs[:6], ["a"], ["m"], "a")["rows"][0]["diffs"] == {}


def test_choose_baseline():
    assert choose_baseline(None, ["x", "y"]) == ("x", None)
    assert choose_baseline("y", ["x", "y"]) == ("y", None)
    chosen, warning = choose_baseline("z", ["x", "y"])
    assert chosen == "x" and "not a variant" in warning


def test_warnings_grouped_by_kind():
    groups = group_warnings(["m1: Spearman needs at least 3 pairs, got 2", "m2: Spearman needs at least 3 pairs, got 1",
                             "m3: a variable is constant"])
    assert [(g["count"], g["example"]) for g in groups] == [
        (2, "m1: Spearman needs at least 3 pairs, got 2"), (1, "m3: a variable is constant")]


def test_status_counts_and_flags():
    recs = [_rec("a", "s1", 1.0), _rec("a", "s2", None, status="simulator_failure",
                                       flags=[{"check": "_check_persona", "detail": "spoke as the agent"}]),
            _rec("a", "s3", 0.0, status="agent_failure"), _rec("b", "s1", 1.0, status="code_error")]
    counts = status_counts(recs, ["a", "b"])
    assert counts == {"a": {"ok": 1, "agent_failure": 1, "simulator_failure": 1, "errors": 0},
                      "b": {"ok": 0, "agent_failure": 0, "simulator_failure": 0, "errors": 1}}
    flags = simulator_flags(recs)
    assert flags["_check_persona"]["count"] == {"a": 1}
    assert flags["_check_persona"]["example"]["session_id"] == "s2"


def test_random_effects_shares_by_hand():
    # sessions [1, 3] and [5, 7]: MSW = 4 / 2 = 2, MSB = (2*4 + 2*4) / 1 = 16, n0 = 2,
    # sigma2_between = (16 - 2) / 2 = 7, share within = 2 / 9
    res = random_effects_shares([[1, 3], [5, 7]])
    assert res["within"] == pytest.approx(2) and res["between"] == pytest.approx(7)
    assert res["share_within"] == pytest.approx(2 / 9)
    # identical re-simulations: all the variance is between users
    assert random_effects_shares([[1, 1], [5, 5]])["share_within"] == 0
    # the same distribution in every session: MSB < MSW, between clipped at 0, all within
    assert random_effects_shares([[1, 5], [5, 1]])["share_within"] == 1
    assert random_effects_shares([[1, 2]]) is None  # one session: nothing to decompose


def test_variance_decomposition_more_simulator_noise_raises_the_share():
    def recs(noise):
        return [_rec("a", f"s{s}", s + noise * (t - 1), trial=t) for s in range(4) for t in range(3)]
    low, high = variance_decomposition(recs(0.1), ["m"])[0], variance_decomposition(recs(2.0), ["m"])[0]
    assert low["sessions"] == 4 and low["trials"] == 12
    assert high["share_within"] > low["share_within"]
    flagged = recs(0.1) + [_rec("a", "s9", 100.0, trial=t, status="simulator_failure") for t in range(3)]
    assert variance_decomposition(flagged, ["m"])[0]["sessions"] == 4  # flagged sessions are left out


def test_warning_kinds_keep_the_digits_of_names():
    """Every digit became '#': "C3 vs C4" read "C# vs C#"."""
    groups = group_warnings(["m1: Wilcoxon C3 vs C4 needs 6 pairs, got 3", "m2: Wilcoxon C3 vs C4 needs 6 pairs, got 2",
                             "ndcg@10: Tukey of v1.2 p = 0.03"])
    assert [g["kind"] for g in groups] == ["Wilcoxon C3 vs C4 needs # pairs, got #", "Tukey of v1.2 p = #"]
    assert groups[0]["count"] == 2
