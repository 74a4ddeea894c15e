"""Course retrieval judged by an LLM on a 0-3 scale, scored by NDCG@K and P@K.

One session is one test case: a retriever node ranks the catalog for the case's question
and skill, the relevance judge scores every retrieved course 0-3, and the evaluation node
computes the metrics (averageRelevance, NDCG@K, P@K, ...) plus gold-label metrics where the
case has gold labels. A retriever that returns nothing is scored (0 at every cut-off), not
dropped, and counted (``retrievalEmpty``). The headline NDCG is one that can fail:
``ndcgGold@K`` (gold labels, ideal from all of them) and ``ndcgFixedIdeal@K`` (judge scores,
ideal = K courses scored 3); the spec's NDCG is kept as ``ndcgProxy@K``: its ideal is the
retrieved list's own scores, so it cannot see relevant courses that were not retrieved. Cases that bring their own fixed ``retrievedCourses`` list are a
separate variant (``cases: given``): they say nothing about a retriever, so they are never
mixed into a retriever's mean. Trials are repeated iterations (the trial index is the
iteration). With model ``none`` the judge is a lexical heuristic and every judged metric is
named ``heuristic_<metric>``, so nobody reads it as an LLM judge's figure.

    START -> {given_courses | tfidf | bm25 | embedding | hybrid
              | oracle | random | top1 | top1_then_junk | empty} -> judge -> evaluate -> END

The last five are reference retrievers (agents/courses/reference.py) that show the scale of the
metrics; ``oracle`` reads the gold labels and is a ceiling, never a system under test.
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

from convsim.agents.courses import reference
from convsim.agents.courses import slot as retriever_slot
from convsim.agents.courses.retrievers import get_retriever, reciprocal_rank_fusion, retrieval_query
from convsim.agents.courses.relevance_judge import DEFAULT_HEURISTIC, JudgeCache, judge_courses
from convsim.catalog.courses import check_gold_codes, load_courses, load_test_set
from convsim import compile_with_default_context
from convsim import ConvsimError, SessionContext, emit_metrics
from convsim.evaluation.retrieval.catalog_check import checked_against_catalog, relabelled_list
from convsim.evaluation.retrieval.compare import cohen_kappa
from convsim.evaluation.retrieval.metrics import PRECISION_BANDS, case_metrics, interpretation_band

RetrieverName = Literal["tfidf", "bm25", "embedding", "hybrid",
                        "oracle", "random", "top1", "top1_then_junk", "empty"]
BASE_RETRIEVERS = ("tfidf", "bm25", "embedding")
REFERENCE_RETRIEVERS = reference.REFERENCES


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
    judge_kind: str  # "heuristic" (model none) or "llm", also when nothing was retrieved
    judge_cached: bool  # the scores came from the judge cache (not a metric: it depends on earlier runs)
    catalog_check: dict | None  # a fixed list checked against the catalog (evaluation/retrieval/catalog_check.py)
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    agent_meta: dict  # an agent in the retriever slot: its spec, tool calls, structured outputs


class Params(BaseModel):
    """Which retriever, how deep, how to score; every field is recorded with the results."""

    retriever: RetrieverName = Field(
        "bm25", description="the retriever for cases without retrievedCourses; oracle, random, top1, top1_then_junk "
        "and empty are reference retrievers (oracle reads the gold labels: a ceiling, never a system under test)")
    reference_base: Literal["tfidf", "bm25"] = Field(
        "bm25", description="the retriever the oracle breaks ties with and top1 / top1_then_junk take their first course from")
    random_seed: int = Field(0, description="seed of the random reference retriever (with the case id)")
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
    heuristic_judge: Literal["heuristic-tfidf-2", "heuristic-lexical-1"] = Field(
        DEFAULT_HEURISTIC, description="the heuristic judge used with model none (its name is the promptVersion "
        "stored with every score): heuristic-tfidf-2 (default) or the older heuristic-lexical-1")
    max_cases: int | None = Field(None, ge=1, description="use only the first N cases")
    cases: Literal["retrieval", "given"] = Field(
        "retrieval", description="which cases: 'retrieval' (ranked by the retriever) or 'given' (the "
        "cases' fixed retrievedCourses lists, judged as they are; a variant of their own)")
    agents: dict[str, str] = Field(default_factory=dict, description="agent slots: {'retriever': SPEC} ranks with "
                                   "your agent instead of a built-in retriever (docs/agents.md)")
    given_list: Literal["case", "relabelled"] = Field(
        "case", description="cases: given submits the case's own retrievedCourses ('case') or, the gaming reference, "
        "its gold-0 courses relabelled with the skill name ('relabelled'; evaluation/retrieval/catalog_check.py)")
    expected_tolerance: float = Field(
        0.05, ge=0, description="tolerance of a case's expectedMetrics given as a plain number")

    model_config = {"extra": "forbid"}


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)


def _params(runtime: Runtime[Context]) -> Params:
    return runtime.context.params or Params()


def _with_course_fields(ranking: list[dict], catalog: str | None, fields: tuple[str, ...] = ()) -> list[dict]:
    """The ranking with each course's name and outcomes (what a record keeps), plus ``fields`` if asked."""
    by_code = {c["subjectCode"]: c for c in load_courses(catalog)}
    return [{**item, "subjectName": by_code[item["subjectCode"]]["subjectName"],
             "cleanedLearningOutcomes": by_code[item["subjectCode"]].get("cleanedLearningOutcomes", []),
             **{f: by_code[item["subjectCode"]][f] for f in fields if f in by_code[item["subjectCode"]]}}
            for item in ranking]


