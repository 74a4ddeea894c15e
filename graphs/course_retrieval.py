"""Course retrieval judged by an LLM on a 0-3 scale, scored by NDCG@K and P@K.

One session is one test case: a retriever node ranks the catalog for the case's question
and skill, the relevance judge scores every retrieved course 0-3, and the evaluation node
computes the metrics (averageRelevance, NDCG@K, P@K, ...) plus gold-label metrics where the
case has gold labels. Cases that bring their own fixed ``retrievedCourses`` list are a
separate variant (``cases: given``): they say nothing about a retriever, so they are never
mixed into a retriever's mean. Trials are repeated iterations (the trial index is the
iteration). With model ``none`` the judge is a lexical heuristic and every judged metric is
named ``heuristic_<metric>``, so nobody reads it as an LLM judge's figure.

    START -> {given_courses | tfidf | bm25 | embedding | hybrid} -> judge -> evaluate -> END
"""
from __future__ import annotations

import operator
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from agents.courses.retrievers import get_retriever, reciprocal_rank_fusion, retrieval_query
from agents.courses.relevance_judge import JudgeCache, judge_courses
from catalog.courses import check_gold_codes, load_courses, load_test_set
from convsim import compile_with_default_context
from convsim import ConvsimError, SessionContext, emit_metrics
from evaluation.retrieval.compare import cohen_kappa
from evaluation.retrieval.metrics import PRECISION_BANDS, case_metrics, interpretation_band

RetrieverName = Literal["tfidf", "bm25", "embedding", "hybrid"]


class State(TypedDict, total=False):
    session_id: str
    case_id: str
    test_set: str
    question: str
    skill: str
    given_courses: list[dict] | None
    gold_relevance: dict[str, int] | None
    retriever: str
    expected_metrics: dict | None
    component_rankings: dict[str, list[dict]]
    retrieved: list[dict]
    judgements: list[dict]
    judge_failures: list[dict]
    judge_cached: bool  # the scores came from the judge cache (not a metric: it depends on earlier runs)
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict


class Params(BaseModel):
    """Which retriever, how deep, how to score; every field is recorded with the results."""

    retriever: RetrieverName = Field("bm25", description="the retriever for cases without retrievedCourses")
    k: int = Field(10, ge=1, le=100, description="courses retrieved per case")
    cutoffs: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [5, 10], min_length=1,
                                                       description="K values of NDCG@K, P@K, Recall@K")
    test_set: str | None = Field(None, description="test-set JSON path (default: the shipped test-set-v1)")
    catalog: str | None = Field(None, description="course catalog JSON path (default: the shipped catalog)")
    embedder: str = Field("st:minilm", description="embedder of the embedding retriever")
    hybrid_of: list[Literal["tfidf", "bm25", "embedding"]] = Field(
        default_factory=lambda: ["bm25", "tfidf"], min_length=1, description="rankings fused by the hybrid retriever")
    rrf_c: int = Field(60, ge=1, description="reciprocal-rank fusion constant")
    fusion_depth: int = Field(50, ge=1, description="depth of each ranking fed to the fusion")
    relevance_threshold: int = Field(2, ge=1, le=3, description="score >= this is relevant (spec: 2)")
    gain: Literal["linear", "exponential"] = Field("linear", description="NDCG gain (spec: linear)")
    precision_over_returned: bool = Field(
        False, description="also report the original's P@K that divides by the returned count (defect)")
    judge_cache: str = Field("auto", description="judge score cache: 'auto' (runs/.cache), 'off', or a path")
    judge_retries: int = Field(2, ge=0, le=5, description="retries of an invalid judge answer")
    max_cases: int | None = Field(None, ge=1, description="use only the first N cases")
    cases: Literal["retrieval", "given"] = Field(
        "retrieval", description="which cases: 'retrieval' (ranked by the retriever) or 'given' (the "
        "cases' fixed retrievedCourses lists, judged as they are; a variant of their own)")
    expected_tolerance: float = Field(
        0.05, ge=0, description="tolerance of a case's expectedMetrics given as a plain number")

    model_config = {"extra": "forbid"}


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)


def _params(runtime: Runtime[Context]) -> Params:
    return runtime.context.params or Params()


def _with_course_fields(ranking: list[dict], catalog: str | None) -> list[dict]:
    by_code = {c["subjectCode"]: c for c in load_courses(catalog)}
    return [{**item, "subjectName": by_code[item["subjectCode"]]["subjectName"],
             "cleanedLearningOutcomes": by_code[item["subjectCode"]].get("cleanedLearningOutcomes", [])}
            for item in ranking]


