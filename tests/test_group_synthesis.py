"""C2's merge rule, C3's approval-with-coverage rule, the option budget in every synthesising
condition, C5 swapping within the budget, and the model paths (synthesis, members) with fakes."""

from convsim.agents.group.feedback import feedback_round
from convsim.agents.group.synthesis import approval_coverage, decide, silent_merge, synthesis_text
from convsim import StructuredResult, stable_seed
from convsim.graphs.group_planning import Context, Params, graph, sessions


def row(member, option, also_ok=None, reject=None):
    return {"member": member, "role": "member", "option": option, "also_ok": also_ok, "reject": reject,
            "text": f"I want {option}." + (f" {also_ok} would also be fine." if also_ok else "")
                    + (f" But no {reject}." if reject else "")}


def test_silent_merge_is_most_first_choices_then_first_stated():
    assert silent_merge([row("A", "Thai"), row("B", "Italian"), row("C", "Italian")]) == "Italian"
    assert silent_merge([row("A", "Thai"), row("B", "Italian")]) == "Thai"      # tie: stated first, not last


def test_approval_with_coverage_by_hand():
    rows = [row("A", "Italian", also_ok="Mexican"), row("B", "Mexican"), row("C", "Thai", also_ok="Mexican"),
            row("D", "Japanese")]
    # approvals: Mexican {A, B, C} = 3, Italian 1, Thai 1, Japanese 1 -> Mexican first; then the
    # option covering most of the uncovered {D}: Japanese
    assert approval_coverage(rows, 2) == ["Mexican", "Japanese"]
    assert approval_coverage(rows, 1) == ["Mexican"]
    # a rejected option is out: B (Italian) rules out Mexican -> Italian {A, B} first; then Thai
    # {C} and Japanese {D} each cover one new member and have 1 approval: the name decides
    rows[1] = row("B", "Italian", reject="Mexican")
    assert approval_coverage(rows, 2) == ["Italian", "Japanese"]
    # plurality would pick one of the singly-wanted options; everyone covered -> picking stops
    assert approval_coverage([row("A", "Thai"), row("B", "Thai")], 2) == ["Thai"]


def test_raw_text_states_true_counts_not_most_of_you():
    rows = [row("A", "Japanese"), row("B", "Italian"), row("C", "Mexican"), row("D", "Thai")]
    d = decide("cuisine", "strangers", {"cuisine": rows}, "raw", budget=2)
    text, reason = synthesis_text("cuisine", d, {"cuisine": rows}, "raw")
    assert "Most of you" not in text and "1 of 4" in reason
    assert len(d["cuisine"]["selected"]) == 2


def test_every_synthesising_condition_respects_the_budget():
    for budget in (1, 2):
        for cond in ("C3", "C4", "C5"):
            p = Params(condition=cond, n_sessions=5, option_budget=budget)
            for s in sessions(p, Context(params=p, seed=2)):
                st = graph.invoke(s, context=Context(params=p, seed=stable_seed(2, s["session_id"]),
                                                     session_id=s["session_id"]))
                for slot, subs in st["decisions"].items():
                    for sub, d in subs.items():
                        if sub != "house_rule":
                            assert 1 <= len(d["selected"]) <= budget, (cond, s["session_id"], sub)


def test_c5_feedback_swaps_instead_of_appending():
    rows = [row("A", "Italian"), row("B", "Italian"), row("C", "Mexican"), row("D", "Thai")]
    decision = {"cuisine": {"selected": ["Italian", "Mexican"], "primary": "Italian"}}
    turns, revised, _ = feedback_round("cuisine", decision, rows, ["D"], "Italian and Mexican", 1, budget=2)
    assert revised["cuisine"]["selected"] == ["Italian", "Thai"]          # Mexican (1 approver) swapped
    assert "replaces" in turns[-1]["text"]
    turns, revised, _ = feedback_round("cuisine", decision, rows, ["D"], "Italian and Mexican", 1, budget=3)
    assert revised["cuisine"]["selected"] == ["Italian", "Mexican", "Thai"]   # room left: added