def route_case(state: State, runtime: Runtime[Context]) -> str:
    """The ``given`` variant judges each case's own retrieved list as it is."""
    if _params(runtime).cases == "given":
        return "given_courses"
    return retriever_slot.NODE if retriever_slot.spec_text(runtime.context) else _params(runtime).retriever


def retrieve_agent(state: State, runtime: Runtime[Context]) -> dict:
    """The agent filling the ``retriever`` slot ranks the courses (agents/courses/slot.py)."""
    params = _params(runtime)
    out = retriever_slot.agent_update(state, text_spec=retriever_slot.spec_text(runtime.context), k=params.k,
                                      catalog=params.catalog)
    return {**out, "retrieved": _with_course_fields(out["retrieved"], params.catalog)}


def given_courses(state: State, runtime: Runtime[Context]) -> dict:
    given = state["given_courses"]
    if _params(runtime).given_list == "relabelled":   # the gaming reference (evaluation/retrieval/catalog_check.py)
        given = relabelled_list(state.get("gold_relevance"), load_courses(_params(runtime).catalog),
                                skill=state["skill"], question=state["question"], k=len(given))
    retrieved = [{**c, "rank": i, "score": None} for i, c in enumerate(given, start=1)]
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


def _catalog_codes(params: Params) -> list[str]:
    return [c["subjectCode"] for c in load_courses(params.catalog)]


def oracle(state: State, runtime: Runtime[Context]) -> dict:
    """The oracle reference: the catalog ranked by the case's gold labels (the only node that reads
    them), ties by the base retriever's rank. A ceiling for the gold metrics, never a system."""
    params = _params(runtime)
    codes = _catalog_codes(params)
    base = _search(params.reference_base, state, params, len(codes))
    ranking = reference.oracle_ranking(state.get("gold_relevance"), base, codes, params.k)
    return {"retriever": f"oracle(gold labels, ties by {params.reference_base}; a ceiling, not a system)",
            "retrieved": _with_course_fields(ranking, params.catalog)}


