"""Members with a will: how a member says a wish and whether they accept the plan.

Model ``none`` (rule-based): the wish is the profile's template utterance; the graph decides a
member's verdict by the member's own view of the plan (``convsim.agents.group.member_view``: its own
options among the lived places, less its dislikes, against a tolerance drawn per member), no longer
by the metric's s_i (``rule_verdict`` below, kept for callers of the old rule). With a ``member`` model each member speaks in persona from their profile
(``prompts/group_member_speak.txt``) and decides on the plan (``prompts/group_member_verdict.txt``)
through the project's ChatModel; answers are validated (``MemberUtterance`` must name the member's
first option; ``MemberVerdict``), and a failed answer falls back to the rule, with the raw answer
kept in ``llm_failures``. An utterance that is empty, only a schema field's name or title
(``"Utterance"``) or the prompt echoed back (``convsim.agents.group.answers``) is a failed answer too: JSON
that validates is not yet a member's words, and before, a verdict of ``{"accept": true,
"utterance": "Utterance"}`` was taken as the member accepting the plan (M6).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from convsim.agents.group.answers import empty_or_echo
from convsim.agents.language import EnglishTurn
from convsim.agents.group.members import ACTIONABLE_SLOTS
from convsim.catalog.travel import option_label

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"


class MemberUtterance(BaseModel):
    utterance: EnglishTurn  # a member's turn: English (convsim.agents.language)


class MemberVerdict(BaseModel):
    accept: bool
    utterance: EnglishTurn


def _first_option(member: dict, slot: str) -> str:
    pref = member["preferences"][slot]
    return option_label(pref["room_type"] if slot == "lodging" else pref["option"])


def speak_with_model(model, member: dict, slot: str, turn: dict, *, group_type: str) -> tuple[dict, dict | None]:
    """``(turn, failure)``: the member's wish in their own words; the template turn on failure."""
    pref = member["preferences"][slot]
    option = _first_option(member, slot)
    extra = option_label(pref["house_rule"]).replace("_", " ") if slot == "lodging" else None
    template = (PROMPTS / "group_member_speak.txt").read_text(encoding="utf-8")
    prompt = template.format(
        name=member["name"], persona=member["persona"], group=group_type, slot=slot.replace("_", " "),
        option=option + (f" ({extra})" if extra else ""), also_ok=pref.get("also_ok") or "nothing else",
        reject=pref.get("reject") or "nothing in particular")
    res = model.structured([("system", f"You are {member['name']}, a member of a travel group."),
                            ("user", prompt)], MemberUtterance, purpose=f"member_speak_{slot}", retries=1)
    if not res.ok:
        return turn, {"slot": slot, "member": member["name"], "error": res.error, "raw": res.raw}
    text = res.value.utterance.strip()
    echo = empty_or_echo(text, prompt, template, MemberUtterance)
    if echo:
        return turn, {"slot": slot, "member": member["name"], "raw": res.raw, "error": echo}
    if option.lower() not in text.lower():
        return turn, {"slot": slot, "member": member["name"], "raw": res.raw,
                      "error": f"utterance does not name the member's wish {option!r}"}
    return {**turn, "text": text, "meta": {**turn["meta"], "voice": model.spec.spec}}, None


def rule_verdict(member: dict, rate: float | None, threshold: float, missing: list[str]) -> tuple[bool, str]:
    """Accept iff s_i >= threshold (a member with no actionable wish accepts)."""
    ok = rate is None or rate >= threshold
    if ok:
        return True, "That works for me, thanks!"
    wishes = ", ".join(missing) or "what I asked for"
    return False, f"This does not work for me: {wishes} is missing from the plan."


def verdict_with_model(model, member: dict, plan_text: str) -> tuple[bool | None, str, dict | None]:
    """``(accept, utterance, failure)``; ``accept`` is None when the answer failed."""
    wishes = "\n".join(f"- {s}: {member['preferences'][s]['text']}" for s in ACTIONABLE_SLOTS)
    template = (PROMPTS / "group_member_verdict.txt").read_text(encoding="utf-8")
    prompt = template.format(
        name=member["name"], persona=member["persona"], wishes=wishes, plan=plan_text)
    res = model.structured([("system", f"You are {member['name']}, a member of a travel group."),
                            ("user", prompt)], MemberVerdict, purpose="member_verdict", retries=1)
    if not res.ok:
        return None, "", {"slot": "verdict", "member": member["name"], "error": res.error, "raw": res.raw}
    text = res.value.utterance.strip()
    echo = empty_or_echo(text, prompt, template, MemberVerdict)
    if echo:   # no verdict: its ``accept`` is not read (the rule decides)
        return None, "", {"slot": "verdict", "member": member["name"], "error": echo, "raw": res.raw}
    return res.value.accept, text, None
