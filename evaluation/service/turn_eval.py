"""One turn of the customer-service graph, scored: the evaluation node's work as a function.

``evaluate_turn_state`` reads the finished turn (user input and gold, triage, belief, policy,
proposed and executed action, supervision, response) and returns the turn's metrics and its log
line. The agents' vocabulary it needs (the action-class map, the judge) is passed in, so this
module does not import the agents it scores.
"""
from __future__ import annotations

from typing import Callable

from convsim.catalog.service.db import ServiceDB, ServiceSchema
from convsim.evaluation.service import metrics
from convsim.evaluation.service.audit import action_grounding, booking_audit, supervisor_correction
from convsim.evaluation.service.refusal import action_class_of
from convsim.evaluation.service.response_grounding import response_grounding
from convsim.evaluation.service.scoring import score_turn
from convsim.evaluation.service.text_check import text_mentions

UNSUPPORTED = ("taxi", "police", "hospital", "bus")
SUPPORTED = ("restaurant", "hotel", "attraction", "train")


def _flat(belief: dict) -> dict[str, str]:
    return {f"{d}-{s}": v for d, slots in belief.items() for s, v in slots.items() if v}


def _required(schema: ServiceSchema, domain: str) -> tuple[str, ...]:
    return schema.booking_required.get(domain, ())


def evaluate_turn_state(state: dict, *, schema: ServiceSchema, db: ServiceDB, action_class: dict[str, str],
                        judge_fn: Callable | None) -> tuple[dict, dict]:
    """``(scores, log)`` of one turn; ``judge_fn(user=, response=, checks=)`` or None for no judge."""
    act, u, t = state["action"], state["user"], state["triage"]
    pred = _flat(state["belief"])
    d = act.get("domain")
    gd, gold_state = u.get("gold_domain"), u.get("gold_state") or {}
    # What the system did, checked by the evaluator's own code (not the supervisor's).
    audit = booking_audit(act, schema, db, gold_state if gd is not None else None)
    before, after = action_grounding(state["proposed"], db), action_grounding(act, db)
    said = text_mentions(state["response"], db, action_entity=(d, act.get("entity")) if act.get("entity") else None)
    # what of the action the reply text states (the customer reads the text, not the action)
    spoken = response_grounding(state["response"], act, text_mentions=said)
    unstated = {i["act"] for i in spoken["items"] if not i["stated"]}
    acts = [a.get("intent") for a in u.get("user_acts", [])]
    user_act = ("bye" if "bye" in acts else "thank" if "thank" in acts and gd == "general"
                else "request" if "request" in acts else "inform")
    offered_before = [e for e in state.get("turn_log", []) if e.get("offered_domain") == gd]
    gold_missing = [s for s in _required(schema, gd or "") if f"{gd}-{s}" not in gold_state
                    and not (s in ("name", "departure", "destination", "day") and offered_before)]
    expected = metrics.expected_action(user_act=user_act, intent=u.get("gold_intent"), domain=gd,
                                       missing_required=gold_missing, unsupported=gd in UNSUPPORTED)
    # a refusal the database does not back ("no availability" for an available venue) is a wrong action
    actual = action_class_of(act, state["belief"], db, action_class)
    mentions = [{"grounded": bool(after["grounded"])}] if after["mentions"] else []
    text_ok = not any(not m["grounded"] for m in said)
    judge = None
    if judge_fn is not None:
        # a requested fact counts as answered only when its value is in the reply text
        checks = {"requested": [r for r in t.get("requested", []) if act.get("kind") == "inform"],
                  "informed": {k: v for k, v in act.get("informed", {}).items() if f"fact:{k}" not in unstated},
                  "grounded": all(x["grounded"] for x in mentions) and text_ok,
                  "compliant": bool(audit["compliant"]), "action_ok": expected in (None, actual),
                  "refusal": act["kind"] == "unsupported",
                  "unstated": sorted(unstated & {"entity", "reference"}),
                  "text_ungrounded": bool(spoken["ungrounded"])}
        judge = judge_fn(user=u["text"], response=state["response"], checks=checks)
    scores = score_turn(user=u, triage=t, pred_state=pred, action=act, mentions=mentions,
                        missing_required=audit["missing"], expected=expected, actual=actual, judge=judge,
                        text_mentions=said)
    if judge:
        scores.update(judge=judge["judge"], judge_model=judge["model"], judge_label=judge.get("label"),
                      judge_prompt_version=judge["prompt_version"], judge_raw=judge["raw"])
    pol = state["policy"]
    policy_ok = None
    if gd in SUPPORTED and u.get("gold_intent") == f"book_{gd}" and schema.bookable(gd):
        policy_ok = int(bool(pol.get("booking_requested")) and bool(pol.get("allowed")) == (not gold_missing))
    llm_failed = [n for n, out in (("triage", t), ("policy", pol), ("action", state["proposed"]))
                  if isinstance(out, dict) and out.get("llm_failure")]
    # each failed agent model's error and raw answer, this turn's (the node's state keeps the last turn's only)
    llm_failure_raw = {n: {"error": str(out["llm_failure"].get("error"))[:300], "raw": out["llm_failure"].get("raw")}
                       for n, out in (("triage", t), ("policy", pol), ("action", state["proposed"]))
                       if n in llm_failed}
    scores.update(policy_decision_accuracy=policy_ok, llm_failures=len(llm_failed), llm_failed_nodes=llm_failed,
                  # a booking asked for that the policy blocks: where a booking without its slots can happen
                  booking_blocked=int(bool(pol.get("booking_requested")) and not pol.get("allowed")),
                  llm_failure_raw=llm_failure_raw or None,
                  action_selection_accuracy=None if expected is None else
                  int(action_class.get(state["proposed"]["kind"], state["proposed"]["kind"]) == expected))
    scores.update(db_grounding_proposed=None if not before["mentions"] else before["grounded"],
                  db_mentions_proposed=before["mentions"], db_grounded_proposed=before["grounded"],
                  supervisor_blocks=len(state["supervision"]["violations"]),
                  supervisor_correction=supervisor_correction(state["proposed"], act),
                  booking_unconfirmed=len(audit["unconfirmed"]), bookings_made=audit["booked"],
                  unsupported_domain=int(gd in UNSUPPORTED),
                  text_mention_log=[f"{m['slot']}={m['value']}:{'ok' if m['grounded'] else 'UNGROUNDED'}"
                                    for m in said],
                  response_grounding=spoken["score"], response_acts_checked=spoken["checked"],
                  response_acts_stated=spoken["stated"], response_ungrounded=spoken["ungrounded"],
                  response_unstated=sorted(unstated) or None)
    log = {"turn": state["turn"], "gold_domain": gd, "gold_state": gold_state, "pred_state": pred,
           "user_text": u.get("text"),  # memory transfer: a value the user restated is no transfer
           "offered_domain": d if act.get("entity") else None, "gold_intent": u.get("gold_intent"),
           # what reached the customer in text: the named entity, the reference, the stated facts
           "said": {"domain": d, "entity": act.get("entity") if act.get("entity") and "entity" not in unstated
                    else None,
                    "reference": act.get("reference") if act.get("kind") == "book" and "reference" not in unstated
                    else None, "entity_of_facts": act.get("entity"),
                    "facts": {k: v for k, v in (act.get("informed") or {}).items()
                              if k != "ref" and f"fact:{k}" not in unstated}}}
    return scores, log
