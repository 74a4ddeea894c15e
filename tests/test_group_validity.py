"""Metric validity of group travel planning (a metrics audit's findings F6, F10, F11).

F6: satisfaction (M10, M11, W1–W3, M12) reads what a plan places, never its free text, so pasting
the members' wishes into ``raw_output`` cannot raise it above the honest plan's.
F10: the model-none mediator reads the members' words, not the simulator's structured labels
(which M2 uses as ground truth), so M2 can fail.
F11: reference planners (oracle, degraded, gaming, alarmist) order the metrics as they must; the
gaming plan's pasted wishes reach M8 (mention) but not M8_placed (what the plan places), and the
alarmist mediator, which reports a conflict on every slot, keeps M2 (recall) and fails M2_false_alarm.
"""

import copy
import statistics
from pathlib import Path

import pytest
import yaml

from convsim.agents.group.members import GROUP_TYPES, SLOTS, make_group, speak_preference
from convsim.agents.group.synthesis import read_wish, stated_preferences
from convsim.catalog.travel import TravelDB
from convsim import stable_seed
from convsim.evaluation.group.evaluate import dialogue_embedder, evaluate_group_dialogue, transcript_to_turns
from convsim.evaluation.group.plan_metrics import slot_satisfaction
from convsim.graphs.group_planning import Context, Params, _city_db, dataset_metrics, graph, sessions

ROOT = Path(__file__).resolve().parents[1]
WELFARE = ("W1", "W2", "W3", "M10", "M11")


def run(condition, index, seed=3, n_sessions=5, **kw):
    p = Params(condition=condition, n_sessions=n_sessions, **kw)
    s = list(sessions(p, Context(params=p, seed=seed)))[index]
    state = graph.invoke(s, context=Context(params=p, seed=stable_seed(seed, s["session_id"]),
                                            session_id=s["session_id"]))
    return p, state


def score(p, state, plan=None, turns=None):
    turns = turns if turns is not None else transcript_to_turns(state["transcript"])
    db = _city_db(p, state["city"])
    flags = {**p.flags(), "member_count": len(state["members"])}
    return evaluate_group_dialogue(turns, plan if plan is not None else state["plan"], db, flags=flags,
                                   embedder=dialogue_embedder("tfidf", db, turns))[0]


def pasted_wishes_plan(p, state):
    """The audit's gaming plan: every meal at the city's first restaurant, every wish pasted."""
    db = _city_db(p, state["city"])
    plan = copy.deepcopy(state["plan"])
    first = db.in_city("restaurants", state["city"])[0]["name"]
    for d in plan["days"]:
        for k in ("breakfast", "lunch", "dinner"):
            d[k] = f"{first}, {state['city']}"
    stripped = {**plan, "raw_output": ""}
    plan["raw_output"] = "Noted your wishes: " + " ".join(
        pr["text"] for m in state["members"] for pr in m["preferences"].values())
    return plan, stripped


# ---------------------------------------------------------------- F6: pasted wishes

@pytest.mark.parametrize("condition,index", [("C2", 2), ("C4", 1)])   # spouses-002, elder_young-001
def test_pasting_the_members_wishes_into_the_plan_text_does_not_raise_satisfaction(condition, index):
    p, state = run(condition, index)
    honest = score(p, state)
    gamed, stripped = pasted_wishes_plan(p, state)
    game, ignore = score(p, state, plan=gamed), score(p, state, plan=stripped)
    for k in (*WELFARE, "M12"):
        assert game[k] == pytest.approx(ignore[k]), k          # the paste adds nothing
    for k in ("W1", "M10"):
        assert game[k] <= honest[k] + 1e-9, k                  # never above the honest plan
    # the old code: C2 spouses-002 W1 0.50 -> 0.88, W2 0.00 -> 0.75; C4 elder_young-001 W1-W3 0.83 -> 1.0.
    # What remains is the placement itself: in spouses-002 the one restaurant is Italian, which
    # serves Ben instead of Anna (W2 0 -> 0.25, W1 unchanged, M12 +0.002), with or without the pasted text
    assert game["W2"] <= max(honest["W2"], 0.25) and game["M16"] < honest["M16"]


def test_the_lexical_channel_reads_placed_records_not_raw_output():
    db = TravelDB(accommodations=[], attractions=[], events=[], restaurants=[
        {"name": "Roma House", "avg_cost": 20, "cuisines": "Italian, Pizza", "rating": 4.0, "City": "X"}])
    plan = {"days": [{"days": 1, "breakfast": "Roma House, X", "lunch": "Roma House, X", "dinner": "-",
                      "attraction": "-", "event": "-", "accommodation": "-"}],
            "raw_output": "spicy tacos burritos and nachos for everyone"}

    class Zero:
        name = "zero"

        def similarity(self, a, b):
            return 0.0
    ch = slot_satisfaction("I want spicy tacos, burritos and nachos", "cuisine", plan=plan, db=db, embedder=Zero())
    assert ch["lexical"] is False and ch["satisfied"] is False
    ch = slot_satisfaction("I want pizza and roma style food", "cuisine", plan=plan, db=db, embedder=Zero())
    assert ch["lexical"] is True          # words of a placed item's record still count


