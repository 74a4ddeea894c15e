"""Surface realisation of the simulator's moves from a held-out paraphrase pool, or by an LLM.

The agenda simulator decides *what* the user says (its move, acts and slot values); this module
decides *how*. With ``surface: templates`` the simulator's own fixed wording is kept (the rules
were written against it, so triage scores there are optimistic by construction). With
``surface: heldout`` every move is realised from ``catalog/data/service/paraphrases_heldout.json``,
a pool written apart from the triage rules (tests check that it shares no word 2-gram with the
simulator's templates and that the rule triage matches none of its 2-grams:
``convsim.agents.service.wording``), with
several forms per move drawn from the session's ``rng_for(seed, turn, "user", "surface")``.

``llm_realise`` asks the ``user`` model role for the utterance (structured ``UserUtterance``);
an answer that fails validation raises ``SimulatorError`` with the raw text (the simulator cannot
go on without something to say), so the session is a simulator failure, not an agent score.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from convsim.agents.language import EnglishTurn
from convsim.errors import SimulatorError
from convsim.lazy import cached_once

POOL_FILE = Path(__file__).parents[2] / "catalog" / "data" / "service" / "paraphrases_heldout.json"
PROMPT_FILE = Path(__file__).parents[2] / "prompts" / "service_user.txt"
SPOKEN = {"swimmingpool": "swimming pool", "concerthall": "concert hall", "multiple sports": "sports centre",
          "boat": "boat trip", "architecture": "historic building", "entertainment": "entertainment venue"}
BOOK_ORDER = ("bookpeople", "bookstay", "bookday", "booktime")


@cached_once(maxsize=2)
def load_pool(path: str | None = None) -> dict:
    return json.loads(Path(path or POOL_FILE).read_text(encoding="utf-8"))


def _join(parts: list[str]) -> str:
    parts = [p for p in parts if p]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else ""


def _constraint(pool: dict, slot: str, value: str, goal: dict, rng) -> str:
    forms = pool["constraint"]
    if goal.get("reuse") and goal["reuse"]["slot"] == slot:
        return rng.choice(forms["refer"]).format(**{"from": goal["reuse"]["from"]})
    key = f"{slot}:{value}"
    options = forms.get(key) or forms.get(slot) or ["{value}"]
    return rng.choice(options).format(value=SPOKEN.get(value, value))


def _booking(pool: dict, domain: str, values: dict[str, str], rng, *, lead: bool = True) -> str:
    book = pool["book"]
    if not values:
        return rng.choice(book["none"])
    parts = []
    for slot in BOOK_ORDER:
        if slot not in values:
            continue
        key = {"bookpeople": "people_train" if domain == "train" else "people", "bookstay": "stay",
               "bookday": "day", "booktime": "time"}[slot]
        parts.append(rng.choice(book[key]).format(people=values.get("bookpeople"), stay=values.get("bookstay"),
                                                  day=values.get("bookday"), time=values.get("booktime")))
    head = rng.choice(book["lead_train" if domain == "train" else "lead"]) + " " if lead else ""
    return head + " ".join(parts) + "."


def realise(move: str, out: dict, goal: dict | None, rng, pool: dict | None = None) -> str:
    """The held-out wording of one simulator move (``out`` is ``user_turn``'s output)."""
    pool = pool or load_pool()
    if move in ("bye", "give_up"):
        return rng.choice(pool[move])
    domain = out.get("gold_domain")
    goal = goal or {}
    state = out.get("gold_state") or {}
    informed = [a["slot"] for a in out.get("user_acts", []) if a.get("intent") == "inform"]
    values = {s: state[f"{domain}-{s}"][0] for s in informed if f"{domain}-{s}" in state}
    book = {s: v for s, v in values.items() if s.startswith("book")}
    search = {s: v for s, v in values.items() if not s.startswith("book")}
    dontcare = [s for s, v in search.items() if v == "dontcare"]
    phrases = [_constraint(pool, s, v, goal, rng) for s, v in search.items() if v != "dontcare"]
    slots = _join(phrases)
    if move in ("opening", "also"):
        lead = rng.choice(pool[move][domain])
        return f"{lead}, {slots}." if slots else f"{lead}."
    if move == "request":
        asked = [a["slot"] for a in out.get("user_acts", []) if a.get("intent") == "request"]
        words = pool["request"]
        return rng.choice(words["lead"]).format(slots=_join([rng.choice(words.get(s, [s])) for s in asked]))
    if move == "book":
        return _booking(pool, domain, book, rng)
    if move == "fallback":
        return rng.choice(pool["fallback"]).format(slots=_booking(pool, domain, book, rng, lead=False).rstrip("."))
    if move in ("correction", "relax", "recommend"):
        return rng.choice(pool[move]).format(slots=slots)
    text = [rng.choice(pool["dontcare"][s]) for s in dontcare if s in pool["dontcare"]]
    if slots:
        text.append(rng.choice(pool["more"]).format(slots=slots))
    if book:
        text.append(_booking(pool, domain, book, rng))
    return " ".join(text) or rng.choice(pool["more"]).format(slots="as I said")


class UserUtterance(BaseModel):
    """What the LLM user says next: plain words, no labels, no JSON."""
    text: EnglishTurn = Field(min_length=1, max_length=400)  # English (convsim.agents.language)

    @field_validator("text")
    @classmethod
    def _plain(cls, v: str) -> str:
        v = v.strip()
        if not v or v.startswith(("{", "[")) or v.lower().startswith(("system:", "assistant:", "agent:")):
            raise ValueError("the utterance must be plain words from the user, without labels or JSON")
        return v


def llm_realise(model, move: str, out: dict, history: list[str], *, fallback: str | None = None) -> tuple[str, dict]:
    """``(text, call_record)``: the ``user`` model's wording of the move. On garbage: SimulatorError,
    or with ``fallback`` (the rule user's own wording of the move) that text, the record saying so
    (``ok`` False, the raw answer kept, ``fallback: "rule"``) so that the dialogue goes on and the
    agent is still evaluated."""
    acts = [{k: a.get(k) for k in ("intent", "domain", "slot")} for a in out.get("user_acts", [])]
    state = out.get("gold_state") or {}
    values = {f"{a['domain']}-{a['slot']}": state.get(f"{a['domain']}-{a['slot']}", [None])[0]
              for a in acts if a.get("slot")}
    messages = [("system", PROMPT_FILE.read_text(encoding="utf-8")),
                ("user", "Conversation so far:\n{}\n\nYour move: {}\nActs: {}\nValues: {}".format(
                    "\n".join(history[-6:]), move, json.dumps(acts), json.dumps(values)))]
    answer = model.structured(messages, UserUtterance, purpose="user_turn", retries=2)
    error = answer.error
    said = [str(v).lower() for v in values.values() if v and v != "dontcare"]
    if answer.ok and said and not any(v in answer.value.text.lower() for v in said):
        # an utterance that states none of the move's values (e.g. the schema's own description
        # echoed back) does not carry the move: the dialogue cannot go on truthfully
        error = f"the utterance states none of the values {said}"
    record = {"ok": answer.ok and error is None, "raw": answer.raw, "error": error, "attempts": answer.attempts}
    if not record["ok"] and fallback is not None:
        return fallback, {**record, "fallback": "rule"}
    if not record["ok"]:
        raise SimulatorError(f"LLM user gave no valid utterance after {answer.attempts} attempts: "
                             f"{error}; raw answer: {answer.raw!r}")
    return answer.value.text, record
