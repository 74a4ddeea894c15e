"""The eleven MAS4CS metrics (the MAS4CS metrics design), as pure functions,
plus the simulation metrics (task success, pass^k) and the fixes of the reference (§9).

States are flat dicts ``{'domain-slot': value}``; gold values may be a list of acceptable
values (MultiWOZ 2.2), and a prediction matching any of them is correct. Values must already
be normalised (``convsim.catalog.service.normalize``). Every function returns ``None`` when it does
not apply (no gold, nothing predicted, no opportunity), never a silent 0 or NaN.

Aggregation conventions (one per metric, also written into every result by ``AGGREGATION``):
macro = mean over dialogues of the dialogue mean; micro = pooled over all evaluated turns.
"""
from __future__ import annotations

import re
from math import comb

AGGREGATION = {
    "domain_routing": "turn 0/1; dialogue = mean over gold-annotated turns; dataset = macro (mean of dialogue means)",
    "intent_accuracy": "turn 0/1; dialogue = mean; dataset = macro",
    "act_type_accuracy": "turn 0/1 on act-type sets; dialogue = mean; dataset = macro (act-type precision/recall "
                         "are kept per turn only, in turn_metrics)",
    "slot_accuracy": "turn = correct gold pairs / gold pairs (recall); dialogue = mean; dataset = micro (pooled turns)",
    "joint_goal_accuracy": "turn 0/1 exact state match; dialogue = mean; dataset = micro (pooled turns), as MultiWOZ",
    "slot_precision": "turn = correct predicted pairs / predicted pairs in the active domain; dataset = micro; "
                      "MAS4CS calls 1 - this the 'hallucination rate' (slot_false_discovery)",
    "db_grounding": "turn = grounded mentions / mentions; dialogue = pooled mentions; dataset = micro over mentions",
    "memory_transfer": "event 0/1; opportunities: simulation = goal domains whose script refers back to an "
                       "earlier domain's value (from the goal, the same for every agent; never reached = 0), "
                       "replay = the gold state's carried values; values the user restated and dontcare are no "
                       "opportunity (memory_transfer_restated counts the former); dialogue = correct / "
                       "opportunities; dataset = macro over dialogues with >= 1 opportunity, denominator "
                       "(dialogues, opportunities, restated) reported",
    "policy_compliance": "turn 0/1; dialogue = violation count; dataset = violations / all turns (micro)",
    "system_correctness": "turn 0/1 (an unsupported-domain turn expects the refusal), None only when the gold "
                          "domain is unknown or general small talk (counted: system_correct_unscored); "
                          "dialogue = mean over turns with an expected action; dataset = macro",
    "text_hallucination": "turn = ungrounded entity/attribute mentions in the response text / mentions; dialogue = "
                          "pooled mentions; dataset = micro over mentions (text_hallucination_micro)",
    "db_grounding_proposed": "db_grounding of the action agent's proposal, before the supervisor; pooled as "
                             "db_grounding; supervisor_corrections = turns whose executed action differs",
    "policy_violations": "turns whose executed booking lacks a schema-required slot (evaluator's own audit of the "
                         "booking made, not the supervisor's check); booking_unconfirmed = booked values the user "
                         "never gave",
    "task_completion": "dialogue 0/1 (customer view, no policy gate), None without a goal; dataset = completed / "
                       "dialogues that have a value",
    "task_completion_gated": "task_completion AND zero policy violations (MAS4CS's gate, reported apart)",
    "response_quality": "turn = judge score 1-5 (failures excluded and counted); dialogue = mean; dataset = macro; "
                        "judge model, prompt version and failure rate reported",
    "heuristic_response_quality": "response_quality when the judge is the heuristic (model none), named so; "
                                  "kept out of correlations with judge metrics",
    "task_success": "simulation: dialogue 0/1 against goal + db; dataset = rate; pass^k over trials",
}


def _matches(pred: str | None, gold) -> bool:
    if pred is None:
        return False
    return pred in gold if isinstance(gold, (list, tuple, set)) else pred == gold


def domain_routing_turn(predicted: str | None, gold: str | None) -> int | None:
    """DomainAcc_turn = 1 if predicted domain == gold domain else 0 (MAS4CS §1); None without gold."""
    if gold is None:
        return None
    return int(predicted == gold)


def intent_accuracy_turn(predicted: str | None, gold: str | None) -> int | None:
    """IntentAcc_turn = 1 if exact match else 0 (MAS4CS §2); None without gold."""
    if gold is None:
        return None
    return int(predicted == gold)


def set_precision_recall(predicted: list[str], gold: list[str]) -> dict:
    """Set precision |P∩G|/|P| and recall |P∩G|/|G| (MAS4CS §2, §3 diagnostics); None when empty."""
    p, g = set(predicted), set(gold)
    return {"precision": len(p & g) / len(p) if p else None,
            "recall": len(p & g) / len(g) if g else None}


