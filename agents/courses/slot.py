"""The course-retrieval agent slot: the researcher's own retriever in place of the built-in ones.

``SLOT`` (role ``retriever``): the agent is handed one ``HumanMessage`` (the learner's question and
the skill wanted), the context ``{"case_id", "skill", "k"}`` and the tools of
``convsim.agents.courses.tools`` (``search_courses``, ``get_course``); it returns a ranking of
course codes: reported as ``structured["ranking"]`` (a list of codes, best first), or else read
from the reply text (the catalog's codes in the order the reply names them). Codes not in the
catalog and repeats are dropped (and counted); the first ``k`` are judged. The case's gold labels
are never handed to it. The graph's ``retrieve_agent`` node is ``agent_update``; ``spec_text(ctx)``
says whether a non-builtin spec fills the slot (``Params.agents["retriever"]`` or the context's
``agents``).
"""
from __future__ import annotations

import re

from langchain_core.messages import HumanMessage

from convsim.agents.courses.retrievers import get_retriever
from convsim.agents.courses.tools import TOOL_NAMES, CourseTools
from convsim.catalog.courses import load_courses
from convsim.slots import Slot
from convsim.slots.nodes import cached_agent, tool_errors, user_spec

ROLE = "retriever"
NODE = "retrieve_agent"
SLOT = Slot(role=ROLE, handed="the learner's question and skill (one HumanMessage), context {case_id, skill, k} "
                              "and the tools search_courses, get_course",
            returns="ranking", structured=("ranking",),
            builtins=("tfidf", "bm25", "embedding", "hybrid", "oracle", "random", "top1", "top1_then_junk", "empty"),
            tools=TOOL_NAMES)


def spec_text(ctx) -> str | None:
    """The spec filling the slot when it is not a built-in (None: the built-in runs)."""
    return user_spec(ctx, SLOT)



def agent_for(text: str):
    return cached_agent(text, SLOT)  # made once per process and spec (convsim.slots.nodes)


def ranking_of(answer_text: str, structured: dict, codes: list[str]) -> tuple[list[str], int]:
    """``(codes in the catalog, best first, no repeats; how many named codes were dropped)``."""
    known = set(codes)
    named = structured.get("ranking")
    if isinstance(named, list):
        named = [str(c.get("subjectCode", c.get("code")) if isinstance(c, dict) else c) for c in named]
    else:  # read from the reply: the catalog's codes in the order the text names them
        pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(c) for c in sorted(known, key=len, reverse=True))
                             + r")(?![\w])")
        named = [m.group(0) for m in pattern.finditer(answer_text)] if known else []
    out, dropped = [], 0
    for code in named:
        if code in known and code not in out:
            out.append(code)
        else:
            dropped += 1
    return out, dropped


def agent_update(state: dict, *, text_spec: str, k: int, catalog: str | None) -> dict:
    courses = load_courses(catalog)
    tools = CourseTools(courses, retriever=get_retriever("bm25", catalog))
    question = f"{state['question']}\n(skill wanted: {state['skill']}; rank up to {k} courses by their codes)"
    answer = agent_for(text_spec).invoke([HumanMessage(question)], session_id=state["session_id"],
                                         context={"case_id": state["case_id"], "skill": state["skill"], "k": k},
                                         tools=tools.tools())
    codes, dropped = ranking_of(answer.text, dict(answer.structured or {}), [c["subjectCode"] for c in courses])
    retrieved = [{"subjectCode": c, "rank": i, "score": None} for i, c in enumerate(codes[:k], start=1)]
    meta = {"agent_spec": text_spec, "tool_calls": tools.calls, "structured": dict(answer.structured or {}),
            "agent_text": answer.text, "ranking_source": "structured" if "ranking" in (answer.structured or {})
            else "reply text", "codes_dropped": dropped}
    if rejected := tool_errors(answer):  # calls the tools never ran (an unknown tool, bad arguments)
        meta["tool_errors"] = rejected
    return {"retriever": f"agent({text_spec})", "retrieved": retrieved, "agent_meta": meta}
