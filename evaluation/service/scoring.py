"""Assembles the pure service metrics into turn, dialogue and dataset figures.

Turn: ``score_turn`` (called by the graph's evaluation node). Dialogue: ``score_dialogue``
(the node before END). Dataset: ``score_dataset`` (the graph's ``dataset_metrics``), which
adds the pooled (micro) figures, pass^k and the error split; the engine adds mean/CI of every
dialogue metric. Conventions: ``convsim.evaluation.service.metrics.AGGREGATION``.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from convsim.evaluation.service import metrics as m
from convsim.evaluation.service.text_check import text_hallucination_turn

# response_quality when the heuristic judge (model none) gave it: labelled, as README promises
HEURISTIC_QUALITY = "heuristic_response_quality"


def score_turn(*, user: dict, triage: dict, pred_state: dict[str, str], action: dict,
               mentions: list[dict], missing_required: list[str], expected: str | None,
               actual: str, judge: dict | None, text_mentions: list[dict] | None = None) -> dict:
    gold_state = user.get("gold_state") or {}
    gold_domain = user.get("gold_domain")
    acts = set_pr = None
    if user.get("gold_act_types") is not None:
        acts = m.act_type_accuracy_turn(action.get("acts", []), user["gold_act_types"])
        set_pr = m.set_precision_recall(action.get("acts", []), user["gold_act_types"])
    precision = m.slot_precision_turn(pred_state, gold_state, gold_domain
                                      if gold_domain not in (None, "general") else None)
    grounding = m.db_grounding_turn(mentions)
    compliant = m.policy_compliance_turn(booked=action.get("kind") == "book",
                                         missing_required=missing_required)
    said = text_mentions or []
    # grounded: the action's entity is in the db AND the reply names no invented entity (the customer-service metric definitions,
    # system correctness example 3: "I recommend The Golden Dragon, phone: ..." is incorrect)
    invented = any(x.get("kind", "entity") == "entity" and not x["grounded"] for x in said)
    correct = m.system_correct_turn(expected=expected, actual=actual,
                                    grounded=grounding in (None, 1.0) and not invented, compliant=bool(compliant))
    # a turn without a state annotation (None, not {}) has no gold to score slots against
    scored_gold = gold_domain is not None and user.get("gold_state") is not None
    if user.get("gold_state") is None:
        precision = None
    # Gold intents of the unified format are derived by rule from the acts: named so.
    intent_key = "intent_accuracy_rule_gold" if user.get("gold_intent_source") == "rule" else "intent_accuracy"
    # The heuristic judge's score is named as such (README: heuristic_<metric>), never as an LLM judge's.
    quality_key = HEURISTIC_QUALITY if judge and judge.get("judge") == "heuristic" else "response_quality"
    return {
        "domain_routing": m.domain_routing_turn(triage.get("domain"), gold_domain),
        intent_key: m.intent_accuracy_turn(triage.get("intent"), user.get("gold_intent")),
        "text_hallucination": text_hallucination_turn(said), "text_mentions": len(said),
        "text_ungrounded": sum(not x["grounded"] for x in said),
        "act_type_accuracy": acts,
        "act_type_precision": set_pr["precision"] if set_pr else None,
        "act_type_recall": set_pr["recall"] if set_pr else None,
        "slot_accuracy": m.slot_accuracy_turn(pred_state, gold_state) if scored_gold else None,
        "joint_goal_accuracy": m.joint_goal_turn(pred_state, gold_state) if scored_gold else None,
        "slot_precision": precision,
        "slot_false_discovery": None if precision is None else 1 - precision,
        "db_grounding": grounding, "db_mentions": len(mentions),
        "db_grounded_mentions": sum(bool(x["grounded"]) for x in mentions),
        "policy_compliance": compliant, "expected_action": expected, "actual_action": actual,
        "system_correct": correct, "system_correct_unscored": int(correct is None),
        quality_key: judge["score"] if judge else None,
        "judge_failed": None if judge is None else int(not judge["ok"]),
        **annotation_absent(user),
    }


# Which annotation each gold-based metric needs: a turn without it is not scored (None) and is
# counted (``<annotation>_absent``), so a dialogue figure is over the annotated turns only and a
# reader sees "act labels absent on 40 of 40 system turns" instead of an accuracy of 0.
ANNOTATIONS = {"act_labels": ("gold_act_types", ("act_type_accuracy", "act_type_precision", "act_type_recall")),
               "state_labels": ("gold_state", ("slot_accuracy", "joint_goal_accuracy", "slot_precision")),
               "intent_labels": ("gold_intent", ("intent_accuracy", "intent_accuracy_rule_gold", "domain_routing"))}


def annotation_absent(user: dict) -> dict:
    """``{"<annotation>_absent": 0/1}`` for the turn's gold annotations (a simulated user's turn has
    no act labels: counted absent as well)."""
    return {f"{name}_absent": int(user.get(key) is None) for name, (key, _) in ANNOTATIONS.items()}


def annotation_notes(records: list[dict]) -> dict:
    """Per annotation: the turns that lacked it, of all scored turns, and one line naming the
    metrics it leaves unscored (``act labels absent on 40 of 40 system turns: act_type_accuracy ...
    not scored there``); empty when every turn carried every annotation."""
    turns = [t for r in records for t in r.get("turn_metrics") or [] if isinstance(t, dict)]
    out: dict = {}
    lines = []
    for name, (_, metrics) in ANNOTATIONS.items():
        absent = sum(t.get(f"{name}_absent") or 0 for t in turns)
        out[f"{name}_absent"] = absent
        if absent:
            what = "system turns" if name == "act_labels" else "user turns"
            lines.append(f"{name.replace('_', ' ')} absent on {absent} of {len(turns)} {what}: "
                         f"{', '.join(metrics)} not scored there (None, not 0)")
    out["annotations_turns"] = len(turns)
    if lines:
        out["annotation_notes"] = lines
    return out


TURN_MEANS = ("domain_routing", "intent_accuracy", "intent_accuracy_rule_gold", "act_type_accuracy", "slot_accuracy",
              "joint_goal_accuracy", "slot_precision", "system_correct", "response_quality", HEURISTIC_QUALITY,
              "policy_decision_accuracy", "action_selection_accuracy")


def score_dialogue(turns: list[dict], *, transfer_events: list[dict], completion: int | None,
                   extra: dict) -> dict:
    out = {name: m.mean_or_none(t.get(name) for t in turns) for name in TURN_MEANS
           if any(name in t for t in turns)}
    out["system_correctness"] = out.pop("system_correct", None)  # None: no turn was scored (e.g. the first one failed)
    mentions = sum(t.get("db_mentions", 0) for t in turns)
    out["db_grounding"] = (sum(t.get("db_grounded_mentions", 0) for t in turns) / mentions
                           if mentions else None)
    out["db_mentions"] = mentions
    proposed = sum(t.get("db_mentions_proposed", 0) for t in turns)
    out["db_grounding_proposed"] = (sum(t.get("db_grounded_proposed", 0) for t in turns) / proposed
                                    if proposed else None)
    said = sum(t.get("text_mentions", 0) for t in turns)
    out["text_hallucination"] = sum(t.get("text_ungrounded", 0) for t in turns) / said if said else None
    out["text_mentions"] = said
    checked = sum(t.get("response_acts_checked", 0) or 0 for t in turns)
    out["response_grounding"] = (sum(t.get("response_acts_stated", 0) or 0 for t in turns) / checked
                                 if checked else None)
    out["response_acts_checked"] = checked
    out["response_ungrounded_turns"] = sum(t.get("response_ungrounded") or 0 for t in turns)
    for name, turn_key in (("supervisor_corrections", "supervisor_correction"),
                           ("booking_unconfirmed", "booking_unconfirmed"), ("unsupported_turns", "unsupported_domain"),
                           ("system_correct_unscored", "system_correct_unscored")):
        out[name] = sum(t.get(turn_key, 0) or 0 for t in turns)
    memory = m.memory_transfer_dialogue(transfer_events)
    out["memory_transfer"], out["memory_transfer_opportunities"] = memory["score"], memory["opportunities"]
    out["policy_violations"] = sum(1 - t["policy_compliance"] for t in turns)
    out["n_turns"] = len(turns)
    out["task_completion"] = completion
    out["task_completion_gated"] = None if completion is None else int(
        completion == 1 and out["policy_violations"] == 0)
    judged = [t for t in turns if t.get("judge_failed") is not None]
    out["judge_failures"] = sum(t["judge_failed"] for t in judged)
    out["judge_calls"] = len(judged)
    out["llm_failures"] = sum(t.get("llm_failures", 0) for t in turns)
    # not named judge_*: a count, not a judge's score (the statistics correlate every judge_* metric)
    out["refusals_unscored_by_judge"] = sum(t.get("judge_label") == "refusal_unscored" for t in turns)
    for name in ANNOTATIONS:  # turns whose gold lacked the annotation (their metric is None there)
        out[f"{name}_absent"] = sum(t.get(f"{name}_absent") or 0 for t in turns)
    out.update(extra)
    return out


def _pooled(records: list[dict], name: str) -> dict:
    values = [t[name] for r in records for t in r.get("turn_metrics", []) if t.get(name) is not None]
    return {"value": sum(values) / len(values) if values else None, "n_turns": len(values)}


def _sum_known(values) -> int | None:
    """The sum of the known values; None when every value is None (the input was not reported)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def score_dataset(records: list[dict]) -> dict:
    dms = [r.get("dialogue_metrics") or {} for r in records]
    out: dict = {}
    for name in ("slot_accuracy", "joint_goal_accuracy", "slot_precision", "domain_routing", "intent_accuracy",
                 "intent_accuracy_rule_gold", "act_type_accuracy"):
        pooled = _pooled(records, name)
        if not pooled["n_turns"]:
            continue
        out[f"{name}_micro"], out[f"{name}_micro_n_turns"] = pooled["value"], pooled["n_turns"]
    mentions = sum(d.get("db_mentions", 0) for d in dms)
    grounded = sum(t.get("db_grounded_mentions", 0) for r in records for t in r.get("turn_metrics", []))
    out["db_grounding_micro"] = grounded / mentions if mentions else None
    out["db_mentions"] = mentions
    with_opp = [d for d in dms if d.get("memory_transfer_opportunities")]
    out["memory_transfer_macro"] = m.mean_or_none(d["memory_transfer"] for d in with_opp)
    out["memory_transfer_dialogues"] = len(with_opp)
    out["memory_transfer_opportunities"] = sum(d["memory_transfer_opportunities"] for d in with_opp)
    out["memory_transfer_restated"] = sum(d.get("memory_transfer_restated", 0) or 0 for d in dms)
    out["memory_transfer_unreached"] = sum(d.get("memory_transfer_unreached", 0) or 0 for d in dms)
    turns = sum(d.get("n_turns", 0) for d in dms)
    out["policy_violation_rate"] = sum(d.get("policy_violations", 0) for d in dms) / turns if turns else None
    for name in ("task_completion", "task_completion_gated", "task_success", "task_success_structured",
                 "sim_complete"):
        vals = [d.get(name) for d in dms if d.get(name) is not None]
        out[f"{name}_rate"] = sum(vals) / len(vals) if vals else None
    both = [d for d in dms if d.get("task_success") is not None and d.get("sim_complete") is not None]
    out["success_complete_agreement"] = (sum(d["task_success"] == d["sim_complete"] for d in both) / len(both)
                                         if both else None)
    by_task: dict[str, list[bool]] = defaultdict(list)
    for r, d in zip(records, dms):
        if d.get("task_success") is not None:
            by_task[r.get("session_id", "")].append(bool(d["task_success"]))
    max_trials = max((len(v) for v in by_task.values()), default=0)
    for k in range(1, max_trials + 1):
        out[f"pass^{k}"] = m.pass_hat_k(by_task, k)
    out["agent_errors"] = sum(d.get("agent_errors", 0) for d in dms)
    out["simulator_errors"] = sum(d.get("simulator_errors", 0) for d in dms)
    out["supervisor_blocks"] = _sum_known(d.get("supervisor_blocks", 0) for d in dms)
    for name, num, den in (("db_grounding_proposed_micro", "db_grounded_proposed", "db_mentions_proposed"),
                           ("text_hallucination_micro", "text_ungrounded", "text_mentions")):
        n = sum(t.get(den, 0) for r in records for t in r.get("turn_metrics", []))
        out[name] = sum(t.get(num, 0) for r in records for t in r.get("turn_metrics", [])) / n if n else None
    out["text_mentions"] = sum(d.get("text_mentions", 0) for d in dms)
    for name, turn_key in (("db_mentions_proposed", "db_mentions_proposed"), ("bookings_made", "bookings_made"),
                           ("bookings_blocked", "booking_blocked")):  # opportunities of the fault check
        out[name] = sum(t.get(turn_key, 0) or 0 for r in records for t in r.get("turn_metrics", []))
    checked = sum(t.get("response_acts_checked", 0) or 0 for r in records for t in r.get("turn_metrics", []))
    out["response_grounding_micro"] = (sum(t.get("response_acts_stated", 0) or 0 for r in records
                                           for t in r.get("turn_metrics", [])) / checked if checked else None)
    out["response_acts_checked"] = checked
    out["response_ungrounded_turns"] = sum(d.get("response_ungrounded_turns", 0) or 0 for d in dms)
    for name in ("supervisor_corrections", "booking_unconfirmed", "unsupported_turns", "system_correct_unscored"):
        out[name] = _sum_known(d.get(name, 0) for d in dms)  # None: an agent in the slot has no supervisor
    for name in ("task_success_state", "policy_compliance_state"):  # graded from the bookings left (state_grading)
        vals = [d[name] for d in dms if d.get(name) is not None]
        out[f"{name}_rate"] = sum(vals) / len(vals) if vals else None
    excluded = Counter(d["task_completion_excluded"] for d in dms if d.get("task_completion_excluded"))
    out["task_completion_excluded"] = sum(excluded.values())
    out["task_completion_exclusions"] = (
        f"{sum(excluded.values())} of {len(dms)} dialogues excluded from task completion: "
        + "; ".join(f"{reason} ({n})" for reason, n in sorted(excluded.items()))) if excluded else \
        f"0 of {len(dms)} dialogues excluded from task completion"
    with_unsupported = [d for d in dms if d.get("unsupported_domains")]
    out["dialogues_with_unsupported_domain"] = len(with_unsupported)
    judged = sum(d.get("judge_calls", 0) for d in dms)
    out["judge_failure_rate"] = sum(d.get("judge_failures", 0) for d in dms) / judged if judged else None
    judges = Counter((t.get("judge"), t.get("judge_model"), t.get("judge_prompt_version"))
                     for r in records for t in r.get("turn_metrics", []) if t.get("judge"))
    out["judge"] = [{"kind": k, "model": mo, "prompt_version": v, "turns": n}
                    for (k, mo, v), n in judges.items()]
    out["terminations"] = dict(Counter(d.get("termination") for d in dms))
    out.update(annotation_notes(records))
    out["aggregation"] = m.AGGREGATION
    return out