def route_case(state: State, runtime: Runtime[Context]) -> str:
    """The ``given`` variant judges each case's own retrieved list as it is."""
    return "given_courses" if _params(runtime).cases == "given" else _params(runtime).retriever


def given_courses(state: State) -> dict:
    retrieved = [{**c, "rank": i, "score": None} for i, c in enumerate(state["given_courses"], start=1)]
    return {"retriever": "given", "retrieved": retrieved}


def _search(kind: str, state: State, params: Params, depth: int) -> list[dict]:
    retriever = get_retriever(kind, params.catalog, params.embedder)
    return retriever.search(retrieval_query(state["question"], state["skill"]), depth)


def _retrieve(kind: str):
    def node(state: State, runtime: Runtime[Context]) -> dict:
        params = _params(runtime)
        ranking = _search(kind, state, params, params.k)  # a retriever that cannot run stops the run
        return {"retriever": kind, "retrieved": _with_course_fields(ranking, params.catalog)}
    node.__name__ = f"retrieve_{kind}"
    return node


def hybrid(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    depth = max(params.k, params.fusion_depth)
    rankings = {kind: _search(kind, state, params, depth) for kind in params.hybrid_of}
    fused = reciprocal_rank_fusion(list(rankings.values()), params.k, c=params.rrf_c)
    return {"retriever": "hybrid(" + "+".join(params.hybrid_of) + ")",
            "component_rankings": {k: v[:params.k] for k, v in rankings.items()},
            "retrieved": _with_course_fields(fused, params.catalog)}


def _cache(params: Params, run_dir: str | None) -> JudgeCache | None:
    if params.judge_cache == "off":
        return None
    if params.judge_cache != "auto":
        return JudgeCache.at(params.judge_cache)
    if run_dir is None:
        return None
    # Beside the runs, not inside one: a second identical run reuses the first run's scores.
    return JudgeCache.at(Path(run_dir).parent / ".cache" / "relevance_judge.sqlite")


def judge(state: State, runtime: Runtime[Context]) -> dict:
    ctx, params = runtime.context, _params(runtime)
    retrieved = state.get("retrieved") or []
    user_turn = {"turn": 1, "speaker": "user", "text": state["question"], "meta": {"skill": state["skill"]}}
    if not retrieved:
        text = "no course retrieved"
        return {"judgements": [], "judge_failures": [],
                "transcript": [user_turn, {"turn": 1, "speaker": "retriever", "text": text, "meta": {}}]}
    model = ctx.model("judge")
    result = judge_courses(question=state["question"], skill=state["skill"], courses=retrieved, model=model,
                           cache=None if model.is_none else _cache(params, ctx.run_dir),
                           iteration=ctx.trial, seed=ctx.seed, retries=params.judge_retries)
    lines = [f"{c['rank']}. {c['subjectCode']} {c['subjectName']} -> "
             f"{'failed' if s['score'] is None else s['score']}" for c, s in zip(retrieved, result.scores)]
    return {"judgements": result.scores, "judge_failures": result.failures,
            "judge_cached": any(s.get("cached") for s in result.scores),
            "transcript": [user_turn, {"turn": 1, "speaker": "retriever", "text": "\n".join(lines),
                                       "meta": {"retriever": state.get("retriever")}}]}


# Metrics computed from the judge's scores: named heuristic_<metric> when the judge is the
# lexical heuristic (model none), so no output reads them as an LLM judge's figures.
JUDGED_PREFIXES = ("averageRelevance", "highlyRelevantRate", "irrelevantRate", "ndcg@", "precision@",
                   "precisionOverReturned@")
HEURISTIC_PREFIX = "heuristic_"


def label_judged(metrics: dict, heuristic: bool) -> dict:
    """Rename the judged metrics ``heuristic_<name>`` when the heuristic judge produced them."""
    if not heuristic:
        return metrics
    return {(HEURISTIC_PREFIX + k if k.startswith(JUDGED_PREFIXES) else k): v for k, v in metrics.items()}


def expected_checks(metrics: dict, expected: dict | None, tolerance: float) -> dict:
    """Per-case regression checks against the test set's ``expectedMetrics``.

    An expectation is a number (``|actual - expected| <= tolerance``) or ``{"min": a, "max": b}``
    (either bound optional). The metric is looked up under its own name, then under its
    ``heuristic_`` name. A metric that is missing or ``None`` fails its check (it was expected).
    Returns ``expectedChecks``, ``expectedFailed`` and ``expectedFailures`` (the names), or ``{}``.
    """
    if not expected:
        return {}
    failed = []
    for name, want in sorted(expected.items()):
        got = metrics.get(name, metrics.get(HEURISTIC_PREFIX + name))
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            failed.append(name)
            continue
        if isinstance(want, dict):
            ok = (want.get("min") is None or got >= want["min"]) and (want.get("max") is None or got <= want["max"])
        else:
            ok = abs(got - want) <= tolerance
        if not ok:
            failed.append(name)
    return {"expectedChecks": len(expected), "expectedFailed": len(failed), "expectedFailures": failed}


def evaluate(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    judgements = state.get("judgements") or []
    heuristic = any(j.get("judge") == "heuristic" for j in judgements)
    metrics: dict = {"judgeFailed": bool(state.get("judge_failures"))}
    if judgements and all(j.get("score") is not None for j in judgements):
        gold = state.get("gold_relevance")
        codes = [c["subjectCode"] for c in state["retrieved"]]
        metrics.update(label_judged(case_metrics(
            [j["score"] for j in judgements],
            gold_ranked=None if gold is None else [gold.get(code, 0) for code in codes],
            gold_all=None if gold is None else list(gold.values()),
            cutoffs=params.cutoffs, threshold=params.relevance_threshold, gain=params.gain,
            precision_over_returned=params.precision_over_returned), heuristic))
    metrics.update(expected_checks(metrics, state.get("expected_metrics"), params.expected_tolerance))
    emit_metrics(runtime, turn=None, metrics={k: v for k, v in metrics.items()
                                              if isinstance(v, (int, float)) and not isinstance(v, bool)},
                 kind="dialogue")
    return {"dialogue_metrics": metrics}


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    g.add_node("given_courses", given_courses)
    for kind in ("tfidf", "bm25", "embedding"):
        g.add_node(kind, _retrieve(kind))
    g.add_node("hybrid", hybrid)
    g.add_node("judge", judge)
    g.add_node("evaluate", evaluate)
    sources = ["given_courses", "tfidf", "bm25", "embedding", "hybrid"]
    g.add_conditional_edges(START, route_case, sources)
    for node in sources:
        g.add_edge(node, "judge")
    g.add_edge("judge", "evaluate")
    g.add_edge("evaluate", END)
    return g


def _cases(params: Params):
    test_set = load_test_set(params.test_set)
    given = params.cases == "given"
    cases = [c for c in test_set.cases if bool(c.retrieved_courses) == given]
    if not cases:
        raise ConvsimError(f"no {params.cases!r} cases in the test set (cases: given needs cases with "
                           "retrievedCourses; cases: retrieval needs cases without)",
                           file=test_set.path or "test set", field="cases")
    return test_set, cases[: params.max_cases] if params.max_cases else cases


def preflight(params: Params, ctx: Context) -> None:
    """Load what a run needs before its first session: the test set, the catalog (every gold label
    must name one of its courses, or one of the case's own retrievedCourses), the retriever."""
    test_set, _ = _cases(params)
    check_gold_codes(test_set, load_courses(params.catalog), catalog=params.catalog)
    if params.cases == "retrieval":
        kinds = params.hybrid_of if params.retriever == "hybrid" else [params.retriever]
        for kind in kinds:
            get_retriever(kind, params.catalog, params.embedder)  # raises with the install hint


def sessions(params: Params, ctx: Context):
    test_set, cases = _cases(params)
    for case in cases:
        yield {"session_id": case.id, "test_set": f"{test_set.name}@v{test_set.version}", **case.as_state()}


def confusion_text(judged: list[int], gold: list[int]) -> str:
    """The judge-vs-gold confusion matrix as one readable line: rows judge 0-3, columns gold 0-3."""
    rows = [[sum(1 for a, b in zip(judged, gold) if a == j and b == g) for g in range(4)] for j in range(4)]
    return "judge\\gold 0-3: " + " | ".join(f"j{j}: " + " ".join(str(n) for n in row) for j, row in enumerate(rows))


MODEL_ROLES = ("judge",)  # the roles the nodes ask ctx.model() for


def simulator_checks(state: State) -> list[dict]:
    """A relevance judge whose answer was invalid after its retries failed, not the retriever: its
    raw answer is kept in ``judge_failures`` and the session is a simulator failure, kept out of the
    retrieval scores (a case whose courses could not all be judged cannot be scored)."""
    return [{"check": "judge_invalid", "detail": f"courses {f.get('codes')}: {f.get('error')}; "
                                                 f"raw: {str(f.get('raw'))[:200]}"}
            for f in state.get("judge_failures") or []]


def _mean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def dataset_metrics(records: list[dict]) -> dict:
    """Pooled figures, judge failures, iteration stability and the spec's interpretation bands."""
    scores = [j["score"] for r in records for j in r.get("judgements") or [] if j.get("score") is not None]
    out: dict = {
        "cases": len({r["session_id"] for r in records}),
        "judgeFailureRate": _mean([float(bool(r.get("judge_failures"))) for r in records]),
        "judgeKind": ",".join(sorted({j.get("judge", "") for r in records for j in r.get("judgements") or []})),
        "pooledHighlyRelevantRate": 100.0 * scores.count(3) / len(scores) if scores else None,
        "pooledIrrelevantRate": 100.0 * scores.count(0) / len(scores) if scores else None,
    }
    for label in (0, 1, 2, 3):
        out[f"pooledScoreCount.{label}"] = scores.count(label)
    metrics = [r.get("dialogue_metrics") or {} for r in records]
    pre = HEURISTIC_PREFIX if "heuristic" in out["judgeKind"] else ""
    ndcg10 = _mean([m.get(pre + "ndcg@10") for m in metrics])
    p10 = _mean([m.get(pre + "precision@10") for m in metrics])
    out[f"{pre}ndcg@10Band"] = " / ".join(interpretation_band(ndcg10) or ("n/a",))
    out[f"{pre}precision@10Band"] = " / ".join(interpretation_band(p10, PRECISION_BANDS) or ("n/a",))
    out["ndcgUndefinedCases"] = sum(1 for m in metrics if pre + "ndcg@10" in m and m[pre + "ndcg@10"] is None)
    checked = [m for m in metrics if m.get("expectedChecks")]
    if checked:
        out["expectedCasesChecked"] = len(checked)
        out["expectedCasesPassed"] = sum(1 for m in checked if not m.get("expectedFailed"))
    # How well does the judge (heuristic or model) agree with the gold labels it could see?
    pairs = [(j["score"], r["gold_relevance"][j["code"]]) for r in records for j in r.get("judgements") or []
             if j.get("score") is not None and j["code"] in (r.get("gold_relevance") or {})]
    if pairs:
        judged, gold = [p[0] for p in pairs], [p[1] for p in pairs]
        out["judgeGoldPairs"] = len(pairs)
        out["judgeGoldKappa"] = cohen_kappa(judged, gold)
        out["judgeGoldKappaQuadratic"] = cohen_kappa(judged, gold, weights="quadratic")
        out["judgeGoldRelevantAgreement"] = sum((a >= 2) == (b >= 2) for a, b in pairs) / len(pairs)
        out["judgeGoldConfusion"] = confusion_text(judged, gold)
    # Repeated iterations (trials): how stable are the judge's labels and the case NDCG?
    # per case, each iteration's NDCG and labels only (never the records: they may be many)
    by_case: dict[str, list[tuple]] = {}
    for r in records:
        by_case.setdefault(r["session_id"], []).append(
            ((r.get("dialogue_metrics") or {}).get("ndcg@10"),
             [(j["code"], j.get("score")) for j in r.get("judgements") or []]))
    if any(len(rs) > 1 for rs in by_case.values()):
        stds, same, total = [], 0, 0
        for rs in by_case.values():
            values = [ndcg for ndcg, _ in rs if ndcg is not None]
            if len(values) > 1:
                stds.append(statistics.pstdev(values))
            labels: dict[str, set] = {}
            for _, judged in rs:
                for code, score in judged:
                    labels.setdefault(code, set()).add(score)
            same += sum(1 for s in labels.values() if len(s) == 1)
            total += len(labels)
        out["iterations"] = max(len(rs) for rs in by_case.values())
        out["ndcg@10StdAcrossIterations"] = _mean(stds)
        out["labelStabilityAcrossIterations"] = same / total if total else None
    return out


graph = compile_with_default_context(build(Params()))

# Headline metrics, shown first in the summary table (convsim.cli.print_summary).
SUMMARY_METRICS = ["ndcg@10", "precision@10", "heuristic_ndcg@10", "heuristic_precision@10", "ndcgGold@10",
                   "recall@10", "mrr", "averageRelevance", "heuristic_averageRelevance", "judgeFailed",
                   "expectedFailed"]