def random_courses(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    ranking = reference.random_ranking(_catalog_codes(params), params.k, seed=params.random_seed,
                                       case_id=state["case_id"])
    return {"retriever": "random(reference)", "retrieved": _with_course_fields(ranking, params.catalog)}


def top1(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    ranking = reference.top1_ranking(_search(params.reference_base, state, params, 1))
    return {"retriever": f"top1({params.reference_base}; gaming reference)",
            "retrieved": _with_course_fields(ranking, params.catalog)}


def top1_then_junk(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    ranking = reference.top1_then_junk_ranking(_search(params.reference_base, state, params, 1),
                                               _catalog_codes(params), params.k)
    return {"retriever": f"top1_then_junk({params.reference_base}; gaming reference)",
            "retrieved": _with_course_fields(ranking, params.catalog)}


def empty(state: State) -> dict:
    return {"retriever": "empty(gaming reference)", "retrieved": reference.empty_ranking()}


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
    model = ctx.model("judge")
    judge_kind = "heuristic" if model.is_none else "llm"
    if not retrieved:  # nothing to judge: scored 0 at every cut-off by evaluate, not dropped
        text = "no course retrieved"
        return {"judgements": [], "judge_failures": [], "judge_kind": judge_kind,
                "transcript": [user_turn, {"turn": 1, "speaker": "retriever", "text": text,
                                           "meta": {"retriever": state.get("retriever"),
                                                    **(state.get("agent_meta") or {})}}]}
    # The judge also reads a catalog course's description (records keep only name and outcomes, to
    # stay small); a case's own fixed list is judged as it is.
    # a fixed list is judged on the catalog's text of each code (the mismatches are counted and shown)
    check = None
    if params.cases == "given":
        shown, check = checked_against_catalog(retrieved, load_courses(params.catalog))
    else:
        shown = _with_course_fields(retrieved, params.catalog, ("description",))
    result = judge_courses(question=state["question"], skill=state["skill"], courses=shown, model=model,
                           cache=None if model.is_none else _cache(params, ctx.run_dir),
                           iteration=ctx.trial, seed=ctx.seed, retries=params.judge_retries,
                           heuristic=params.heuristic_judge, catalog=params.catalog)
    lines = [f"{c['rank']}. {c['subjectCode']} {c['subjectName']} -> "
             f"{'failed' if s['score'] is None else s['score']}" for c, s in zip(retrieved, result.scores)]
    if check and (check["mismatches"] or check["not_in_catalog"]):
        lines += [f"catalog mismatch: {m['code']} (rank {m['rank']}) {', '.join(m['fields'])} differ from the "
                  f"catalog; judged on the catalog's text" for m in check["mismatches"]]
        lines += [f"not in the catalog: {c} (judged as submitted)" for c in check["not_in_catalog"]]
    return {"judgements": result.scores, "judge_failures": result.failures, "judge_kind": judge_kind,
            "judge_cached": any(s.get("cached") for s in result.scores), "catalog_check": check,
            "transcript": [user_turn, {"turn": 1, "speaker": "retriever", "text": "\n".join(lines),
                                       "meta": {"retriever": state.get("retriever"),
                                                    **(state.get("agent_meta") or {})}}]}


# Metrics computed from the judge's scores: named heuristic_<metric> when the judge is the
# lexical heuristic (model none), so no output reads them as an LLM judge's figures.
JUDGED_PREFIXES = ("averageRelevance", "highlyRelevantRate", "irrelevantRate", "ndcgProxy@", "ndcgFixedIdeal@",
                   "precision@", "precisionOverReturned@")
# The spec's NDCG, renamed: its ideal is the retrieved list's own scores, so the name says so wherever
# the number goes. An expectedMetrics entry under the old name ndcg@K checks ndcgProxy@K.
PROXY_LABEL = "proxy (cannot see missing relevant courses): ideal from the retrieved list's own scores; no band"
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
    ``heuristic_`` name (``ndcg@K``, the spec's name, checks ``ndcgProxy@K``). A metric that is missing or ``None`` fails its check (it was expected).
    Returns ``expectedChecks``, ``expectedFailed`` and ``expectedFailures`` (the names), or ``{}``.
    """
    if not expected:
        return {}
    failed = []
    for name, want in sorted(expected.items()):
        got = metrics.get(name, metrics.get(HEURISTIC_PREFIX + name))
        if got is None and name.startswith("ndcg@"):
            legacy = "ndcgProxy@" + name[len("ndcg@"):]
            got = metrics.get(legacy, metrics.get(HEURISTIC_PREFIX + legacy))
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


def gold_of_ranked(codes: list[str], gold: dict) -> list:
    """The gold label of each retrieved course in rank order, 0 for a course listed again: a
    duplicate gains nothing (before, listing a relevant course twice took ndcgGold@K and recall@K
    past 1)."""
    seen: set[str] = set()
    out = []
    for code in codes:
        out.append(0 if code in seen else gold.get(code, 0))
        seen.add(code)
    return out


def evaluate(state: State, runtime: Runtime[Context]) -> dict:
    params = _params(runtime)
    judgements = state.get("judgements") or []
    retrieved = state.get("retrieved") or []
    heuristic = state.get("judge_kind") == "heuristic" or any(j.get("judge") == "heuristic" for j in judgements)
    metrics: dict = {"judgeFailed": bool(state.get("judge_failures"))}
    check = state.get("catalog_check")
    if check:   # a fixed list: how many submitted courses did not match their catalog entry
        metrics.update(catalogMismatches=len(check["mismatches"]), catalogUnknownCodes=len(check["not_in_catalog"]),
                       catalogMismatchRate=len(check["mismatches"]) / check["checked"] if check["checked"] else None)
    # Every retrieved course judged (an empty list is fully judged: it is scored, 0 at every
    # cut-off, not dropped; a case whose judge failed is left out, see simulator_checks).
    if len(judgements) == len(retrieved) and all(j.get("score") is not None for j in judgements):
        gold = state.get("gold_relevance")
        codes = [c["subjectCode"] for c in retrieved]
        metrics.update(label_judged(case_metrics(
            [j["score"] for j in judgements],
            gold_ranked=None if gold is None else gold_of_ranked(codes, gold),
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
    for kind in BASE_RETRIEVERS:
        g.add_node(kind, _retrieve(kind))
    g.add_node("hybrid", hybrid)
    g.add_node("oracle", oracle)
    g.add_node("random", random_courses)
    g.add_node("top1", top1)
    g.add_node("top1_then_junk", top1_then_junk)
    g.add_node("empty", empty)
    g.add_node(retriever_slot.NODE, retrieve_agent)
    g.add_node("judge", judge)
    g.add_node("evaluate", evaluate)
    sources = ["given_courses", *BASE_RETRIEVERS, "hybrid", *REFERENCE_RETRIEVERS, retriever_slot.NODE]
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
        kinds = (params.hybrid_of if params.retriever == "hybrid" else
                 [params.reference_base] if params.retriever in REFERENCE_RETRIEVERS else [params.retriever])
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
# The agent slot (convsim.slots): the retriever under test, a built-in retriever by default.
SLOTS = {retriever_slot.ROLE: retriever_slot.SLOT}


def agent_checks(state: State) -> list[dict]:
    """A ranking that lists a course twice failed (a retriever bug or a remote system's garbage: a
    repeated relevant course would count twice at every cut-off): the session is an agent failure,
    scored as the metrics define, never a silent ``ok``. The retrievers here call no model."""
    codes = [c.get("subjectCode") for c in state.get("retrieved") or []]
    repeated = sorted({c for c in codes if codes.count(c) > 1}, key=str)
    return [{"check": "ranking_repeats_course", "detail": f"{c} listed {codes.count(c)} times"} for c in repeated]


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


def _proxy10(m: dict) -> float | None:
    """A case's proxy NDCG@10, under any of its names (records written before the rename: ``ndcg@10``)."""
    for name in ("ndcgProxy@10", HEURISTIC_PREFIX + "ndcgProxy@10", "ndcg@10", HEURISTIC_PREFIX + "ndcg@10"):
        if m.get(name) is not None:
            return m[name]
    return None


def dataset_metrics(records: list[dict]) -> dict:
    """Pooled figures, judge failures, empty retrievals, iteration stability and the interpretation
    bands of the metrics that can fail (gold NDCG, fixed-ideal NDCG, P@10; never the proxy NDCG)."""
    scores = [j["score"] for r in records for j in r.get("judgements") or [] if j.get("score") is not None]
    kinds = {j.get("judge", "") for r in records for j in r.get("judgements") or []}
    kinds |= {r["judge_kind"] for r in records if r.get("judge_kind")}
    out: dict = {
        "cases": len({r["session_id"] for r in records}),
        "retriever": ",".join(sorted({str(r.get("retriever")) for r in records if r.get("retriever")})),
        # abstention is visible: the share of scored cases with an empty list is the mean of retrievalEmpty
        "retrievalEmptyCases": sum(1 for r in records if (r.get("dialogue_metrics") or {}).get("retrievalEmpty")),
        "judgeFailureRate": _mean([float(bool(r.get("judge_failures"))) for r in records]),
        "judgeKind": ",".join(sorted(kinds)),
        # which heuristic or prompt scored (heuristic-tfidf-2, heuristic-lexical-1, a prompt hash): two
        # versions here mean the figures below mix judges
        "judgeVersion": ",".join(sorted({str(j["promptVersion"]) for r in records for j in r.get("judgements") or []
                                         if j.get("promptVersion")})),
        "pooledHighlyRelevantRate": 100.0 * scores.count(3) / len(scores) if scores else None,
        "pooledIrrelevantRate": 100.0 * scores.count(0) / len(scores) if scores else None,
    }
    for label in (0, 1, 2, 3):
        out[f"pooledScoreCount.{label}"] = scores.count(label)
    metrics = [r.get("dialogue_metrics") or {} for r in records]
    pre = HEURISTIC_PREFIX if "heuristic" in out["judgeKind"] else ""
    # The NDCG band goes to an NDCG that can fail: the gold NDCG over the cases with gold labels;
    # over the cases without, the fixed-ideal NDCG (judge scores, ideal = 10 courses scored 3, a
    # lower bound: "Poor" there can mean the catalog has fewer than 10 courses worth a 3).
    # The proxy NDCG gets no band: a list of one good course scores 1.0 on it.
    scored = [m for m in metrics if "totalCourses" in m]
    with_gold = [m for m in scored if "ndcgGold@10" in m]
    if with_gold:
        out["ndcgGold@10Band"] = " / ".join(interpretation_band(_mean([m["ndcgGold@10"] for m in with_gold]))
                                            or ("n/a",))
    if len(with_gold) < len(scored):
        fixed10 = _mean([m.get(pre + "ndcgFixedIdeal@10") for m in scored if "ndcgGold@10" not in m])
        out[f"{pre}ndcgFixedIdeal@10Band"] = " / ".join(interpretation_band(fixed10) or ("n/a",))
    p10 = _mean([m.get(pre + "precision@10") for m in metrics])
    out[f"{pre}precision@10Band"] = " / ".join(interpretation_band(p10, PRECISION_BANDS) or ("n/a",))
    out[f"{pre}ndcgProxy@10Note"] = PROXY_LABEL
    out["ndcgUndefinedCases"] = sum(1 for m in metrics
                                    if pre + "ndcgProxy@10" in m and m[pre + "ndcgProxy@10"] is None)
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
            (_proxy10(r.get("dialogue_metrics") or {}),
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

# Headline metrics, shown first in the summary table (convsim.cli.print_summary) and the report's
# headline table: metrics that can fail. The gold ones first; the judged ones under either name
# (heuristic_ with model none). The proxy NDCG (ndcgProxy@K) is not a headline: it cannot see
# relevant courses that were not retrieved (a list of one good course scores 1.0).
# The range of each per-case metric whose bounds follow from its definition (docs/metrics.md §5), with
# or without the heuristic judge's "heuristic_" prefix ("*" matches any characters): the proxy and
# fixed-ideal NDCG, precision at K and MRR in [0, 1], relevance on the judge's 0-3 scale, the rates in
# percent. ndcgGold@K and recall@K too: a course listed twice gains only at its first rank (evaluate),
# so neither can pass 1; expectedFailed counts failed checks.
# A mean's 95% CI is clipped to it (ci_clipped) and a value outside it is a warning (docs/ENGINE_API.md).
METRIC_RANGES = {
    **{m: (0.0, 1.0) for m in ("*ndcgProxy@*", "*ndcgFixedIdeal@*", "*precision@*", "*precisionGold@*",
                               "*precisionOverReturned@*", "mrr", "retrievalEmpty", "judgeFailed",
                               "ndcgGold@*", "recall@*")},
    "*averageRelevance": (0.0, 3.0),
    "*highlyRelevantRate": (0.0, 100.0),
    "*irrelevantRate": (0.0, 100.0),
    "totalCourses": (0.0, None),
    "expectedFailed": (0.0, None),
}

# What each headline metric means, in one line, and which way is better (report.html's answer
# sentences and headline table, `convsim compare`). "*": any characters, as in METRIC_RANGES.
METRIC_DESCRIPTIONS = {
    "ndcgGold@10": "ranking quality of the top 10 against the gold labels (1 = the ideal order of all gold-relevant courses)",
    "ndcgGold@*": "ranking quality of the top K against the gold labels (1 = the ideal order)",
    "recall@10": "share of the case's gold-relevant courses found in the top 10",
    "recall@*": "share of the case's gold-relevant courses found in the top K",
    "mrr": "1 / the rank of the first gold-relevant course (0 when none is retrieved)",
    "precisionGold@10": "share of the top 10 slots holding a gold-relevant course",
    "precisionGold@*": "share of the top K slots holding a gold-relevant course",
    "*ndcgFixedIdeal@10": "judged ranking quality of the top 10 against an ideal of 10 courses scored 3",
    "*ndcgFixedIdeal@*": "judged ranking quality of the top K against an ideal of K courses scored 3",
    "*precision@10": "share of the top 10 slots holding a course the judge scores relevant (>= 2)",
    "*precision@*": "share of the top K slots holding a course the judge scores relevant (>= 2)",
    "retrievalEmpty": "share of cases where the retriever returned nothing",
    "*averageRelevance": "mean judge score (0-3) of the retrieved courses",
    "judgeFailed": "share of cases the judge could not score (unreadable answers)",
    "expectedFailed": "regression checks (expectedMetrics of the test set) the case failed",
}
METRIC_DIRECTIONS = {
    **{m: "higher" for m in ("ndcgGold@*", "recall@*", "mrr", "precisionGold@*", "*ndcgFixedIdeal@*",
                             "*precision@*", "*averageRelevance", "*ndcgProxy@*", "*highlyRelevantRate")},
    **{m: "lower" for m in ("retrievalEmpty", "judgeFailed", "expectedFailed", "*irrelevantRate")},
}
SUMMARY_METRICS = ["ndcgGold@10", "recall@10", "mrr", "precisionGold@10",
                   "ndcgFixedIdeal@10", "heuristic_ndcgFixedIdeal@10", "precision@10", "heuristic_precision@10",
                   "retrievalEmpty", "averageRelevance", "heuristic_averageRelevance", "judgeFailed",
                   "expectedFailed"]
