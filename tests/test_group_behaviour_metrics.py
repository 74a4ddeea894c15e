"""M2–M5 from behaviour, not from the system's self-reports (issue 35), and C3 / C4 that differ only
as claimed.

Each metric gets an injected defect: the self-reporting talker's move (a conflict flagged on every
slot, every wish pasted into the explanation, ``include_both`` with one option in the plan, an
"Okay." in a member's mouth as feedback) must lower it, and the honest behaviour must keep 1.0.
"""

import statistics

import pytest

from convsim import stable_seed
from convsim.agents.group.synthesis import approval_coverage, decide, plain_merge, synthesis_text
from convsim.evaluation.group.metrics import (conflict_detection_counts, copied_share, explanation_grounded_rate,
                                              member_feedback_rate, strategy_effect_rate)
from convsim.graphs.group_planning import Context, Params, graph, sessions


def turn(speaker, intent, utterance="", **meta):
    return {"speaker": speaker, "intent": intent, "utterance": utterance, "meta": meta}


WISHES = {"cuisine": {"A": ("Italian", "I would love Italian food tonight"),
                      "B": ("Thai", "Thai curry is what I crave most")},
          "event": {"A": ("Music", "A live Music concert please"), "B": ("Sports", "Some Sports match for me")},
          "attraction": {"A": ("Zoo", "The Zoo with the animals"), "B": ("Zoo", "I also want the Zoo")}}


def provide():
    return [turn(m, f"user_provide_{slot}", text, preference_option=opt)
            for slot, per in WISHES.items() for m, (opt, text) in per.items()]


def synth(slot, text, *, conflict, explanation, selected, strategy="N/A"):
    return turn("system", f"sys_synthesize_{slot}", text, has_conflict=conflict, resolution_explanation=explanation,
                selected_options={slot: selected}, resolution_strategy=strategy)


def honest():
    return provide() + [
        synth("cuisine", "x", conflict=True, explanation="Italian is the first choice of 1 of 2 (A); B: next time.",
              selected=["Italian"], strategy="least_misery"),
        synth("event", "x", conflict=True, explanation="Music and Sports: both wishes fit into the trip.",
              selected=["Music", "Sports"], strategy="include_both"),
        synth("attraction", "x", conflict=False, explanation="All of you asked for Zoo.", selected=["Zoo"],
              strategy="include_both")]


def test_m2_is_f1_of_flags_against_the_members_divergence():
    # cuisine and event diverge, attraction agrees
    assert conflict_detection_counts(honest()) == {"M2": 1.0, "M2_precision": 1.0, "M2_recall": 1.0}
    alarmist = [dict(t, meta={**t["meta"], "has_conflict": True}) if t["intent"].startswith("sys_") else t
                for t in honest()]
    m = conflict_detection_counts(alarmist)
    assert m["M2_recall"] == 1.0                 # the spec's M2 could not see it
    assert m["M2_precision"] == pytest.approx(2 / 3) and m["M2"] == pytest.approx(4 / 5)
    silent = [dict(t, meta={**t["meta"], "has_conflict": False}) if t["intent"].startswith("sys_") else t
              for t in honest()]
    assert conflict_detection_counts(silent)["M2"] == 0.0
    assert conflict_detection_counts(provide())["M2"] is None   # no synthesis (C1/C2)


def test_m3_needs_the_wishes_and_the_decision_and_no_paste():
    assert explanation_grounded_rate(honest()) == 1.0
    every_wish = " ".join(text for per in WISHES.values() for _, text in per.values())
    pasted = provide() + [synth(s, "x", conflict=True, selected=["Italian", "Music", "Zoo"][i:i + 1],
                                explanation=f"There is a conflict, so we include both: {every_wish} We go with "
                                            f"{['Italian', 'Music', 'Zoo'][i]}.")
                          for i, s in enumerate(WISHES)]
    assert copied_share(pasted[-1]["meta"]["resolution_explanation"], [every_wish]) > 0.5
    assert explanation_grounded_rate(pasted) == 0.0
    vague = provide() + [synth(s, "x", conflict=True, selected=["Zoo"], explanation="this suits the whole group")
                         for s in WISHES]
    assert explanation_grounded_rate(vague) == 0.0          # names nobody's wish
    # names a wish, but not what was decided (Thai was decided, the text talks of Italian)
    off = honest()
    off[-3] = synth("cuisine", "x", conflict=True, explanation="Italian is what A asked for.", selected=["Thai"])
    assert explanation_grounded_rate(off) == pytest.approx(2 / 3)


def test_m4_counts_a_strategy_only_when_its_effect_is_in_the_plan():
    both = {("A", "cuisine"): True, ("B", "cuisine"): False, ("A", "event"): True, ("B", "event"): True,
            ("A", "attraction"): True, ("B", "attraction"): True}
    assert strategy_effect_rate(honest(), both, use_social_theory=True) == 1.0
    # include_both with one member's option in the plan: the claim is not seen
    one = {**both, ("B", "event"): False}
    assert strategy_effect_rate(honest(), one, use_social_theory=True) == pytest.approx(2 / 3)
    # a single-choice strategy whose option the plan does not hold
    none = {**both, ("A", "cuisine"): False}
    assert strategy_effect_rate(honest(), none, use_social_theory=True) == pytest.approx(2 / 3)
    # agreeing members: include_both needs only the one shared wish (attraction)
    assert strategy_effect_rate(honest(), both, use_social_theory=False) == 0.0


