"""LLM paths of the policy and action agents: validated structured answers, failures kept raw
with the rules deciding, and node-by-node metrics that move when a node is wrong."""
import json

from convsim.agents.service.llm_nodes import llm_action, llm_policy
from convsim.agents.service.policy import check_policy
from convsim.agents.service.supervisor import supervise
from convsim.catalog.service.db import load_service_db, load_service_schema
from convsim import StructuredResult, stable_seed
from convsim.evaluation.service.audit import action_grounding


class Structured:
    """A model double: each call answers the next item (dict = valid JSON, str = garbage)."""
    is_none = False
    spec = "double"

    def __init__(self, *answers, default=None):
        self.answers, self.default, self.calls = list(answers), default, 0

    def structured(self, messages, schema, purpose="", retries=2):
        self.calls += 1
        a = self.answers.pop(0) if self.answers else self.default
        if isinstance(a, dict):
            try:
                return StructuredResult(ok=True, value=schema.model_validate(a), raw=json.dumps(a), attempts=1)
            except ValueError as err:
                return StructuredResult(ok=False, raw=json.dumps(a), error=str(err), attempts=retries + 1)
        return StructuredResult(ok=False, raw=a, error="ValueError: no JSON", attempts=retries + 1)


DB, SCHEMA = load_service_db(), load_service_schema()
BELIEF = {"hotel": {"bookpeople": "2"}}


def test_llm_policy_valid_answer_is_used_with_its_explanation():
    m = Structured({"booking_requested": True, "missing": ["name", "bookday", "bookstay"], "allowed": False,
                    "explanation": "I need the hotel, the day and the nights first."})
    v = llm_policy(m, SCHEMA, domain="hotel", intent="book_hotel", belief=BELIEF, offered={})
    assert v["source"] == "llm" and not v["allowed"] and v["explanation"].startswith("I need")


def test_llm_policy_invalid_answers_fall_back_to_rules_and_keep_the_raw_text():
    rules = check_policy(SCHEMA, domain="hotel", intent="book_hotel", belief=BELIEF, offered={})
    wrong_slot = Structured({"booking_requested": True, "missing": ["credit card"], "allowed": False})
    v = llm_policy(wrong_slot, SCHEMA, domain="hotel", intent="book_hotel", belief=BELIEF, offered={})
    assert v["source"] == "rules" and v["missing"] == rules["missing"]
    assert "credit card" in v["llm_failure"]["raw"] and "not required" in v["llm_failure"]["error"]
    inconsistent = Structured({"booking_requested": True, "missing": ["bookday"], "allowed": True})
    assert "allowed" in llm_policy(inconsistent, SCHEMA, domain="hotel", intent="book_hotel", belief=BELIEF,
                                   offered={})["llm_failure"]["error"]
    garbage = llm_policy(Structured("sure, go ahead!"), SCHEMA, domain="hotel", intent="book_hotel",
                         belief=BELIEF, offered={})
    assert garbage["llm_failure"]["raw"] == "sure, go ahead!" and garbage["source"] == "rules"


def test_llm_action_is_filled_from_the_db_and_an_invented_entity_is_left_for_the_supervisor():
    r = DB.records["restaurant"][0]
    triage = {"domain": "restaurant", "intent": "find_restaurant", "act": "inform", "slots": {"area": r["area"]},
              "requested": [], "refer": []}
    policy = {"booking_requested": False, "allowed": True, "missing": []}
    kw = dict(belief={"restaurant": {"area": r["area"]}}, policy=policy, offered={}, asked={}, db=DB, schema=SCHEMA)
    good = llm_action(Structured({"kind": "search", "entity": r["name"], "inform": ["phone"]}), triage, **kw)
    assert good["source"] == "llm" and good["informed"] == {"phone": r["phone"]}
    assert action_grounding(good, DB)["grounded"] == 1
    fake = llm_action(Structured({"kind": "search", "entity": "The Golden Dragon", "inform": ["phone"]}), triage, **kw)
    assert action_grounding(fake, DB)["grounded"] == 0 and fake["informed"] == {}
    assert supervise(fake, belief={}, offered={}, db=DB, schema=SCHEMA)["action"]["kind"] == "nooffer"
    bad = llm_action(Structured({"kind": "dance"}), triage, **kw)
    assert bad["source"] == "rules" and "dance" in bad["llm_failure"]["raw"]


def _session(models, n=3):
    import convsim.graphs.customer_service as cs
    p = cs.Params(n_sessions=n, judge=False)
    out = []
    for init in cs.sessions(p, cs.Context(params=p, seed=7)):
        c = cs.Context(params=p, seed=stable_seed(7, init["session_id"]), session_id=init["session_id"],
                       models=models)
        out.append(cs.graph.invoke({**init, "transcript": [], "turn_metrics": [], "dialogue_metrics": {}},
                                   context=c, config={"recursion_limit": 10_000}))
    return out


def test_node_by_node_metrics_see_a_wrong_action_node_and_count_llm_failures():
    rules = _session({})
    always_request = _session({"action": Structured(default={"kind": "request", "requested": ["area"]})})
    garbage = _session({"policy": Structured(default="???"), "action": Structured(default="no")})
    sel = lambda rs: [t["action_selection_accuracy"] for r in rs for t in r["turn_metrics"]  # noqa: E731
                      if t["action_selection_accuracy"] is not None]
    assert sum(sel(rules)) / len(sel(rules)) > sum(sel(always_request)) / len(sel(always_request))
    assert sum(r["dialogue_metrics"]["llm_failures"] for r in rules) == 0
    assert sum(r["dialogue_metrics"]["llm_failures"] for r in garbage) > 0
    # with every LLM call failing, the rules decided (the same dialogue as the rule system), but a
    # turn whose agent model failed is scored as failed, never as the rules' success (issue 39)
    assert [r["transcript"] for r in garbage] == [r["transcript"] for r in rules]
    assert [r["dialogue_metrics"]["task_success"] for r in rules] == [1, 1, 1]
    assert [r["dialogue_metrics"]["task_success"] for r in garbage] == [0, 0, 0]


def test_llm_triage_refuses_a_domain_intent_or_act_outside_its_lists_and_keeps_the_raw_text():
    """The node's format beyond JSON types: a triage answer naming a domain, intent or act the prompt
    does not list was used as it was; now it is invalid, the rules decide and the raw text is kept."""
    from convsim.agents.service.triage import llm_triage
    said = "I need a cheap restaurant in the north."
    good = {"domain": "Restaurant", "intent": "find_restaurant", "act": "inform", "slots": {"pricerange": "cheap"}}
    v = llm_triage(Structured(good), said, prev_domain=None, history=[], db=DB)
    assert v["source"] == "llm" and v["domain"] == "restaurant"
    for field, bad in (("domain", "banana"), ("intent", "eat_food"), ("act", "inform_and_book")):
        v = llm_triage(Structured({**good, field: bad}), said, prev_domain=None, history=[], db=DB)
        assert v["source"] == "rules" and v["domain"] == "restaurant", (field, v)
        assert bad in v["llm_failure"]["raw"] and f"{field} must be one of" in v["llm_failure"]["error"]