class FakeModel:
    """A ChatModel double: structured answers from a function of the purpose."""
    is_none, calls = False, []

    def __init__(self, answer, spec="fake:model"):
        self.answer, self.spec = answer, type("S", (), {"spec": spec})()

    def structured(self, messages, schema, *, purpose="", retries=2):
        raw = self.answer(purpose, messages)
        try:
            return StructuredResult(ok=True, value=schema.model_validate(raw), raw=str(raw), error=None, attempts=1)
        except Exception as exc:   # noqa: BLE001
            return StructuredResult(ok=False, value=None, raw=str(raw), error=str(exc), attempts=1)

    def invoke(self, messages, purpose=""):
        return "Conflict: none. / Strategy: x. / Decision: y. / Reason: because it fits everyone. / Next step: go."


def _run_c3(model):
    p = Params(condition="C3", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=11))))
    return graph.invoke(s, context=Context(params=p, seed=1, session_id=s["session_id"], models={"synthesis": model}))


def test_c3_model_merges_and_its_own_report_is_recorded():
    def answer(purpose, messages):
        prompt = messages[-1][1]
        options = prompt.split("only from: ")[1].split(".\n")[0].split(", ")
        return {"chosen_options": [options[0]], "has_conflict": False,
                "explanation": "The first option is the easiest for the group.", "message": "Let's keep it simple."}
    st = _run_c3(FakeModel(answer))
    synth = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    assert all(t["text"] == "Let's keep it simple." for t in synth)
    assert all(t["meta"]["resolution_explanation"] == "The first option is the easiest for the group." for t in synth)
    assert all(t["meta"]["has_conflict"] is False for t in synth)
    assert st["dialogue_metrics"]["M2"] == 0.0        # the model missed every conflict; M2 says so


def test_c3_model_failure_is_kept_raw_and_the_rule_decides():
    st = _run_c3(FakeModel(lambda purpose, m: {"chosen_options": ["Atlantis"], "has_conflict": True,
                                               "explanation": "x", "message": "y"}))
    assert st["llm_failures"] and all("Atlantis" in f["raw"] for f in st["llm_failures"])
    synth = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    assert all(t["text"] != "y" for t in synth)


def test_member_model_speaks_in_persona_and_decides():
    def answer(purpose, messages):
        if purpose == "member_verdict":
            return {"accept": False, "utterance": "Not for me."}
        prompt = messages[-1][1]
        option = prompt.split("what you want most: ")[1].split("\n")[0].split(" (")[0]
        return {"utterance": f"Honestly, {option} is what I'd pick."}
    p = Params(condition="C2", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=11))))
    st = graph.invoke(s, context=Context(params=p, seed=1, session_id=s["session_id"], models={"member": FakeModel(answer)}))
    provide = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("user_provide_")]
    assert all(t["text"].startswith("Honestly,") for t in provide)
    assert st["dialogue_metrics"]["M6"] == 0.0           # every LLM member said no


def test_member_model_answer_without_the_wish_falls_back():
    p = Params(condition="C2", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=11))))
    st = graph.invoke(s, context=Context(params=p, seed=1, session_id=s["session_id"], models={
        "member": FakeModel(lambda purpose, m: {"utterance": "Whatever."} if purpose != "member_verdict"
                            else {"accept": True, "utterance": "Fine."})}))
    provide = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("user_provide_")]
    assert not any(t["text"] == "Whatever." for t in provide)
    assert any("does not name" in f["error"] for f in st["llm_failures"])


def test_c4_model_words_become_the_recorded_explanation():
    p = Params(condition="C4", n_sessions=1)
    s = next(iter(sessions(p, Context(params=p, seed=11))))
    st = graph.invoke(s, context=Context(params=p, seed=1, session_id=s["session_id"],
                                         models={"synthesis": FakeModel(lambda *a: {})}))
    synth = [t for t in st["transcript"] if t["meta"].get("intent", "").startswith("sys_synthesize_")]
    assert all(t["meta"]["resolution_explanation"] == "because it fits everyone." for t in synth)
    assert all(t["meta"]["resolution_strategy"] != "N/A" for t in synth)   # the decision stays the rules'
