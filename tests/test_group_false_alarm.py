"""Groups that agree on some slots (``Params.agreement``), so M2's false-alarm side has data.

With the default members nearly every slot diverges and ``M2_false_alarm`` is undefined in almost
every session. ``agreement`` makes each slot outside a group type's designed conflicts shared by
every member with that probability (``convsim.agents.group.members.shared_by_design``); 0, the default,
must leave every group exactly as it was, since documented numbers rest on them.
"""

import hashlib
import json
import statistics
from pathlib import Path

import pytest
import yaml

from convsim.agents.group.members import CONFLICT_SLOTS, GROUP_TYPES, SLOTS, make_group, member_option, speak_preference
from cli_helpers import one_line
from convsim import stable_seed
from convsim.evaluation.group.metrics import agreeing_slots, divergent_slots
from convsim.graphs.group_planning import Context, Params, dataset_metrics, graph, sessions

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "group_false_alarm.yaml"

# sha256 over json.dumps(make_group(g, seed), sort_keys=True) for seed in 0..199, g in GROUP_TYPES,
# computed on commit 4895c22 (before the parameter existed)
BASE_GROUPS_SHA256 = "6bd8d72a3ee869e9dc335f399fd081e4b8fe9a6ea3b15cd139b27668b99a703b"


def _groups_digest(**kw) -> str:
    h = hashlib.sha256()
    for seed in range(200):
        for g in GROUP_TYPES:
            h.update(json.dumps(make_group(g, seed, **kw), sort_keys=True).encode())
    return h.hexdigest()


def _turns(members, slots=SLOTS):
    """The members' ``user_provide_*`` turns as the metrics read them."""
    out = []
    for slot in slots:
        for m in members:
            t = speak_preference(m, slot)
            out.append({"speaker": t["speaker"], "intent": t["meta"]["intent"], "utterance": t["text"],
                        "meta": t["meta"]})
    return out


# ---------------------------------------------------------------- default: the groups as before

def test_default_groups_are_those_of_the_base_commit():
    assert _groups_digest() == BASE_GROUPS_SHA256
    assert _groups_digest(agreement=0.0) == BASE_GROUPS_SHA256
    assert Params().agreement == 0.0


def test_default_sessions_draw_the_default_groups():
    p = Params(n_sessions=10)
    for s in sessions(p, Context(params=p, seed=7)):
        assert s["members"] == make_group(s["group_type"], stable_seed(7, s["session_id"]))


def test_agreement_leaves_the_designed_conflict_slots_alone():
    """The conflicts M2 measures are drawn exactly as without agreement, and still diverge."""
    for seed in range(50):
        for g in GROUP_TYPES:
            base, full = make_group(g, seed), make_group(g, seed, agreement=1.0)
            for slot in CONFLICT_SLOTS[g]:
                assert [m["preferences"][slot] for m in full] == [m["preferences"][slot] for m in base]
            assert divergent_slots(_turns(full)) >= set(CONFLICT_SLOTS[g])


# ---------------------------------------------------------------- agreement > 0

def test_agreement_one_shares_every_other_slot_and_agreement_grows_monotonically():
    for seed in range(30):
        for g in GROUP_TYPES:
            members = make_group(g, seed, agreement=1.0)
            assert agreeing_slots(_turns(members)) == set(SLOTS) - set(CONFLICT_SLOTS[g])
            for slot in set(SLOTS) - set(CONFLICT_SLOTS[g]):   # one member's wish, said by all
                assert len({member_option(m["preferences"][slot], slot) for m in members}) == 1
                if slot == "lodging":
                    assert len({m["preferences"][slot]["house_rule"] for m in members}) == 1
                assert not any(m["preferences"][slot]["reject"] for m in members)
            # one coin per slot: what agrees at 0.3 still agrees at 0.7
            low = agreeing_slots(_turns(make_group(g, seed, agreement=0.3)))
            assert low <= agreeing_slots(_turns(make_group(g, seed, agreement=0.7)))


