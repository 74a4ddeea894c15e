import subprocess
import sys

import numpy as np
import pytest

from convsim import bootstrap_ci, make_embedder, mean_ci, rng_for, session_seed, stable_seed


def test_stable_seed_is_stable_across_processes():
    code = "from convsim import stable_seed; print(stable_seed('a', 1, 2.5))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout for _ in range(2)}
    assert outs == {f"{stable_seed('a', 1, 2.5)}\n"}


def test_streams_are_independent_per_purpose():
    a = [rng_for(7, t, "shift").random() for t in range(5)]
    assert a == [rng_for(7, t, "shift").random() for t in range(5)]
    assert a != [rng_for(7, t, "contradict").random() for t in range(5)]
    assert session_seed(1, "s1", 0) != session_seed(1, "s1", 1) != session_seed(2, "s1", 0)


def test_bootstrap_ci_hand_values():
    r = bootstrap_ci([1, 2, 3, None, float("nan")], seed=0)
    assert r["mean"] == 2.0 and r["n"] == 3 and 1.0 <= r["ci_low"] <= 2.0 <= r["ci_high"] <= 3.0
    assert r["ci_method"] == "percentile bootstrap"
    assert bootstrap_ci([]) == {"mean": None, "n": 0, "ci_low": None, "ci_high": None, "ci_method": None}
    assert bootstrap_ci([5])["ci_low"] is None


def test_mean_ci_hand_values():
    r = mean_ci([1, 2, 3, None, float("nan")])
    # mean 2, sd 1, n 3: 2 -/+ t_{0.975, 2} / sqrt(3) = 2 -/+ 4.302653 / 1.732051
    assert r["mean"] == 2.0 and r["n"] == 3 and r["ci_method"] == "Student t"
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)
    assert mean_ci([]) == {"mean": None, "n": 0, "ci_low": None, "ci_high": None, "ci_method": None}
    assert mean_ci([5])["ci_low"] is None and mean_ci([5])["ci_method"] is None


def test_tfidf_embedder():
    e = make_embedder("tfidf", corpus=["a space opera with robots", "a romantic comedy in paris",
                                        "robots fight in space"])
    assert e.similarity("space robots", "robots in space") > 0.9
    assert e.similarity("space robots", "romantic paris") < 0.1
    assert np.allclose(np.linalg.norm(e.encode(["space", "paris"]), axis=1), 1.0)
    assert np.allclose(e.pairwise(["space robots"], ["robots space"]), [1.0], atol=1e-6)
