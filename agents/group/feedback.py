"""The C5 feedback loop: ask the members the resolution does not reflect, and revise.

Reference ``group_and_retrieval.md`` §1b: a member is targeted when the informative tokens of
their preference have zero overlap with the resolution text. Each round has one
``user_feedback_<slot>`` turn per targeted member and one ``sys_feedback_<slot>`` turn, with the
fields ``resolved``, ``updated_resolution_explanation``, ``targeted_feedback_question`` and
``final_revised_decision``. Revisions stay within the option budget: a targeted member's option
is added while the decision has fewer options than the budget; otherwise it is **swapped** for
the selected option (never the primary) that the fewest members approve, if the target's option
has at least as many approvers; it stays out when another member strongly rejects it or when the
swap would cover fewer members (the system says why). The loop exits when no member is targeted
any more or after ``max_rounds``.
"""

from __future__ import annotations

from convsim.evaluation.group.text import informative_tokens, is_strong_rejection, polarity_score, tokenize

from convsim.agents.group.vote import option_label


def feedback_targets(rows: list[dict], resolution_text: str) -> list[str]:
    """Members whose preference tokens do not occur in the resolution text at all."""
    resolved = set(tokenize(resolution_text))
    return [r["member"] for r in rows
            if not set(informative_tokens(r["text"], positive_only=True)) & resolved]


def _support(option: str, rows: list[dict]) -> int:
    return sum(option in (r["option"], r.get("also_ok")) for r in rows)


def _swap(d: dict, member: str, new: str, rows: list[dict]) -> str | None:
    """Swap ``new`` in for the weakest non-primary option; returns the dropped option or None."""
    others = d["selected"][1:]
    if not others:
        return None
    drop = min(reversed(others), key=lambda o: _support(o, rows))
    if _support(new, rows) < _support(drop, rows):
        return None
    sa = d.get("subgroup_assignment")
    if sa and drop in sa["groups"]:
        groups = {(new if o == drop else o): [m for m in ms if m != member] for o, ms in sa["groups"].items()}
        groups[new].append(member)
        if not all(groups.values()):
            return None
        d["subgroup_assignment"] = {**sa, "options": [new if o == drop else o for o in sa["options"]],
                                    "groups": groups}
    cc = d.get("coverage_commitment")
    if cc:
        kept = {m: o for m, o in cc["minority_targets"].items() if o != drop}
        d["coverage_commitment"] = {**cc, "minority_targets": kept} if kept else None
    d["selected"] = [new if o == drop else o for o in d["selected"]]
    return drop


def feedback_round(slot: str, decision: dict, rows: list[dict], targets: list[str],
                   resolution_text: str, round_no: int, budget: int = 2) -> tuple[list[dict], dict, str]:
    """One round: (turns, revised decision, revised resolution text).

    ``decision`` is the per-sub-slot decision of the slot; the first sub-slot (room type for
    lodging) is the one revised, since house rules are already a union of every requirement.
    """
    sub = next(iter(decision))
    d = {**decision[sub], "selected": list(decision[sub]["selected"])}
    by_member = {r["member"]: r for r in rows}
    turns, added, refused, swapped, weaker = [], [], [], [], []
    for m in targets:
        r = by_member[m]
        opt = r["option"]
        turns.append({"speaker": m, "text": f"I don't see my wish in this: I asked for {option_label(opt)}.",
                      "meta": {"intent": f"user_feedback_{slot}", "slot": slot, "round": round_no}})
        vetoed = [o["member"] for o in rows if o["member"] != m
                  and is_strong_rejection(polarity_score(o["text"], option_label(opt)))]
        if vetoed:
            refused.append((m, opt, vetoed))
        elif opt in d["selected"]:
            added.append((m, opt))
        elif len(d["selected"]) < budget:
            d["selected"].append(opt)
            added.append((m, opt))
        else:
            dropped = _swap(d, m, opt, rows)
            if dropped:
                swapped.append((m, opt, dropped))
            else:
                weaker.append((m, opt))
    lines = [f"{option_label(o)} is now part of the plan for {m}" for m, o in added]
    lines += [f"{option_label(o)} replaces {option_label(x)} for {m}" for m, o, x in swapped]
    lines += [f"{option_label(o)} stays out for {m} because the current choices suit more of you"
              for m, o in weaker]
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