@pytest.mark.parametrize("agreement", [0.3, 0.5])
def test_agreement_yields_agreeing_slots_at_about_the_expected_rate(agreement):
    """P(agreeing) = agreement + (1 - agreement) * (the chance agreement of the default draws)."""
    eligible = agree0 = agree = 0
    for seed in range(300):
        for g in GROUP_TYPES:
            free = set(SLOTS) - set(CONFLICT_SLOTS[g])
            eligible += len(free)
            agree0 += len(agreeing_slots(_turns(make_group(g, seed))) & free)
            agree += len(agreeing_slots(_turns(make_group(g, seed, agreement=agreement))) & free)
    chance = agree0 / eligible              # about 0.07 with the rule members
    expected = agreement + (1 - agreement) * chance
    assert chance < 0.15
    assert agree / eligible == pytest.approx(expected, abs=0.04)   # 4500 slots: sd about 0.007


def test_agreement_outside_zero_one_is_refused():
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="agreement"):
            Params(agreement=bad)
        with pytest.raises(ValueError, match="agreement"):
            make_group("family", 1, agreement=bad)


@pytest.mark.parametrize("value,words", [("1.5", ("params.agreement", "less than or equal to 1")),
                                         ("-0.2", ("params.agreement", "greater than or equal to 0")),
                                         ("lots", ("params.agreement", "valid number"))])
def test_a_bad_agreement_exits_2_with_one_line(tmp_path, value, words):
    one_line(["run", CONFIG, "--set", f"agreement={value}", "--sessions", "1", "--no-analysis", "-q",
              "--out", tmp_path], *words, code=2)
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["params"]["agreement"] = yaml.safe_load(value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    one_line(["run", path, "--sessions", "1", "--no-analysis", "-q", "--out", tmp_path], *words, code=2)


# ---------------------------------------------------------------- the false-alarm config

N = 10


def _run(variant_params: dict, agreement: float, i: int, seed: int = 7):
    p = Params(n_sessions=N, agreement=agreement, **variant_params)
    s = list(sessions(p, Context(params=p, seed=seed)))[i]
    return graph.invoke(s, context=Context(params=p, seed=stable_seed(seed, s["session_id"]),
                                           session_id=s["session_id"]))


@pytest.fixture(scope="module")
def false_alarm_runs():
    cfg = yaml.safe_load(CONFIG.read_text())
    variants = {v["name"]: v["params"] for v in cfg["variants"]}
    return {name: [_run(variants[name], cfg["params"]["agreement"], i) for i in range(N)]
            for name in ("C4", "degraded", "alarmist")}


def test_the_false_alarm_config_runs_the_synthesising_references_with_agreement():
    cfg = yaml.safe_load(CONFIG.read_text())
    assert cfg["graph"] == "group_planning" and set(cfg["models"].values()) == {"none"}
    assert 0 < cfg["params"]["agreement"] <= 1 and cfg["sessions"] == cfg["params"]["n_sessions"]
    assert {v["name"] for v in cfg["variants"]} == {"C3", "C4", "C5", "oracle", "degraded", "gaming", "alarmist"}
    Params(**{**cfg["params"], **cfg["variants"][0]["params"]})       # a valid Params
    for other in ("group_conditions.yaml", "group_reference.yaml", "group_conditions_minilm.yaml"):
        assert "agreement" not in yaml.safe_load((ROOT / "configs" / other).read_text())["params"], other


def test_m2_false_alarm_is_defined_and_separates_the_alarmist(false_alarm_runs):
    r = false_alarm_runs
    records = {name: [st for st in runs] for name, runs in r.items()}
    agreeing = sum(st["dialogue_metrics"]["M2_agreeing_slots"] for st in records["alarmist"])
    defined = sum(st["dialogue_metrics"]["M2_false_alarm"] is not None for st in records["alarmist"])
    assert agreeing >= 12 and defined >= N // 2          # 10 sessions: 17 agreeing slots, 9 defined
    pooled = {name: dataset_metrics(rs)["M2_false_alarm_pooled_over_sessions"] for name, rs in records.items()}
    assert pooled["alarmist"] == 1.0
    assert pooled["C4"] == 0.0 and pooled["degraded"] == 0.0
    # the spec's recall on the designed conflicts separates only the degraded mediator; M2 (F1
    # against the members' divergence) separates the alarmist too
    recall = {name: statistics.fmean(st["dialogue_metrics"]["M2_recall"] for st in rs) for name, rs in records.items()}
    assert recall["degraded"] == 0.0 < recall["C4"] == recall["alarmist"] == 1.0
    m2 = {name: statistics.fmean(st["dialogue_metrics"]["M2"] for st in rs) for name, rs in records.items()}
    assert m2["degraded"] == 0.0 < m2["alarmist"] < m2["C4"] == 1.0
