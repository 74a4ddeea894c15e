"""A course retriever as a plain Python callable (openevals' ``app`` convention).

Evaluate it in convsim's course-retrieval scenario (the test set's questions, judged relevance)::

    convsim run course_retrieval --agent retriever=examples/callable_retriever.py:app

convsim calls ``app(inputs)`` with ``inputs = {"messages": [{"role": "user", "content": ...}],
"context": {"case_id", "skill", "k"}, "tools": [search_courses, get_course]}`` (LangChain tools
over the catalog). It may return a string, an ``AIMessage``, or a dict with ``content`` and
``structured``; here ``structured["ranking"]`` is the ranked list of course codes (without it,
convsim reads the codes the reply names, in order). An ``async def app`` works the same way.

This one asks for the skill and for the question's own words, and merges the two rankings
(reciprocal-rank fusion, c = 60).
"""
from __future__ import annotations


def app(inputs: dict) -> dict:
    tools = {t.name: t for t in inputs.get("tools", [])}
    k = int(inputs["context"].get("k", 10))
    question = inputs["messages"][-1]["content"].split("\n")[0]
    rankings = [tools["search_courses"].invoke({"query": q, "k": 2 * k})["results"]
                for q in (inputs["context"]["skill"], question)]
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            fused[hit["code"]] = fused.get(hit["code"], 0.0) + 1.0 / (60 + rank)
    codes = sorted(fused, key=lambda c: (-fused[c], c))[:k]
    return {"content": "Courses for you: " + ", ".join(codes), "structured": {"ranking": codes}}