# ---------------------------------------------------------------- F10: the mediator reads words

def test_read_wish_reads_first_choice_second_choice_and_rejection_from_text():
    opts = ("Museum", "Park", "Theme Park", "Beach")
    assert read_wish("I'd love Theme Park places, and Beach would also be fine. But no Museum, please.", opts) == \
        {"option": "Theme Park", "also_ok": "Beach", "reject": "Museum"}   # "Park" inside "Theme Park" is not a wish
    assert read_wish("Museum for me, and a Park would be fine. But no Theme Park.", opts) == \
        {"option": "Museum", "also_ok": "Park", "reject": "Theme Park"}
    assert read_wish("Anything works for me.", opts) == {"option": None, "also_ok": None, "reject": None}


def test_the_rule_members_words_carry_their_profiles():
    """The text reading recovers every rule member's profile (so model-none baselines are unchanged)."""
    for seed in range(20):
        for g in GROUP_TYPES:
            members = make_group(g, seed)
            for slot in SLOTS:
                turns = [speak_preference(m, slot) for m in members]
                for sub, rows in stated_preferences(turns, members, slot).items():
                    for r, t in zip(rows, turns):
                        label = t["meta"]["house_rule"] if sub == "house_rule" else t["meta"]["preference_option"]
                        assert r["option"] == label, (g, seed, slot, t["text"])
                        if sub != "house_rule":
                            assert (r["also_ok"], r["reject"]) == (t["meta"]["preference_also_ok"],
                                                                   t["meta"]["preference_reject"])


def test_the_mediator_follows_the_members_words_when_they_disagree_with_the_labels():
    """A member whose label says Mexican but who says "Italian" (as the other member does): the
    mediator hears agreement, so the label-defined divergent slot goes undetected and M2 < 1.
    The old mediator read the label (preference_option) and scored M2 = 1 by construction."""
    members = [{"name": "A", "role": "partner"}, {"name": "B", "role": "partner"}]
    turns = [{"speaker": "A", "text": "I want Italian cuisine.", "meta": {"preference_option": "Italian"}},
             {"speaker": "B", "text": "I'd love Italian cuisine too.",
              "meta": {"preference_option": "Mexican", "preference_also_ok": None, "preference_reject": None}}]
    rows = stated_preferences(turns, members, "cuisine")["cuisine"]
    assert [r["option"] for r in rows] == ["Italian", "Italian"]

    p, state = run("C4", 2)        # spouses-002: cuisine is a designed conflict
    a, b = state["members"]
    assert a["preferences"]["cuisine"]["option"] != b["preferences"]["cuisine"]["option"]
    s = list(sessions(p, Context(params=p, seed=3)))[2]
    s["members"][1]["preferences"]["cuisine"]["text"] = f"I want {a['preferences']['cuisine']['option']} cuisine."
    state2 = graph.invoke(s, context=Context(params=p, seed=stable_seed(3, s["session_id"]), session_id=s["session_id"]))
    synth = next(t for t in state2["transcript"] if t["meta"].get("intent") == "sys_synthesize_cuisine")
    assert synth["meta"]["has_conflict"] is False
    assert state["dialogue_metrics"]["M2"] == 1.0
    assert state2["dialogue_metrics"]["M2"] < 1.0


# ---------------------------------------------------------------- F11: reference planners

VARIANTS = {"C1": {"condition": "C1"}, "C2": {"condition": "C2"}, "C3": {"condition": "C3"},
            "C4": {"condition": "C4"}, "C5": {"condition": "C5"},
            "oracle": {"condition": "C4", "reference": "oracle"},
            "degraded": {"condition": "C4", "reference": "degraded"},
            "gaming": {"condition": "C4", "reference": "gaming"},
            "alarmist": {"condition": "C4", "reference": "alarmist"}}
N = 10


@pytest.fixture(scope="module")
def reference_runs():
    out = {}
    for name, kw in VARIANTS.items():
        out[name] = [run(kw["condition"], i, seed=7, n_sessions=N,
                         **{k: v for k, v in kw.items() if k != "condition"}) for i in range(N)]
    return out


def mean(runs, key):
    vals = [st["dialogue_metrics"][key] for _, st in runs if st["dialogue_metrics"][key] is not None]
    return statistics.fmean(vals)


def test_the_reference_config_runs_these_variants():
    cfg = yaml.safe_load((ROOT / "configs" / "group_reference.yaml").read_text())
    # place_everything: tested in tests/test_group_plans_as_plans.py (the fixture here stays at 9 variants)
    assert {v["name"]: v["params"] for v in cfg["variants"]} == {
        **VARIANTS, "place_everything": {"condition": "C4", "reference": "place_everything"},
        "self_reporter": {"condition": "C4", "reference": "self_reporter"},
        "self_reporter_c5": {"condition": "C5", "reference": "self_reporter"}}
    assert cfg["graph"] == "group_planning" and set(cfg["models"].values()) == {"none"}