def test_m5_counts_feedback_a_member_gave_about_its_own_wish():
    base = honest()
    real = base + [turn("B", "user_feedback_cuisine", "I don't see my wish: I asked for Thai."),
                   turn("system", "sys_feedback_cuisine", "Thai replaces Italian for B.")]
    assert member_feedback_rate(real, enable_feedback=True) == pytest.approx(1 / 2)   # cuisine of 2 divergent
    fake = base + [t for s in WISHES for t in (turn("A", f"user_feedback_{s}", "Okay."),
                                               turn("system", f"sys_feedback_{s}", "Thanks, noted."))]
    assert member_feedback_rate(fake, enable_feedback=True) == 0.0
    stranger = base + [turn("Z", "user_feedback_event", "I asked for Music.")]       # stated no wish
    assert member_feedback_rate(stranger, enable_feedback=True) == 0.0
    assert member_feedback_rate(real, enable_feedback=False) == 0.0


def _run(n, seed=7, **kw):
    p = Params(n_sessions=n, **kw)
    out = []
    for s in sessions(p, Context(params=p, seed=seed)):
        st = graph.invoke(s, context=Context(params=p, seed=stable_seed(seed, s["session_id"]),
                                             session_id=s["session_id"]))
        out.append(st["dialogue_metrics"])
    return out


def _mean(rows, key):
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.fmean(vals) if vals else None


def test_the_self_reporting_talker_no_longer_scores_one_and_honest_planners_keep_it():
    # agreement 0.5: some slots are shared, so flagging every slot costs precision
    honest_c5 = _run(5, condition="C5", agreement=0.5)
    talker = _run(5, condition="C5", agreement=0.5, reference="self_reporter")
    # the spec's readings of the self-reports: the talker is perfect there
    for key in ("M2_recall", "M3_reported", "M4_reported", "M5_reported"):
        assert _mean(talker, key) == 1.0, key
    # from behaviour: every one of M2-M5 falls below 1.0 and below the honest C5
    for key in ("M2", "M3", "M4", "M5"):
        assert _mean(talker, key) < 1.0 and _mean(talker, key) < _mean(honest_c5, key), key
    assert _mean(talker, "M3") < 0.2 and _mean(talker, "M5") == 0.0
    # the honest mediator keeps its values: M2 and M3 at 1.0, M5 = the spec's reading
    assert _mean(honest_c5, "M2") == 1.0 and _mean(honest_c5, "M3") == 1.0
    assert _mean(honest_c5, "M5") == pytest.approx(_mean(honest_c5, "M5_reported"))


# ---------------------------------------------------------------- C3 and C4 differ only as claimed

def row(member, option, also_ok=None, reject=None):
    return {"member": member, "role": "member", "option": option, "also_ok": also_ok, "reject": reject,
            "text": f"I want {option}."}


def test_c3_is_a_plain_merge_without_a_social_choice_rule():
    rows = [row("A", "Thai"), row("B", "Thai"), row("C", "Indian", also_ok="Thai")]
    # no counting: the most wanted option does not win the one place (the labels' order decides)
    assert plain_merge(rows, 1) == ["Indian"] and approval_coverage(rows, 1) == ["Thai"]
    assert plain_merge(rows, 2) == ["Indian", "Thai"]
    # no veto: a rejected option stays in
    assert plain_merge([row("A", "Thai", reject="Indian"), row("B", "Indian")], 2) == ["Indian", "Thai"]
    # no approvals: an option nobody chose first never enters
    assert "Mexican" not in plain_merge([row("A", "Thai", also_ok="Mexican"), row("B", "Indian", also_ok="Mexican")], 2)
    d = decide("cuisine", "family", {"cuisine": rows}, "raw", budget=2)["cuisine"]
    assert d["selected"] == ["Indian", "Thai"] and d["vote_summary"] is None and d["strategy_id"] == "N/A"


def test_c3_and_c4_texts_say_the_same_about_the_wishes():
    rows = [row("A", "Thai"), row("B", "Italian"), row("C", "Mexican"), row("D", "Japanese")]
    stated = {"cuisine": rows}
    raw = decide("cuisine", "colleagues", stated, "raw", budget=2)
    guided = decide("cuisine", "colleagues", stated, "guided", budget=2)
    # the same decision in both, so the texts differ only by the strategy
    raw["cuisine"]["selected"] = list(guided["cuisine"]["selected"])
    t3, r3 = synthesis_text("cuisine", raw, stated, "raw")
    t4, r4 = synthesis_text("cuisine", guided, stated, "guided")
    assert r3 in r4                                    # C4's reason = C3's + its strategy's plain reason
    chosen = set(guided["cuisine"]["selected"])
    for r in rows:   # neither restates every wish: an unchosen option is named in neither text
        named3, named4 = r["option"] in t3, r["option"] in t4
        assert named3 == named4 == (r["option"] in chosen), r["option"]
    assert " wants " not in t4


def test_c3_and_c4_mention_the_wishes_alike_in_a_run():
    c3, c4 = _run(10, condition="C3"), _run(10, condition="C4")
    # before: M8a 0.632 (C3) vs 0.893 (C4), C4's "Conflict: A wants X; B wants Y" line
    assert abs(_mean(c4, "M8a") - _mean(c3, "M8a")) < 0.1
