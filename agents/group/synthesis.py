"""Preference synthesis for one slot: passive merge (C1/C2), raw (C3) and guided (C4/C5).

Every synthesising condition chooses at most ``option_budget`` options per sub-slot; they differ
only in *how* they choose. House rules are requirements, not options: every condition keeps the
union of the stated ones (outside the budget).

- ``passive`` (C1/C2, no system turn): a silent merge. The constraint state holds the option the
  most members stated as their first choice; a tie goes to the one stated first. One option per
  sub-slot (a state tracker holds one value; C1 has one speaker, so it is the spokesperson's).
- ``raw`` (C3), model none: **a plain merge** (``plain_merge``), without a social-choice rule:
  the distinct first choices the members stated, nothing counted, approved or vetoed; when there
  are more than the budget, the first ``option_budget`` of them in a fixed order that favours no
  member and counts nothing (the options' labels, alphabetically). With a ``synthesis`` model the
  model merges the wishes itself (``SynthesisAnswer``: chosen options, whether the wishes
  conflict, explanation, message); an invalid answer is recorded raw and the rule decides.
  (Before the behaviour-based rework C3 was approval voting with coverage, ``approval_coverage``, kept for
  reference: a social-choice rule, C4's own ``approval_vote_plus_coverage`` operator.)
- ``guided`` (C4/C5): the canonical strategy of ``convsim.agents.group.strategies`` (clamped to the
  canonical id in the meta), cut to the budget, in the text contract
  "Conflict: … / Strategy: <plain label>. / Decision: … / Reason: … / Next step: …" (the
  internal id never appears in the text). With a model the model rewords the turn; the decision
  stays the rules' and the model's own words become the recorded explanation.

C3's and C4's texts say the same things about the members' wishes (``_who_line``: each chosen
option with the members whose first choice it is, and the members left out); C4 adds only its
strategy's label and plain reason. Neither restates every member's wish (C4's "Conflict: …" line
used to list "A wants X; B wants Y; …", which raised its M8a above C3's by the text alone).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from convsim.agents.group.answers import empty_or_echo, prompt_pieces
from convsim.agents.group.members import OPTIONS
from convsim.agents.group.strategies import apply_strategy, describe_options, detect_conflict, fit_budget
from convsim.agents.group.vote import option_label
from convsim.errors import ConvsimError
from convsim.agents.language import EnglishTurn, node_vocabulary
from convsim.providers.answer_check import checked_invoke
from convsim.providers.models import ModelUnavailable, echoed_prompt, refused_request
from convsim.evaluation.group.text import STOPWORDS, cue_score, is_strong_rejection, polarity_score, tokenize

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
_SLOT_WORDS = {"traveler_type": "travel style", "travel_purpose": "trip purpose",
               "spending_preference": "budget", "cuisine": "food", "attraction": "sightseeing",
               "event": "events", "lodging": "lodging", "room_type": "room type", "house_rule": "house rules"}


class SynthesisAnswer(BaseModel):
    """What a synthesis model returns for one slot."""
    chosen_options: list[str]
    has_conflict: bool
    explanation: str
    message: EnglishTurn  # said to the group: English (convsim.agents.language)


def read_wish(text: str, options: tuple[str, ...] | list[str]) -> dict:
    """What a member's own words ask for, from the text alone (never the simulator's labels).

    Every option of the slot's vocabulary is scored with the vote round's window-based polarity
    scorer (``convsim.evaluation.group.text``): each full mention of the option's words scores +2, -4
    with a negation cue in the 4 words before, +2 with a positive cue there. A mention inside a
    longer option's mention does not count ("Park" in "Theme Park"). An option never
    said in full counts only when all its content words occur ("pets ... must be allowed" for
    "pets allowed", scored as the vote round scores partial matches); one shared word ("room",
    "allowed") is not a wish. The options the text is positive about (score > 0) are its wishes,
    strongest first, then in the order they were said: the first is ``option``, the second
    ``also_ok``; the first option it strongly rejects (score <= -2, "no Seafood") is ``reject``.
    ``option`` is None when the text asks for nothing of the vocabulary.
    """
    toks = tokenize(text)
    words = {o: tokenize(option_label(o)) for o in options}
    scores, first, claimed = {}, {}, []   # claimed: the spans of longer options' mentions
    for o in sorted(options, key=lambda o: (-len(words[o]), o)):
        n = len(words[o])
        said = [i for i in range(len(toks) - n + 1) if n and toks[i:i + n] == words[o]]
        own = [i for i in said if not any(a <= i and i + n <= b and b - a > n for a, b in claimed)]
        content = [w for w in dict.fromkeys(words[o]) if len(w) >= 3 and w not in STOPWORDS]
        if own:
            scores[o] = sum(2 + cue_score(toks, i) for i in own)
            first[o] = own[0]
        elif not said and content and all(w in toks for w in content):
            scores[o] = polarity_score(text, option_label(o))
            first[o] = min(toks.index(w) for w in content)
        else:
            scores[o], first[o] = 0, len(toks)
        claimed += [(i, i + n) for i in own]
    positive = sorted((o for o in options if scores[o] > 0), key=lambda o: (-scores[o], first[o], o))
    rejected = sorted((o for o in options if is_strong_rejection(scores[o])), key=lambda o: (first[o], o))
    return {"option": positive[0] if positive else None,
            "also_ok": positive[1] if len(positive) > 1 else None,
            "reject": rejected[0] if rejected else None}


def stated_preferences(turns: list[dict], members: list[dict], slot: str) -> dict[str, list[dict]]:
    """``{sub_slot: [{"member", "role", "text", "option", "also_ok", "reject"}]}`` from ``user_provide`` turns.

    The mediator reads the members' **words**: option, also_ok and reject come from the turn's
    text (``read_wish`` over the slot's option vocabulary), not from the structured labels the
    simulator puts in the turn meta (``preference_option`` etc., which M2 uses as ground truth;
    reading them made conflict detection circular). A member whose text names no option of the
    vocabulary is left out of the sub-slot (nothing readable was said); when nobody's text can be
    read, the sub-slot's rows keep every member with the vocabulary's first option, a default
    guess (the simulator checks flag such a member anyway: ``_check_member_profile``).
    """
    roles = {m["name"]: m["role"] for m in members}
    subs = (("room_type", "house_rule") if slot == "lodging" else (slot,))
    rows: dict[str, list[dict]] = {sub: [] for sub in subs}
    for sub in subs:
        vocab = OPTIONS[sub]
        read = []
        for t in turns:
            wish = read_wish(t["text"], vocab)
            if sub == "house_rule":   # requirements: no also_ok / reject ("no smoking" is the rule)
                wish = {**wish, "also_ok": None, "reject": None}
            read.append({"member": t["speaker"], "role": roles.get(t["speaker"], "member"), "text": t["text"],
                         **wish})
        rows[sub] = [r for r in read if r["option"]] or [{**r, "option": vocab[0]} for r in read]
    return {sub: rs for sub, rs in rows.items() if rs}


def silent_merge(rows: list[dict]) -> str:
    """C2's merge: most first choices; a tie goes to the option stated first."""
    counts = Counter(r["option"] for r in rows)
    order = {o: i for i, o in reversed(list(enumerate(r["option"] for r in rows)))}
    return min(counts, key=lambda o: (-counts[o], order[o]))


def approvals(rows: list[dict]) -> dict[str, set[str]]:
    """option -> members approving it (first choice or "would also be fine")."""
    out: dict[str, set[str]] = {}
    for r in rows:
        for o in (r["option"], r.get("also_ok")):
            if o:
                out.setdefault(o, set()).add(r["member"])
    return out


def approval_coverage(rows: list[dict], budget: int) -> list[str]:
    """C3's deterministic rule (module docstring): most approvals first, then marginal coverage."""
    appr = approvals(rows)
    rejected = Counter(r["reject"] for r in rows if r.get("reject"))
    pool = [o for o in appr if not rejected[o]] or list(appr)
    chosen = [min(pool, key=lambda o: (-len(appr[o]), rejected[o], o))]
    covered = set(appr[chosen[0]])
    everyone = {r["member"] for r in rows}
    while len(chosen) < budget and covered != everyone:
        rest = [o for o in pool if o not in chosen and appr[o] - covered]
        if not rest:
            break
        best = min(rest, key=lambda o: (-len(appr[o] - covered), -len(appr[o]), o))
        chosen.append(best)
        covered |= appr[best]
    return chosen


def plain_merge(rows: list[dict], budget: int) -> list[str]:
    """C3's merge, model none (module docstring): the distinct first choices, cut to the budget in
    the alphabetical order of their labels (no counting, approvals or vetoes)."""
    return sorted({r["option"] for r in rows}, key=lambda o: (option_label(o).lower(), o))[:budget]


def _base(sub: str, stated: list[dict], source: str) -> dict:
    return {"sub_slot": sub, "source": source, "has_conflict": detect_conflict(stated),
            "strategy_id": "N/A", "operator": "N/A", "resolution_strategy": "N/A",
            "vote_summary": None, "coverage_commitment": None, "subgroup_assignment": None,
            "subgrouping_required": False, "subgrouping_optional": False, "alternate": False}


def decide(slot: str, group_type: str, stated: dict[str, list[dict]], mode: str, budget: int = 2) -> dict:
    """The decision for one slot: ``{sub_slot: decision}`` (lodging has room_type + house_rule)."""
    out = {}
    for sub, rows in stated.items():
        if sub == "house_rule":
            d = _base(sub, rows, {"guided": "guided", "raw": "raw_synthesis"}.get(mode, "constraint_state"))
            if mode == "guided":
                d.update({k: v for k, v in apply_strategy(sub, group_type, rows).items()
                          if k in ("strategy_id", "operator", "resolution_strategy", "strategy_label",
                                   "explanation_style", "member_options")})
            d["selected"] = sorted({r["option"] for r in rows})   # requirements: the union, unbudgeted
        elif mode == "guided":
            d = fit_budget({**_base(sub, rows, "guided"), **apply_strategy(sub, group_type, rows)}, budget)
        elif mode == "raw":
            d = _base(sub, rows, "raw_synthesis")
            d["selected"] = plain_merge(rows, budget)
        else:
            d = _base(sub, rows, "constraint_state")
            d["selected"] = [silent_merge(rows)]
        d["primary"] = d["selected"][0]
        out[sub] = d
    return out


def _who_line(selected: list[str], rows: list[dict]) -> str:
    """What C3 and C4 both say about the wishes: each chosen option with the members whose first
    choice it is (true counts), then the members whose first choice is not in the decision."""
    n = len(rows)
    parts = []
    for o in selected:
        firsts = sorted(r["member"] for r in rows if r["option"] == o)
        parts.append(f"{option_label(o)} is the first choice of {len(firsts)} of {n}"
                     + (f" ({', '.join(firsts)})" if firsts else ""))
    line = "; ".join(parts) + "."
    left = sorted({r["member"] for r in rows if r["option"] not in selected})
    if left:
        line += f" {', '.join(left)}: your choice did not fit this time; tell me if that is a problem."
    return line


def _raw_text(sub: str, d: dict, rows: list[dict]) -> tuple[str, str]:
    chosen = describe_options(d["selected"])
    topic = _SLOT_WORDS.get(sub, sub.replace("_", " "))
    if not d["has_conflict"]:
        return f"Everyone asked for {chosen} for {topic}, so that is settled.", f"All of you asked for {chosen}."
    reason = _who_line(d["selected"], rows)
    return f"Your wishes for {topic} differ. I suggest {chosen}. {reason}", reason


def _guided_text(sub: str, d: dict, rows: list[dict]) -> tuple[str, str]:
    chosen = describe_options(d["selected"]).replace("_", " ")
    if not d["has_conflict"]:
        return (f"Everyone agrees on {chosen} for {_SLOT_WORDS.get(sub, sub)}, so that is settled.",
                f"All of you asked for {chosen}.")
    branch = ""
    if d.get("subgroup_assignment"):
        g = d["subgroup_assignment"]["groups"]
        branch = " Branches: " + "; ".join(f"{', '.join(ms)} go for {option_label(o)}" for o, ms in g.items()) + "."
    commit = f" {d['coverage_commitment']['commitment']}" if d.get("coverage_commitment") else ""
    topic = _SLOT_WORDS.get(sub, sub.replace("_", " "))
    reason = f"{_who_line(d['selected'], rows)} {chosen}: {d['explanation_style']}.{commit}"
    return (f"Conflict: your wishes for {topic} differ. / Strategy: {d['strategy_label']}. / Decision: {chosen}.{branch}"
            f" / Reason: {reason} / Next step: moving on once you are happy with {chosen}.",
            reason)


def synthesis_text(slot: str, decision: dict, stated: dict[str, list[dict]], mode: str) -> tuple[str, str]:
    """``(utterance, resolution_explanation)`` of the rule-based synthesis turn."""
    texts, reasons = [], []
    for sub, d in decision.items():
        text, reason = (_guided_text if mode == "guided" else _raw_text)(sub, d, stated[sub])
        texts.append(text)
        reasons.append(reason)
    return " ".join(texts), " ".join(reasons)


def llm_raw_synthesis(model, slot: str, stated: dict[str, list[dict]], budget: int) -> tuple[dict | None, dict | None]:
    """C3 with a model: the model merges the wishes of the slot's first sub-slot.

    Returns ``({"selected", "has_conflict", "explanation", "message"}, None)`` or ``(None, failure)``
    when the answer does not parse or names options nobody stated / more than the budget."""
    sub = next(iter(stated))
    rows = stated[sub]
    allowed = {option_label(o).lower(): o for o in approvals(rows)}
    template = (PROMPTS / "group_synthesis_raw.txt").read_text(encoding="utf-8")
    prompt = template.format(
        slot=_SLOT_WORDS.get(slot, slot), budget=budget,
        preferences="\n".join(f"- {r['member']}: {r['text']}" for r in rows),
        options=", ".join(sorted(option_label(o) for o in allowed.values())))
    res = model.structured([("system", "You mediate a group travel planning chat."), ("user", prompt)],
                           SynthesisAnswer, purpose=f"synthesize_{slot}", retries=1)
    if not res.ok:
        return None, {"slot": slot, "error": res.error, "raw": res.raw}
    a = res.value
    chosen = [allowed.get(o.strip().lower()) for o in a.chosen_options]
    if not a.chosen_options or None in chosen or len(set(chosen)) > budget:
        return None, {"slot": slot, "raw": res.raw, "error": f"chosen options {a.chosen_options} are not 1..{budget} "
                                                              f"of the stated options {sorted(allowed)}"}
    for name in ("message", "explanation"):   # JSON that validates but says nothing (answers.py)
        why = empty_or_echo(getattr(a, name), prompt, template, SynthesisAnswer)
        if why is not None:
            return None, {"slot": slot, "raw": res.raw, "error": f"{name}: {why}"}
    return {"selected": list(dict.fromkeys(chosen)), "has_conflict": a.has_conflict,
            "explanation": a.explanation.strip(), "message": a.message.strip()}, None


def llm_guided_text(model, slot: str, stated: dict[str, list[dict]], template_text: str) -> tuple[str | None, dict | None]:
    """C4/C5 with a model: the model words the fixed decision; ``(text, failure)``. An answer that
    repeats a line of the instructions (not the decision, which a good answer keeps word for word,
    nor a member's wish) is a failed one, like an answer under 6 words."""
    template = (PROMPTS / "group_synthesis_guided.txt").read_text(encoding="utf-8")
    preferences = "\n".join(f"- {r['member']}: {r['text']}" for rows in stated.values() for r in rows)
    prompt = template.format(slot=_SLOT_WORDS.get(slot, slot), preferences=preferences, decision=template_text)
    try:
        # the one answer check (convsim.providers.answer_check), re-asked as configured
        answer = checked_invoke(model, [("system", "You mediate a group travel planning chat."), ("user", prompt)],
                                purpose=f"synthesize_{slot}", language="en", vocabulary=node_vocabulary())
        text = answer.text.strip()
    except Exception as exc:   # noqa: BLE001 - a failed answer: record it and go on
        if isinstance(exc, (ModelUnavailable, ConvsimError)) or refused_request(exc):
            # the server's fault (an infra_error), bad input, or a request the server refused (an
            # HTTP 400, e.g. the context length exceeded: a code_error, re-run on resume): no answer
            # of the model, so never the agent's failure (docs/ENGINE_API.md)
            raise
        return None, {"slot": slot, "error": repr(exc), "raw": None}
    if not answer.ok and text:  # bytes, control characters, a runaway length (empty: below)
        return None, {"slot": slot, "error": answer.reason, "raw": answer.raw}
    if len(text.split()) < 6:
        return None, {"slot": slot, "error": "answer shorter than 6 words", "raw": text}
    inputs = set(preferences.splitlines()) | set(template_text.splitlines())
    instructions = "\n".join(line for line in prompt.splitlines() if line not in inputs)
    echoed = echoed_prompt(text, prompt_pieces(instructions, template))
    if echoed is not None:
        return None, {"slot": slot, "error": f"the answer repeats the prompt: {echoed!r}", "raw": text}
    return text, None


def reason_of(text: str) -> str:
    """The "Reason: …" part of a contract-style text, else the whole text (the explanation)."""
    low = text.lower()
    i = low.find("reason:")
    if i < 0:
        return text.strip()
    j = low.find("next step:", i)
    return text[i + len("reason:"): j if j > 0 else None].strip(" /\n")
