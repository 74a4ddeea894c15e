"""The C5 feedback loop: ask the members the resolution does not reflect, and revise.

Reference ``group_and_retrieval.md`` §1b: a member is targeted when the informative tokens of
their preference have zero overlap with the resolution text. Each round has one
``user_feedback_<slot>`` turn per targeted member and one ``sys_feedback_<slot>`` turn, with the
fields ``resolved``, ``updated_resolution_explanation``, ``targeted_feedback_question`` and
``final_revised_decision``. A targeted member's option is added to the decision unless another
member strongly rejects it (then the system explains why it stays out). The loop exits when no
member is targeted any more or after ``max_rounds``.
"""

from __future__ import annotations

from evaluation.group.text import informative_tokens, is_strong_rejection, polarity_score, tokenize

from agents.group.vote import option_label


def feedback_targets(rows: list[dict], resolution_text: str) -> list[str]:
    """Members whose preference tokens do not occur in the resolution text at all."""
    resolved = set(tokenize(resolution_text))
    return [r["member"] for r in rows
            if not set(informative_tokens(r["text"], positive_only=True)) & resolved]


def feedback_round(slot: str, decision: dict, rows: list[dict], targets: list[str],
                   resolution_text: str, round_no: int) -> tuple[list[dict], dict, str]:
    """One round: (turns, revised decision, revised resolution text).

    ``decision`` is the per-sub-slot decision of the slot; the first sub-slot (room type for
    lodging) is the one revised, since house rules are already a union of every requirement.
    """
    sub = next(iter(decision))
    d = {**decision[sub], "selected": list(decision[sub]["selected"])}
    by_member = {r["member"]: r for r in rows}
    turns, added, refused = [], [], []
    for m in targets:
        r = by_member[m]
        opt = r["option"]
        turns.append({"speaker": m, "text": f"I don't see my wish in this: I asked for {option_label(opt)}.",
                      "meta": {"intent": f"user_feedback_{slot}", "slot": slot, "round": round_no}})
        vetoed = [o["member"] for o in rows if o["member"] != m
                  and is_strong_rejection(polarity_score(o["text"], option_label(opt)))]
        if vetoed:
            refused.append((m, opt, vetoed))
        elif opt not in d["selected"]:
            d["selected"].append(opt)
            added.append((m, opt))
        else:
            added.append((m, opt))
    lines = [f"{option_label(o)} is now part of the plan for {m}" for m, o in added]
    lines += [f"{option_label(o)} stays out for {m} because {', '.join(v)} ruled it out; "
              f"{m} gets first pick of the free time instead" for m, o, v in refused]
    update = "; ".join(lines) + "."
    text = (f"Thanks for the feedback on {slot.replace('_', ' ')}. {update} "
            f"Revised decision: {', '.join(option_label(o) for o in d['selected'])}.")
    new_resolution = f"{resolution_text} {update}"
    unresolved = feedback_targets([by_member[m] for m in targets], new_resolution)
    meta = {"intent": f"sys_feedback_{slot}", "slot": slot, "round": round_no,
            "resolved": not unresolved, "updated_resolution_explanation": update,
            "targeted_feedback_question": f"Does the plan for {slot.replace('_', ' ')} work for "
                                          f"{', '.join(targets)}?",
            "final_revised_decision": d["selected"], "targeted_members": targets}
    turns.append({"speaker": "system", "text": text, "meta": meta})
    d["primary"] = d["selected"][0]
    return turns, {**decision, sub: d}, new_resolution
