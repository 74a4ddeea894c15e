"""Simulator fidelity against the human WOZ 2.0 corpus (evaluation/fidelity): the figures must tell
people from people apart no better than chance, tell the rule templates apart, and move when the
simulator is broken on purpose."""
import copy
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convsim import api
from convsim.cli import app
from convsim.evaluation.fidelity import corpus, features, runner
from convsim.evaluation.fidelity.discriminator import discriminate

ROOT = Path(__file__).parents[1]
WOZ = ROOT.parent / "shared" / "data" / "woz2" / "dialogues.json"
BOOT = 30

pytestmark = pytest.mark.skipif(not WOZ.exists(), reason=f"the WOZ 2.0 human corpus is not at {WOZ}")


@pytest.fixture(scope="module")
def human():
    return corpus.load_human(WOZ)


@pytest.fixture(scope="module")
def template_run(tmp_path_factory):
    """Forty restaurant-only sessions of the rule simulator speaking its own templates."""
    out = tmp_path_factory.mktemp("runs")
    return api.run(ROOT / "configs" / "service_sim.yaml", sessions=40, run_id="fid_templates", out_dir=out,
                   set_params=["goal_domains=[restaurant]", "n_sessions=40"], trace=False, analyze=False)


@pytest.fixture(scope="module")
def templates(template_run):
    return corpus.load_run(template_run)["default"]


@pytest.fixture(scope="module")
def ctx(human):
    return features.context(human, 0)[0]


def _distances(human, sim, ctx):
    return {r["measure"]: r for r in features.distance_table(human, sim, n_boot=BOOT, ctx=ctx)}


def test_human_against_a_held_out_half_of_itself_is_indistinguishable(human):
    a, b = features.split_reference(human, 11)
    for level in ("turn", "dialogue"):
        res = discriminate(b, a, level=level, n_boot=200)
        assert res["ci_low"] <= 0.5 <= res["ci_high"], (level, res["auc"], res["ci_low"], res["ci_high"])
        assert abs(res["auc"] - 0.5) < 0.06, res["auc"]
    rows = {r["measure"]: r for r in features.distance_table(b, a, n_boot=BOOT, seed=3)}
    near_zero = {"words_per_turn": 0.5, "turns_per_dialogue": 0.3, "slots_per_turn": 0.06, "first_turn_slots": 0.1,
                 "constraint_order": 0.12, "act_mix": 0.05, "request_share": 0.04, "distinct_1": 0.02,
                 "distinct_2": 0.03, "word_mix": 0.2, "oov_share": 0.01}
    for m, bound in near_zero.items():
        assert abs(rows[m]["distance"]) < bound, (m, rows[m])


def test_rule_templates_are_told_apart_and_far_from_the_floor(human, templates, ctx):
    assert len(templates) == 40 and all(d["domains"] == ["restaurant"] for d in templates)
    res = discriminate(human, templates, level="turn", n_boot=100, null_repeats=1)
    assert res["auc"] > 0.8 and res["ci_low"] > 0.6, res
    assert res["telling"] and any(t["leans"] == "simulated" for t in res["telling"])
    a, b = features.split_reference(human, 11)
    floor = {r["measure"]: r["distance"] for r in features.distance_table(b, a, n_boot=2, seed=3)}
    rows = _distances(human, templates, ctx)
    for m in ("words_per_turn", "slots_per_turn", "constraint_order", "act_mix", "request_share", "distinct_2",
              "word_mix", "oov_share"):
        assert rows[m]["distance"] > 2 * abs(floor[m]), (m, rows[m]["distance"], floor[m])


def _repeat_one_utterance(dialogues, turns=20):
    """The broken simulator: the same utterance (the templates' most common opening) every turn,
    until the turn budget (max_turns 20) runs out."""
    text = Counter(d["turns"][0]["text"] for d in dialogues).most_common(1)[0][0]
    one = next(d["turns"][0] for d in dialogues if d["turns"][0]["text"] == text)
    return [dict(d, turns=[{"text": one["text"], "acts": list(one["acts"])} for _ in range(turns)])
            for d in dialogues]


def test_a_simulator_repeating_one_utterance_moves_every_distance_away(human, templates, ctx):
    clean = _distances(human, templates, ctx)
    broken = _distances(human, _repeat_one_utterance(templates), ctx)
    # oov_share measures the words, not their repetition: an in-vocabulary utterance repeated lowers
    # it (its own defect test follows); word_mix, the words' frequencies, catches the repetition
    for m in features.MEASURES:
        if m != "oov_share":
            assert broken[m]["distance"] > clean[m]["distance"], (m, clean[m]["distance"], broken[m]["distance"])
    assert broken["distinct_2"]["simulated"] < clean["distinct_2"]["simulated"] / 3
    assert broken["turns_per_dialogue"]["simulated"] == 20
    res = discriminate(human, _repeat_one_utterance(templates), level="dialogue", n_boot=50, null_repeats=0)
    assert res["auc"] > 0.95


def test_a_simulator_speaking_its_acts_raises_the_oov_share(human, templates, ctx):
    """The defect oov_share measures: words no person uses (the simulator's internal act and slot
    keys leaking into its utterances)."""
    leaked = [dict(d, turns=[{"text": t["text"] + " " + json.dumps([{"intent": i, "slot": s} for i, s in t["acts"]]),
                              "acts": t["acts"]} for t in d["turns"]]) for d in copy.deepcopy(templates)]
    clean, broken = _distances(human, templates, ctx), _distances(human, leaked, ctx)
    assert broken["oov_share"]["distance"] > clean["oov_share"]["distance"] + 0.05


def test_records_without_user_acts_read_the_informs_off_the_gold_state(template_run):
    record = json.loads((template_run / "results.jsonl").read_text().splitlines()[0])
    with_acts = corpus.dialogue_from_record(record)
    for t in record["transcript"]:
        (t.get("meta") or {}).pop("user_acts", None)
    without = corpus.dialogue_from_record(record)
    informs = lambda d: [sorted(features.informed(t)) for t in d["turns"]]  # noqa: E731
    assert informs(without) == informs(with_acts)


def test_cli_prints_the_table_and_refuses_a_missing_corpus(template_run, tmp_path):
    small = tmp_path / "woz_part.json"  # a quarter of the corpus, in its own format, to keep the test short
    small.write_text(json.dumps(json.loads(WOZ.read_text(encoding="utf-8"))[::4]), encoding="utf-8")
    cli = CliRunner()
    res = cli.invoke(app, ["fidelity", str(template_run), "--human", str(small), "--boot", "5",
                           "--out", str(tmp_path / "fid")])
    assert res.exit_code == 0, res.output
    assert "words_per_turn" in res.output and "discriminator ROC AUC" in res.output
    report = json.loads((tmp_path / "fid.json").read_text())
    assert report["kept"]["default"] == {"sessions": 40, "same_task": 40}
    assert report["columns"]["default"]["auc_turn"]["auc"] > 0.8
    bad = cli.invoke(app, ["fidelity", str(template_run), "--human", str(tmp_path / "nope.json")])
    assert bad.exit_code == 2 and "nope.json" in bad.output
    assert not (tmp_path / "nope.json").exists()