def act_type_accuracy_turn(predicted: list[str], gold: list[str] | None) -> int | None:
    """ActAcc_turn = 1 if set(predicted) == set(gold) else 0 (MAS4CS §3); None without gold."""
    if gold is None:
        return None
    return int(set(predicted) == set(gold))


def slot_accuracy_turn(predicted: dict[str, str], gold: dict) -> float | None:
    """SlotAcc_turn = correct gold pairs / gold pairs (recall; MAS4CS §4); None if gold is empty."""
    if not gold:
        return None
    return sum(_matches(predicted.get(k), v) for k, v in gold.items()) / len(gold)


def joint_goal_turn(predicted: dict[str, str], gold: dict) -> int:
    """JGA_turn = 1 if the predicted state equals the gold state exactly (MAS4CS §5).

    Both missing and extra pairs make it 0; an empty prediction for an empty gold is 1.
    """
    if set(predicted) != set(gold):
        return 0
    return int(all(_matches(predicted[k], gold[k]) for k in gold))


def slot_precision_turn(predicted: dict[str, str], gold: dict, active_domain: str | None) -> float | None:
    """Slot precision = correct predicted pairs / predicted pairs of the active domain.

    MAS4CS §6 calls ``1 - slot_precision`` the "hallucination rate"; it is precision against
    the gold state (wrong domain, slot or value all count), not grounding, so it is named
    for what it is. None when nothing is predicted for the active domain.
    """
    if not active_domain:
        return None
    mine = {k: v for k, v in predicted.items() if k.split("-", 1)[0] == active_domain}
    if not mine:
        return None
    return sum(_matches(v, gold.get(k, ())) if k in gold else False for k, v in mine.items()) / len(mine)


def db_grounding_turn(mentions: list[dict]) -> float | None:
    """Grounded mentions / mentions: each entity the system names must exist in the db with the
    stated facts (the real hallucination check the reference asks for). None without mentions."""
    if not mentions:
        return None
    return sum(bool(m["grounded"]) for m in mentions) / len(mentions)


def _restated(text: str | None, values: list[str]) -> bool:
    """The user's own words of this turn carry the value ("a hotel in the north"): no transfer."""
    if not text:
        return False
    low = " " + re.sub(r"[^a-z0-9]+", " ", str(text).lower()) + " "
    return any(f" {re.sub(r'[^a-z0-9]+', ' ', str(v).lower()).strip()} " in low for v in values if str(v).strip())


def memory_transfer_events(turns: list[dict], slots: tuple[str, ...] = ("area", "pricerange")) -> list[dict]:
    """Transfer opportunities and their outcome (MAS4CS §7).

    ``turns``: ``{gold_domain, gold_state, pred_state[, user_text]}`` in order. An opportunity is
    the first turn at which the gold state of a newly active domain B gains a transferable slot
    whose value equals the value the same slot has for an earlier domain A; it is correct when the
    predicted state then holds ``B-slot`` with that value. Each ``B-slot`` is one opportunity at
    most (the turn it first appears; never re-counted on later turns). Not an opportunity:
    ``dontcare`` (nothing to carry over), and a value the user restated in that turn's own words
    (``user_text`` contains it: "a hotel in the north" needs no memory); those are counted by
    ``memory_transfer_restated`` and reported beside the opportunities.
    """
    return [e for e in _transfer_events(turns, slots) if not e.get("restated")]


def memory_transfer_restated(turns: list[dict], slots: tuple[str, ...] = ("area", "pricerange")) -> int:
    """Carry-over candidates left out because the user restated the value (reported beside the
    opportunities, so the denominator is explained)."""
    return sum(1 for e in _transfer_events(turns, slots) if e.get("restated"))


def _transfer_events(turns: list[dict], slots: tuple[str, ...]) -> list[dict]:
    events, seen = [], set()
    for i, t in enumerate(turns):
        b, gold, pred = t.get("gold_domain"), t.get("gold_state") or {}, t.get("pred_state") or {}
        if not b or b == "general":
            continue
        for slot in slots:
            key = f"{b}-{slot}"
            if key not in gold or key in seen:
                continue
            seen.add(key)
            values = [v for v in (gold[key] if isinstance(gold[key], list) else [gold[key]]) if v != "dontcare"]
            if not values:
                continue
            sources = [k.split("-", 1)[0] for k, v in gold.items()
                       if k.endswith(f"-{slot}") and k != key and
                       set(v if isinstance(v, list) else [v]) & set(values)]
            if not sources:
                continue
            if _restated(t.get("user_text"), values):
                events.append({"turn": i, "from": sources[0], "to": b, "slot": slot, "restated": 1})
                continue
            events.append({"turn": i, "from": sources[0], "to": b, "slot": slot,
                           "correct": int(_matches(pred.get(key), values))})
    return events