def test_oracle_baselines_degraded_order_welfare_and_m_metrics(reference_runs):
    r = reference_runs
    baselines = ("C2", "C3", "C4", "C5")
    for k in ("W1", "W2", "W3", "M10"):
        for b in baselines:
            assert mean(r["oracle"], k) >= mean(r[b], k) >= mean(r["degraded"], k), (k, b)
        assert mean(r["oracle"], k) > mean(r["degraded"], k), k
    for b in ("C3", "C4", "C5"):          # M11 counts fully served members: see docs (C2 < degraded)
        assert mean(r["oracle"], "M11") >= mean(r[b], "M11") >= mean(r["degraded"], "M11"), b
    for k in ("W1_all_members", "W2_all_members"):   # C1 speaks for one: compare over every member
        assert mean(r["oracle"], k) >= mean(r["C1"], k) >= mean(r["degraded"], k), k
    for b in ("C3", "C4", "C5"):
        assert mean(r["oracle"], "M2") >= mean(r[b], "M2") > mean(r["degraded"], "M2"), b
    assert mean(r["degraded"], "M2") == 0.0
    assert all(st["dialogue_metrics"]["M16"] == 1.0 for name in ("oracle", "degraded") for _, st in r[name])
    assert all(st["plan"]["days"] for _, st in r["oracle"])


def test_the_gaming_reference_is_caught(reference_runs):
    r = reference_runs
    for k in (*WELFARE, "M12", "M16"):
        assert mean(r["gaming"], k) <= mean(r["C4"], k), k
    assert mean(r["gaming"], "W1") < mean(r["C4"], "W1")
    assert mean(r["gaming"], "M16") < mean(r["C4"], "M16")
    for p, st in r["gaming"]:            # its pasted text is worth nothing to satisfaction
        stripped = score(p, st, plan={**st["plan"], "raw_output": ""})
        for k in (*WELFARE, "M12"):
            assert st["dialogue_metrics"][k] == pytest.approx(stripped[k]), k
    # M8 counts mentions: the paste reaches 1.0, above the oracle; M8_placed reads what is placed
    assert mean(r["gaming"], "M8") == 1.0 >= mean(r["oracle"], "M8")
    assert mean(r["gaming"], "M8_placed") < mean(r["C4"], "M8_placed") < mean(r["oracle"], "M8_placed")
    for p, st in r["gaming"]:
        stripped = score(p, st, plan={**st["plan"], "raw_output": ""})
        assert st["dialogue_metrics"]["M8_placed"] == stripped["M8_placed"]


def test_the_alarmist_mediator_keeps_m2_recall_and_fails_m2_and_m2_false_alarm(reference_runs):
    r = reference_runs
    pairs = list(zip(r["C4"], r["alarmist"]))
    for (_, c4), (_, alarm) in pairs:     # the same sessions, decisions and plan; only the report differs
        c4m, am = c4["dialogue_metrics"], alarm["dialogue_metrics"]
        assert c4["plan"]["days"] == alarm["plan"]["days"]
        assert am["M2_recall"] == c4m["M2"] == 1.0 and am["M2_agreeing_slots"] == c4m["M2_agreeing_slots"]
        # M2 is the F1 against the members' divergence: the alarmist loses precision where they agree
        assert am["M2"] < 1.0 if am["M2_agreeing_slots"] else am["M2"] == 1.0
        assert am["M2_false_alarm"] in (None, 1.0) and c4m["M2_false_alarm"] in (None, 0.0)
    agreeing = sum(st["dialogue_metrics"]["M2_agreeing_slots"] for _, st in r["alarmist"])
    assert agreeing >= 2                  # the catch is not vacuous
    for name in ("C3", "C4", "C5", "oracle"):
        assert dataset_metrics([st for _, st in r[name]])["M2_false_alarm_pooled_over_sessions"] == 0.0, name
    assert dataset_metrics([st for _, st in r["alarmist"]])["M2_false_alarm_pooled_over_sessions"] == 1.0
    assert dataset_metrics([st for _, st in r["degraded"]])["M2_false_alarm_pooled_over_sessions"] == 0.0


def test_the_pooled_figures_counts_are_not_tested_between_variants():
    """M10_pairs and M2_agreeing_slots count what the simulated members stated: descriptives and the
    reason, never an ANOVA or Wilcoxon that would read a difference of groups as one of planners."""
    from convsim import load_graph_module
    from convsim.evaluation.reporting.run_stats import run_statistics
    module = load_graph_module("group_planning")
    assert set(module.UNCOMPARED_METRICS) == {"M10_pairs", "M2_agreeing_slots"}
    assert not set(module.UNCOMPARED_METRICS) & set(module.SUMMARY_METRICS)
    records = [{"variant": v, "session_id": f"g{i}", "trial": 0, "seed": i, "status": "ok",
                "dialogue_metrics": {"W1": i * (1 + (v == "b")) / 10, "M10_pairs": 10 + i + (v == "b")}}
               for v in ("a", "b") for i in range(1, 7)]
    out = run_statistics(records, uncompared=module.UNCOMPARED_METRICS)
    assert "anova" in out["metrics"]["W1"]
    pairs = out["metrics"]["M10_pairs"]
    assert "anova" not in pairs and "wilcoxon" not in pairs and "count" in pairs["not_compared"]
