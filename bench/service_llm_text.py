"""Customer-service sessions with real gemma3-270m wording, and what the text checks said of it.

Prints figures and writes what it saw, never passes or fails:

    python bench/service_llm_text.py response --sessions 10 --out /tmp/resp.jsonl
    python bench/service_llm_text.py user --sessions 10 --out /tmp/user.jsonl
    python bench/service_llm_text.py rescore /tmp/resp.jsonl     # the current checks on the same text
    python bench/service_llm_text.py clean --sessions 300 --seed 11   # false alarms on the rule simulator

``response``: the response role is the LLM; every reply is logged with its action and the
``response_grounding`` verdict. ``user``: the user role is the LLM; every utterance is logged with
its move, the values the simulator meant and the ``misstated_values`` verdict. ``rescore`` runs the
checks of the tree on a log again (no model call), for before/after counts on the same text.
``clean``: no model; the rule simulator in both wordings (templates, held-out, policy requests at
0.2), and every session ``user_misstated`` flags (the clean simulator misstates nothing, so each
is a false alarm of the rule parse).

Why an adapter: the package's ``gemma3-270m`` GGUF is the *base* model (no instruction tuning).
Sent the project's chat prompts it repeats them (46 of 46 response turns echoed the system prompt
at temperature 0, all rejected by the echo check; the user role's answers never stated a value),
so the checks never see a model's sentence. The adapter (``FewShotBackend``) stands in for the
llama.cpp chat backend: it reads the action (or the user's move and values) from the project's
own prompt, asks the same model to complete a short few-shot transcript ending in ``Agent:`` /
``Customer:`` (temperature 0, fixed seed, first line only) and hands the text back. Everything
after the model call (echo check, fallbacks, the user's guard, the checks, the scoring) is the
project's. The replies are the model's; the few-shot wording is this file's.
"""
from __future__ import annotations

import argparse
import atexit
import ast
import json
import re
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESPONSE_SHOTS = """Cambridge customer service. The agent tells the customer the action in one polite sentence.

Action: nooffer restaurant
Agent: I'm sorry, there is no restaurant like that. Could you change something?

Action: search hotel; ask for: area, price range
Agent: Which area and price range would you like?

Action: book restaurant; entity: pizza express; reference: 7GAW31KL
Agent: Your table at Pizza Express is booked. The reference number is 7GAW31KL.

Action: inform attraction; entity: kings college; phone: 01223356354; postcode: cb21st
Agent: You can call Kings College on 01223356354; the postcode is CB2 1ST.

Action: search train; offer: TR1234; leaveat: 09:15
Agent: Train TR1234 leaves at 09:15. Would you like me to book it?

Action: search restaurant; offer: the gardenia; area: centre; pricerange: cheap
Agent: The Gardenia is a cheap restaurant in the centre of town. Shall I book a table?

"""
USER_SHOTS = """Cambridge customer service. The customer says the move in one short sentence, with every value.

Move: opening restaurant; food: italian; area: centre
Customer: Hi, I am looking for an italian restaurant in the centre.

Move: answer hotel; area: dontcare
Customer: Any area is fine.

Move: book hotel; bookpeople: 2; bookstay: 3; bookday: friday
Customer: Please book it for 2 people for 3 nights from friday.

Move: request attraction; ask for: phone, postcode
Customer: Could you give me the phone number and postcode?

Move: opening train; departure: cambridge; destination: ely; day: monday; leaveat: 10:15
Customer: I need a train from cambridge to ely on monday, leaving after 10:15.

Move: answer hotel; stars: 4; parking: yes
Customer: It should have 4 stars and free parking.

Move: book train; bookpeople: 5
Customer: I need 5 tickets, please.

Move: bye general
Customer: That's all, thank you. Goodbye.

"""


def _line(text: str) -> str:
    return text.strip().split("\n")[0].strip()


def action_line(action: dict) -> str:
    parts = [f"{action.get('kind')} {action.get('domain') or ''}".strip()]
    if action.get("entity"):
        parts.append(f"{'offer' if action.get('kind') == 'search' else 'entity'}: {action['entity']}")
    if action.get("reference"):
        parts.append(f"reference: {action['reference']}")
    parts += [f"{k}: {v}" for k, v in (action.get("informed") or {}).items() if k != "ref"]
    if action.get("requested"):
        from convsim.agents.service.response import SLOT_WORDS
        parts.append("ask for: " + ", ".join(SLOT_WORDS.get(s, s) for s in action["requested"]))
    return "; ".join(parts)