def memory_transfer_goal_events(goal: dict, turns: list[dict]) -> list[dict]:
    """Transfer opportunities of a simulated dialogue, defined by the user's goal (agent-independent).

    One opportunity per goal domain B whose script refers back instead of restating the value
    (``goal["reuse"] = {"slot", "from"}``: "in the same area as the restaurant"); the value was
    said in the earlier domain's opening (``sample_goal`` puts it first there). The count comes
    from the goal alone, so two agents on the same seeds get the same denominator. Outcome, read
    from ``turns`` (``{gold_domain, gold_state, pred_state[, user_text]}`` in order): at the first
    turn whose gold state holds ``B-slot`` (the user's reference), ``correct`` = the predicted
    state holds ``B-slot`` with the goal's value; a dialogue that never reaches that reference (the
    user gave up first) is ``reached`` 0 and ``correct`` 0, not dropped. A reference the user's
    words restated (a user model naming the value) is ``restated`` (no memory needed): left out of
    the opportunities and counted by ``memory_transfer_restated``; the rule user's forms never
    restate it. ``dontcare`` is never a reuse value.
    """
    events = []
    for g in goal.get("domains", []):
        reuse = g.get("reuse")
        if not reuse:
            continue
        b, slot = g["domain"], reuse["slot"]
        value = g["constraints"].get(slot)
        if value in (None, "dontcare"):
            continue
        key = f"{b}-{slot}"
        at = next((i for i, t in enumerate(turns) if t.get("gold_domain") == b and key in (t.get("gold_state") or {})),
                  None)
        event = {"turn": at, "from": reuse["from"], "to": b, "slot": slot, "value": value, "reached": int(at is not None)}
        if at is not None and _restated(turns[at].get("user_text"), [value]):
            events.append({**event, "restated": 1})
            continue
        pred = (turns[at].get("pred_state") or {}).get(key) if at is not None else None
        events.append({**event, "correct": int(_matches(pred, [value]))})
    return events


def memory_transfer_dialogue(events: list[dict]) -> dict:
    """MemoryAcc_dialogue = correct transfers / opportunities; score None without opportunities.
    Events marked ``restated`` are no opportunity (counted apart)."""
    events = [e for e in events if not e.get("restated")]
    n = len(events)
    return {"score": sum(e["correct"] for e in events) / n if n else None, "opportunities": n}


def policy_compliance_turn(*, booked: bool, missing_required: list[str]) -> int:
    """Compliance_turn = 0 if the system booked while a required slot was missing, else 1 (MAS4CS §8)."""
    return int(not (booked and missing_required))


def expected_action(*, user_act: str, intent: str | None, domain: str | None,
                    missing_required: list[str], unsupported: bool = False) -> str | None:
    """The right action class for the user's input (MAS4CS §9): close for bye/thanks,
    book when a booking is asked with every required slot, request when some are missing,
    inform when the user asks for information, search when the user gives constraints.
    A turn in a domain the system does not serve (taxi, police, hospital) expects the refusal
    ``unsupported``. None (no expected action, left out of the mean and counted) only when the
    gold domain is unknown or ``general`` without bye/thanks: the spec's five classes name no
    right answer to small talk."""
    if user_act in ("bye", "thank"):
        return "close"
    if unsupported:
        return "unsupported"
    if domain in (None, "general"):
        return None
    if intent == f"book_{domain}":
        return "request" if missing_required else "book"
    if user_act == "request":
        return "inform"
    return "search"


def system_correct_turn(*, expected: str | None, actual: str, grounded: bool, compliant: bool) -> int | None:
    """SystemCorrect_turn = 1 if expected == actual and the turn is db-grounded and policy-compliant."""
    if expected is None:
        return None
    return int(expected == actual and grounded and compliant)


def task_completion_dialogue(*, booking_goals: dict[str, list[str]], booked_domains: set[str],
                             final_state: dict[str, str], requested: dict[str, list[str]],
                             informed: dict[str, set[str]], offered: set[str]) -> int | None:
    """Task completion (customer view, MAS4CS §10), without the policy gate.

    Booking goal of domain d: every required slot of d filled in the final state (the name may
    be the offered entity) and a booking made. Information goal: every requested slot of d
    informed. None when the dialogue has no goal in a bookable/searchable domain.
    """
    if not booking_goals and not requested:
        return None
    for d, required in booking_goals.items():
        filled = all(final_state.get(f"{d}-{s}") or (s in ("name", "departure", "destination", "day")
                                                       and d in offered) for s in required)
        if not (filled and d in booked_domains):
            return 0
    for d, slots in requested.items():
        if not set(slots) <= informed.get(d, set()):
            return 0
    return 1


def pass_hat_k(successes: dict[str, list[bool]], k: int) -> float | None:
    """pass^k (τ-bench): mean over tasks of C(c, k) / C(n, k), c successes in n trials.

    Tasks with fewer than k trials are left out; None when no task has k trials.
    """
    vals = [comb(sum(map(bool, t)), k) / comb(len(t), k) for t in successes.values() if len(t) >= k]
    return sum(vals) / len(vals) if vals else None


def mean_or_none(values) -> float | None:
    """Mean of the applicable values (None skipped); None when nothing applies."""
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
