"""The course-retrieval world as LangChain tools: search courses (BM25) and read one course.

``CourseTools(courses)``: ``search_courses(query, k)`` — the top-k courses by Okapi BM25 over
name, description and learning outcomes (``convsim.agents.courses.retrievers.BM25Retriever``),
each ``{"code", "name", "score"}``; ``get_course(code)`` — one course's name, faculty, level,
description and outcomes. Calls and results go to ``calls``. The gold relevance labels of the
test set are never reachable from here.
"""
from __future__ import annotations

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from convsim.agents.courses.retrievers import BM25Retriever
from convsim.agents.toollog import ToolLog


class SearchArgs(BaseModel):
    query: str = Field(description="what the learner wants to learn, in words")
    k: int = Field(10, ge=1, le=50, description="how many courses")


class GetArgs(BaseModel):
    code: str = Field(description="a course's subject code")


TOOL_NAMES = ("search_courses", "get_course")  # CourseTools.tools(), in order (the slot declares them)


class CourseTools(ToolLog):
    def __init__(self, courses: list[dict], retriever: BM25Retriever | None = None) -> None:
        super().__init__()
        self.by_code = {c["subjectCode"]: c for c in courses}
        self.retriever = retriever or BM25Retriever(courses)

    def search_courses(self, query: str, k: int = 10) -> dict:
        hits = self.retriever.search(query, k)
        result = {"ok": True, "results": [{"code": h["subjectCode"], "name": self.by_code[h["subjectCode"]]["subjectName"],
                                           "score": round(float(h["score"]), 4)} for h in hits]}
        return self.record("search_courses", {"query": query, "k": k}, result)

    def get_course(self, code: str) -> dict:
        c = self.by_code.get(str(code).strip())
        result = {"ok": False, "reason": "not_found"} if c is None else {"ok": True, "course": {
            "code": c["subjectCode"], "name": c["subjectName"], "faculty": c.get("faculty"), "level": c.get("level"),
            "description": c.get("description"), "outcomes": list(c.get("cleanedLearningOutcomes", []))}}
        return self.record("get_course", {"code": code}, result)

    def tools(self) -> list[StructuredTool]:
        def search_courses(query: str, k: int = 10) -> dict:
            return self.search_courses(query, k)

        def get_course(code: str) -> dict:
            return self.get_course(code)

        return [StructuredTool.from_function(search_courses, name="search_courses", args_schema=SearchArgs,
                                             description="Search the course catalog (BM25); returns codes and names."),
                StructuredTool.from_function(get_course, name="get_course", args_schema=GetArgs,
                                             description="Read one course: description and learning outcomes.")]