def move_line(move: str, acts: list[dict], values: dict) -> str:
    domain = next((a["domain"] for a in acts if a.get("domain") not in (None, "general")), "")
    parts = [f"{move} {domain}".strip()]
    parts += [f"{k.split('-', 1)[1]}: {v}" for k, v in values.items() if v]
    asked = [a["slot"] for a in acts if a.get("intent") == "request" and a.get("slot")]
    if asked:
        parts.append("ask for: " + ", ".join(asked))
    return "; ".join(parts)


class FewShotBackend:
    """The chat backend's ``invoke(messages, **kwargs)``, answered by a few-shot completion."""

    def __init__(self, spec):
        from langchain_core.messages import AIMessage
        from llama_cpp import Llama

        from convsim.providers.llamacpp import gemma3_270m_path
        self.AIMessage, self.spec, self.lock = AIMessage, spec, threading.Lock()
        self.llama = Llama(model_path=str(gemma3_270m_path()), n_ctx=2048, verbose=False,
                           seed=spec.seed if spec.seed is not None else 1)
        atexit.register(self.llama.close)  # before interpreter teardown, as convsim/providers/llamacpp.py does

    def invoke(self, messages, **kwargs):
        user = next(str(m.content) for m in messages if m.type == "human")
        if "Action to express (JSON):" in user:
            action = ast.literal_eval(user.split("Action to express (JSON):", 1)[1].strip())
            prompt = RESPONSE_SHOTS + f"Action: {action_line(action)}\nAgent:"
        else:
            move = re.search(r"^Your move: (.*)$", user, re.M).group(1)
            acts = json.loads(re.search(r"^Acts: (.*)$", user, re.M).group(1))
            values = json.loads(re.search(r"^Values: (.*)$", user, re.M).group(1))
            prompt = USER_SHOTS + f"Move: {move_line(move, acts, values)}\nCustomer:"
        with self.lock:
            out = self.llama.create_completion(prompt, max_tokens=self.spec.max_tokens or 60,
                                               temperature=self.spec.temperature, stop=["\n"],
                                               seed=self.spec.seed if self.spec.seed is not None else 1)
        text = _line(out["choices"][0]["text"])
        usage = out.get("usage") or {}
        content = json.dumps({"text": text}) if "response_format" in kwargs else text
        return self.AIMessage(content, usage_metadata={"input_tokens": usage.get("prompt_tokens", 0),
                                                       "output_tokens": usage.get("completion_tokens", 0),
                                                       "total_tokens": usage.get("total_tokens", 0)})


def _patch(log: list[dict]) -> None:
    import convsim.providers.models as models
    import convsim.evaluation.service.turn_eval as turn_eval
    from convsim.contract.graphfile import load_graph_module
    cs = load_graph_module("customer_service")  # the module the engine runs (not convsim.graphs.customer_service)
    make = models._make_backend
    models._make_backend = lambda spec, timeout=120.0: (FewShotBackend(spec) if spec.provider == "llamacpp"
                                                         else make(spec, timeout))
    grounding, misstated = turn_eval.response_grounding, cs.misstated_values

    def logged_grounding(text, action, *, text_mentions=None):
        verdict = grounding(text, action, text_mentions=text_mentions)
        log.append({"check": "response_grounding", "text": text, "action": action,
                    "text_mentions": text_mentions, "verdict": verdict})
        return verdict

    def logged_misstated(text, out, db):
        found = misstated(text, out, db)
        log.append({"check": "user_misstated", "text": text, "template": out.get("text"),
                    "out": {k: out.get(k) for k in ("move", "gold_domain", "gold_state", "user_acts")},
                    "misstated": found})
        return found

    turn_eval.response_grounding, cs.misstated_values = logged_grounding, logged_misstated


