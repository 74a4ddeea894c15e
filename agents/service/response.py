"""Response agent: the system's utterance from the approved action (template or LLM).

With model ``none`` a template renders the action; with a model, the model phrases the same
facts (prompt ``prompts/service_response.txt``) and the template is used when the call fails,
the answer is empty, or the answer repeats its prompt (a weak model's echo of the instructions,
the ``Conversation so far:`` scaffolding or the action's JSON: ``convsim.providers.models.echoed_prompt``).
A request the server refused (an HTTP 400: ``convsim.providers.models.refused_request``) is re-raised, as
an unreachable server is: neither is the model's answer.
"""
from __future__ import annotations

import functools
from pathlib import Path

from convsim.agents.language import node_vocabulary
from convsim.providers.answer_check import checked_invoke
from convsim.providers.models import ModelUnavailable, echoed_prompt, refused_request

PROMPT_FILE = Path(__file__).parents[2] / "prompts" / "service_response.txt"
HISTORY_HEAD = "Conversation so far:"        # the scaffolding of the model's user message
ACTION_HEAD = "Action to express (JSON):"
SLOT_WORDS = {"area": "area", "pricerange": "price range", "food": "type of food",
              "bookday": "day", "bookpeople": "number of people", "bookstay": "number of nights",
              "booktime": "time", "departure": "departure station", "destination": "destination",
              "day": "day of travel", "leaveat": "departure time", "arriveby": "arrival time",
              "type": "type", "name": "name", "stars": "star rating"}


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _facts(informed: dict[str, str]) -> str:
    parts = [f"the {k.replace('entrancefee', 'entrance fee')} is {v}" for k, v in informed.items()
             if k != "ref"]
    return _list(parts) if parts else ""


def template_response(action: dict) -> str:
    kind, domain = action["kind"], action.get("domain") or ""
    entity, asked = action.get("entity"), [SLOT_WORDS.get(s, s) for s in action.get("requested", [])]
    if kind == "bye":
        return "Thank you for contacting us. Goodbye!"
    if kind == "welcome":
        return "You're welcome. Is there anything else I can help you with?"
    if kind == "unsupported":
        return "I'm sorry, I can only help with restaurants, hotels, attractions and trains."
    if kind == "nooffer":
        return f"I'm sorry, there is no {domain} matching your request. Could you change a constraint?"
    if kind == "book":
        booked = f"Your booking at {entity} is confirmed" if domain != "train" \
            else f"I have booked train {entity} for you"
        extra = f"; the price is {action['informed']['price']}" if "price" in action["informed"] else ""
        return f"{booked}. Your reference number is {action['reference']}{extra}. Anything else?"
    if kind == "nobook":
        return (f"I'm sorry, {entity} cannot be booked for those details. "
                f"Would you like another {_list(asked) if asked else 'option'}?")
    if kind == "request":
        offer = f"I can offer {entity}. " if entity else ""
        return f"{offer}Could you tell me the {_list(asked)}?"
    if kind == "inform":
        facts = _facts(action["informed"])
        return f"For {entity}, {facts}." if facts else f"{entity} is a good match."
    if kind == "search":
        if not entity:
            return f"I found {action['count']} {domain} options. What {_list(asked)} would you like?"
        facts = _facts(action["informed"])
        offer = (f"I recommend {entity}" if domain != "train"
                 else f"Train {entity} matches your request")
        tail = " Would you like me to book it?" if domain in ("restaurant", "hotel", "train") else ""
        return f"{offer}{' (' + facts + ')' if facts else ''}.{tail}"
    return "How can I help you?"


@functools.lru_cache(maxsize=1)
def system_prompt() -> str:
    return PROMPT_FILE.read_text(encoding="utf-8")


def prompt_texts(action: dict | None = None) -> list[str]:
    """What the response model is sent that a reply must not repeat: the system prompt, the
    scaffolding lines and the action (its JSON). Not the conversation: a reply may quote the user."""
    texts = [system_prompt(), HISTORY_HEAD, ACTION_HEAD]
    if action is not None:
        texts.append(str(action))
    return texts


def llm_response(model, action: dict, history: list[str]) -> dict:
    """``{"text", "source", "failure"}``: the model's wording, or the template when it fails
    (the call raised, the answer is empty, or it echoes its prompt); a failure keeps the raw text."""
    messages = [("system", system_prompt()),
                ("user", "{}\n{}\n\n{} {}".format(HISTORY_HEAD, "\n".join(history[-6:]), ACTION_HEAD, action))]
    try:
        # the one answer check (convsim.providers.answer_check), re-asked as configured
        # English, with the words the shipped data and prompts hold (convsim.agents.language)
        answer = checked_invoke(model, messages, purpose="respond", language="en", vocabulary=node_vocabulary())
        text = answer.text.strip()
    except ModelUnavailable:  # the server's fault, not the model's answer: the session is an infra_error
        raise
    except Exception as err:  # noqa: BLE001 - a failed call is recorded, the template answers
        if refused_request(err):  # an HTTP 400: no answer and no model's behaviour (a code_error)
            raise
        return {"text": template_response(action), "source": "template",
                "failure": {"error": repr(err), "raw": None}}
    if not answer.ok:  # nothing, bytes, control characters, a runaway length: never a reply
        return {"text": template_response(action), "source": "template",
                "failure": {"error": answer.reason, "raw": answer.raw,
                            **({"failed_raws": answer.raws} if len(answer.raws) > 1 else {})}}
    echoed = echoed_prompt(text, prompt_texts(action))
    if echoed:  # the model answered with its prompt: a failed answer, never a reply to the customer
        return {"text": template_response(action), "source": "template",
                "failure": {"error": f"echoed the prompt: {echoed[:80]!r}", "raw": text}}
    return {"text": text, "source": "llm", "failure": None}