def run(role: str, sessions: int, seed: int, max_tokens: int, out: Path, temperature: float = 0.0) -> None:
    import convsim
    from convsim.config import config_from_dict
    from convsim.running.store import RunStore
    log: list[dict] = []
    _patch(log)
    models = {"triage": "none", "judge": "none", "user": "none", "response": "none",
              role: {"spec": "llamacpp:gemma3-270m", "temperature": temperature, "seed": 1,
                    "max_tokens": max_tokens}}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config_from_dict({"name": f"llm_{role}", "graph": "customer_service", "sessions": sessions,
                                "seed": seed, "analysis": [], "out_dir": tmp, "concurrency": 1,
                                "params": {"mode": "simulate", "n_sessions": sessions, "max_turns": 12},
                                "models": models})
        recs = RunStore(convsim.run(cfg)).records()
    statuses = {}
    for r in recs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    out.write_text("".join(json.dumps(e, default=str) + "\n" for e in log), encoding="utf-8")
    print(f"{len(recs)} sessions {statuses}; {len(log)} checks logged to {out}")
    for r in recs:
        if r["status"] != "ok":
            print(f"  {r['session_id']} {r['status']}: {str(r.get('error') or r['simulator_flags'])[:300]}")
    scored = [r["dialogue_metrics"] for r in recs if r["status"] in ("ok", "agent_failure")]
    for m in ("task_success", "task_success_structured", "task_completion", "heuristic_response_quality",
              "response_grounding"):
        vals = [d[m] for d in scored if isinstance(d.get(m), (int, float))]
        print(f"  {m}: {sum(vals) / len(vals):.3f} (n {len(vals)})" if vals else f"  {m}: -")
    flags = [f for r in recs for f in r["simulator_flags"]]
    print("simulator flags:", {f["check"]: sum(g["check"] == f["check"] for g in flags) for f in flags})
    print("sessions with user_misstated:", sum(any(f["check"] == "user_misstated" for f in r["simulator_flags"])
                                               for r in recs))
    rescore(out)


def clean(sessions: int, seed: int) -> None:
    import convsim
    from convsim.config import config_from_dict
    from convsim.running.store import RunStore
    for surface in ("templates", "heldout"):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = config_from_dict({
                "name": "clean", "graph": "customer_service", "sessions": sessions, "seed": seed, "analysis": [],
                "out_dir": tmp, "trace": False, "models": {"triage": "none", "judge": "none", "user": "none",
                                                             "response": "none"},
                "params": {"mode": "simulate", "n_sessions": sessions, "max_turns": 20, "surface": surface,
                           "policy_request_rate": 0.2, "judge": False}})
            recs = RunStore(convsim.run(cfg)).records()
        flags = [(r["session_id"], f["detail"]) for r in recs for f in r["simulator_flags"]
                 if f["check"] == "user_misstated"]
        print(f"{surface}: {len({s for s, _ in flags})} of {len(recs)} sessions flagged user_misstated")
        for session, detail in flags:
            print(f"  {session} {detail}")


def rescore(path: Path) -> None:
    """The tree's checks on a log's text again: counts, and each turn whose verdict changed."""
    from convsim.agents.service.fidelity import misstated_values
    from convsim.catalog.service.db import load_service_db
    from convsim.evaluation.service.response_grounding import response_grounding
    db = load_service_db(Path(__file__).resolve().parents[1] / "catalog" / "data" / "service")
    acts = stated = ungrounded = turns_fired = changed = 0
    for e in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        if e["check"] == "response_grounding":
            now = response_grounding(e["text"], e["action"], text_mentions=e["text_mentions"])
            acts, stated, ungrounded = acts + now["checked"], stated + now["stated"], ungrounded + (now["ungrounded"] or 0)
            if now["stated"] != e["verdict"]["stated"]:
                changed += 1
                print(f"changed {e['verdict']['stated']}/{e['verdict']['checked']} -> "
                      f"{now['stated']}/{now['checked']}: {e['text']!r}")
        else:
            now = misstated_values(e["text"], e["out"], db)
            turns_fired += bool(now)
            if bool(now) != bool(e["misstated"]):
                changed += 1
                print(f"changed {e['misstated']} -> {now}: {e['text']!r}")
    print(f"response acts stated {stated}/{acts}, ungrounded replies {ungrounded}; user turns misstated "
          f"{turns_fired}; verdicts changed {changed}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["response", "user", "rescore", "clean"])
    ap.add_argument("path", nargs="?", help="the log to rescore")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=60)
    ap.add_argument("--temperature", type=float, default=0.0, help="sampled with the fixed seed 1")
    ap.add_argument("--out", default="llm_text.jsonl")
    a = ap.parse_args()
    if a.what == "rescore":
        rescore(Path(a.path))
    elif a.what == "clean":
        clean(a.sessions, a.seed)
    else:
        run(a.what, a.sessions, a.seed, a.max_tokens, Path(a.out), a.temperature)


if __name__ == "__main__":
    main()
