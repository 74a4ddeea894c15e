"""Movie recommender under controlled preference shifts, scored turn by turn with TAS (docs/crs_shift.md).

Topology: START -> user -> crs -> evaluate_turn -> (user ... until n_turns) -> [dialogue-stage
nodes] -> evaluate_dialogue -> END.

- ``user``: the rule-based simulator (agents/crs/user.py) decides the turn; with a "user" model the
  model writes it from the user's goal and reaction (agents/crs/user_goal.py; or paraphrases the rule
  turn, ``user_llm: paraphrase``); writes ``user_meta`` (focus, constraints, shift event) on its
  transcript entry. A satisfied user may end the session (``end_when_satisfied_prob``).
- ``crs``: the catalog-grounded recommender (agents/crs/recommender.py), templates with model
  ``none`` or the "crs" model with prompts/crs_respond.txt.
- ``evaluate_turn``: grounded CC, CR, copy penalty and TAS of the turn (evaluation/crs/tas.py),
  appended to ``turn_metrics`` and streamed with ``emit_metrics``.
- ``evaluate_dialogue``: runs ``DIALOGUE_CONTRIBUTORS`` (dialogue TAS ``tas_grounded``, segment
  scores, shift recovery, concept accounting) into ``dialogue_metrics`` / ``dialogue_details``.

To extend: append a node ``(name, fn)`` to ``DIALOGUE_STAGE_NODES`` (run after the last turn,
before evaluate_dialogue, e.g. a judge) and a contributor to ``DIALOGUE_CONTRIBUTORS``.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, model_validator

from convsim.agents.crs.recommender import CRSParams, crs_turn, new_crs_state, off_catalog_titles
from convsim.agents.crs.slot import CRS_SLOT, slot_crs_update
from convsim.slots.nodes import builtin_name, is_builtin
from convsim.agents.crs.user import UserSimParams, paraphrase, profile_genres, user_turn
from convsim.agents.crs.user_goal import goal_turn
from convsim.catalog.movies.concepts import ConceptExtractor
from convsim.catalog.movies.catalog import MovieCatalog, load_movie_catalog
from convsim.agents.crs.pepper_judge import judge_conversation, labelled_judge_metrics
from convsim import compile_with_default_context
from convsim import SessionContext, emit_metrics
from convsim.running.prefix import scripted_pair
from convsim.evaluation.crs.nodes import (
    DIALOGUE_CONTRIBUTORS, TASSettings, dialogue_evaluation, pooled_dataset_metrics,
    scored_entry, scored_transcript, turn_evaluation,
)
from convsim.evaluation.crs.tas_cas_eval import merge_dialogue_metrics, tas_cas_metrics
from convsim.evaluation.crs.adaptation import adaptation_metrics
from convsim.evaluation.crs.realism import realism_metrics
from convsim.evaluation.crs.coverage import hidden_targets
from convsim.lazy import cached_once

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROMPTS = PROJECT_ROOT / "prompts"


class State(TypedDict, total=False):
    session_id: str
    turn: int
    user_state: dict | None         # the simulator's latent state (focus, constraints, anchor)
    user_hidden: dict | None        # its hidden targets (they follow its shifts): evaluators only, never
    #                                 handed to the recommender or an agent slot (DESIGN.md "Agent slots")
    crs_state: dict                 # the recommender's tracked constraints and shown films
    user_concepts: list             # [turn, E(U_turn)] extracted by the crs node, reused by evaluate_turn
    transcript: Annotated[list[dict], operator.add]
    turn_metrics: Annotated[list[dict], operator.add]
    turn_details: Annotated[list[dict], operator.add]   # concept sets per turn
    shift_events: Annotated[list[dict], operator.add]
    dialogue_metrics: dict
    dialogue_details: dict          # per-segment and per-shift rows
    judge_verdict: dict             # the PEPPER-style judge's record (raw answer kept on failure)
    prefix: dict | None             # scripted opening turns (convsim/running/prefix.py), then the simulator
    simulator_judge: dict           # the LLM simulator check's verdict (agents/crs/fidelity.py)


class Params(BaseModel):
    """Scenario parameters; simulator defaults are the original's (crs.md §1.2, §1.5)."""

    n_turns: int = Field(20, ge=1, description="user/system turn pairs per session")
    n_sessions: int = Field(50, ge=1, description="simulated users that sessions() yields")
    catalog_path: str | None = Field(None, description="movie catalog JSON; None = project catalog")
    fuzzy_threshold: float = Field(92.0, ge=0, le=100, description="extractor's rapidfuzz cut-off")
    # simulator (agents/crs/user.py)
    first_shift_turn: int = Field(12, ge=2, description="force the first shift at/after this turn")
    shift_prob: float = Field(0.18, ge=0, le=1, description="spontaneous shift probability")
    contradiction_prob: float = Field(0.15, ge=0, le=1, description="contradiction probability")
    wrong_genre_prob: float = Field(0.3, ge=0, le=1, description="open with a wrong genre")
    drop_constraint_prob: float = Field(0.4, ge=0, le=1, description="drop a constraint at a shift")
    sequential_bias: float = Field(0.55, ge=0, le=1, description="next field in sequential order")
    details_per_anchor: int = Field(3, ge=1, le=4, description="detail turns before a forced shift")
    accept_title_prob: float = Field(0.3, ge=0, le=1,
                                     description="adopt a fitting recommended film as anchor; "
                                                 "0 = strict pairing (the user never reacts)")
    user_mode: Literal["reactive", "strict"] = Field(
        "reactive", description="reactive: the user reacts to the films named (accepts, rejects with a "
                                "reason, asks again); strict: strict pairing, the same user turns for every "
                                "agent (its would-be reaction logged, not said); accept_title_prob 0 = strict")
    end_when_satisfied_prob: float = Field(
        0.0, ge=0, le=1, description="reactive user: after accepting a hidden target it ends the session "
                                     "satisfied with this probability (the recommender's closing reply is "
                                     "the last turn); 0 = always n_turns; never in strict mode")
    min_candidates: int = Field(5, ge=1, description="films that must satisfy the user's "
                                                     "constraints after a shift")
    n_targets: int = Field(5, ge=1, description="hidden target films drawn per user")
    reveal_prob: float = Field(0.5, ge=0, le=1, description="a shift asks for a liked value")
    paraphrase_user: bool = Field(True, description="let the user model write the user's turns when one is set")
    user_llm: Literal["goal", "paraphrase"] = Field(
        "goal", description="with a user model: goal = it writes each turn from the user's preference, "
                            "planned act and reaction (prompts/user_goal.txt, agents/crs/user_goal.py); "
                            "paraphrase = it rephrases the rule turn (prompts/user_paraphrase.txt)")
    # recommender (agents/crs/recommender.py; references in agents/crs/references.py)
    crs_agent: Literal["template", "echo", "random", "titles_only", "oracle", "restating", "parrot",
                       "echo_plus_fixed_film", "restate_titles", "paraphrase"] = Field(
        "template", description="template (the LLM when models.crs is set), a reference system or a "
                                "gaming reference (echo, parrot, echo_plus_fixed_film)")
    top_k: int = Field(10, ge=1, description="recommended ids logged per turn")
    n_mention: int = Field(2, ge=1, description="films named per template answer")
    n_prompt_candidates: int = Field(5, ge=1, description="candidates listed in the LLM prompt")
    # metrics (evaluation/crs/tas.py)
    alpha: float = Field(1.0, description="TAS weight of CC")
    beta: float = Field(1.0, description="TAS weight of CR")
    gamma: float = Field(1.0, description="TAS weight of the copy penalty")
    recovery_window: int = Field(3, ge=1, description="W: turns s..s+W-1 may recover a shift")
    tau: float = Field(0.65, ge=0, le=1, description="ALIGNMENT_THRESHOLD")
    recovery_rule: Literal["cc", "original"] = Field(
        "cc", description="cc: CC >= tau (spec); original: CC >= cc_floor or CR >= tau (code)")
    cc_floor: float = Field(0.35, ge=0, le=1, description="CC threshold of the original rule")
    user_negation: Literal["drop", "keep"] = Field(
        "drop", description="E(U), E(S) of the grounded metrics: without the values a turn retracts "
                            "('I don't care about X anymore') and, in E(U), without the attributes of a film the user "
                            "turns down ('that one is a comedy film and I asked for drama'), or with them "
                            "(paper: its extractor kept them)")
    tas_plot_name: bool = Field(False, description="count name (titles) and plot-keyword concepts in "
                                "TAS (the CRS spec leaves them out by default; evaluation/crs/excluded_fields.py)")
    # TAS/CAS of the multi-model CRS experiment and the PEPPER-style judge (docs/analysis.md)
    topic_mode: Literal["lda", "keyword", "llm"] = Field(
        "lda", description="TAS/CAS topics: LDA on the catalog, keyword heuristic, or the 'topics' model")
    shift_rule: Literal["and", "or"] = Field(
        "and", description="TAS/CAS shift detector: lexical AND topical departure, or either (paper)")
    shift_compare: Literal["segment", "consecutive"] = Field(
        "segment", description="detector compares a user turn with the running segment, or with "
                               "the previous user turn (paper)")
    recovery_shifts: Literal["simulator", "detector"] = Field(
        "simulator", description="TAS/CAS recovery on the simulator's true shifts, or on the "
                                 "detected ones (paper)")
    recovery_search: Literal["segment", "to_end"] = Field(
        "segment", description="TAS/CAS recovery searched inside the shift's new segment, or from the "
                               "shift's reply to the end of the dialogue (paper)")
    tas_cas_tfidf: Literal["project", "paper"] = Field(
        "project", description="TAS/CAS TF-IDF similarity (embedder tfidf): sublinear TF on 'title plot' "
                               "documents, or raw TF on titles and plots apart (paper)")
    judge: bool = Field(True, description="run the PEPPER-style judge (heuristic with model none)")
    report_heuristic_judge: bool = Field(
        False, description="put the heuristic judge's scores (judge_heuristic_*, model none) in "
                           "dialogue_metrics, where correlations and rankings read them")
    agents: dict[str, str] = Field(default_factory=dict, description="role -> agent spec (--agent crs=SPEC)")

    @model_validator(mode="after")
    def _builtin_crs(self):  # --agent crs=oracle names a built-in: the same as crs_agent: oracle
        if self.agents.get("crs") and is_builtin(self.agents["crs"], CRS_SLOT):
            self.crs_agent = builtin_name(self.agents["crs"], CRS_SLOT)
        elif not self.agents.get("crs"):
            self.agents = {**self.agents, "crs": self.crs_agent}
        return self

    def user_params(self) -> UserSimParams:
        return UserSimParams(
            first_shift_turn=self.first_shift_turn, shift_prob=self.shift_prob,
            contradiction_prob=self.contradiction_prob, wrong_genre_prob=self.wrong_genre_prob,
            drop_constraint_prob=self.drop_constraint_prob, sequential_bias=self.sequential_bias,
            details_per_anchor=self.details_per_anchor, accept_title_prob=self.accept_title_prob,
            min_candidates=self.min_candidates, n_targets=self.n_targets,
            reveal_prob=self.reveal_prob, reactive=self.user_mode == "reactive",
            end_when_satisfied_prob=self.end_when_satisfied_prob)

    def crs_params(self) -> CRSParams:
        return CRSParams(top_k=self.top_k, n_mention=self.n_mention,
                         n_prompt_candidates=self.n_prompt_candidates, agent=self.crs_agent)

    def tas_settings(self) -> TASSettings:
        return TASSettings(alpha=self.alpha, beta=self.beta, gamma=self.gamma,
                           window=self.recovery_window, tau=self.tau, rule=self.recovery_rule,
                           cc_floor=self.cc_floor, user_negation=self.user_negation,
                           plot_name=self.tas_plot_name)


@dataclass
class Context(SessionContext):
    params: Params = field(default_factory=Params)  # defaults: runs with no context (langgraph dev)
    catalog: MovieCatalog | None = None          # None: load params.catalog_path (cached)
    extractor: ConceptExtractor | None = None    # None: built from the catalog (cached)


@cached_once(maxsize=8)
def _extractor_for(catalog: MovieCatalog, fuzzy_threshold: float) -> ConceptExtractor:
    return ConceptExtractor(catalog, fuzzy_threshold=fuzzy_threshold)


@functools.lru_cache(maxsize=None)
def _prompt(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8")


def _params(ctx: Context) -> Params:
    return ctx.params if ctx.params is not None else Params()


def catalog_location(path: str | None) -> str | None:
    """A relative ``catalog_path`` is read from the working directory when it exists there,
    else from the project root (so a config may say ../shared/data/... from anywhere)."""
    if path is None or Path(path).is_absolute() or Path(path).exists():
        return path
    return str(PROJECT_ROOT / path)


def _catalog(ctx: Context) -> MovieCatalog:
    if ctx.catalog is not None:
        return ctx.catalog
    return load_movie_catalog(catalog_location(_params(ctx).catalog_path))


def _extractor(ctx: Context) -> ConceptExtractor:
    if ctx.extractor is not None:
        return ctx.extractor
    return _extractor_for(_catalog(ctx), _params(ctx).fuzzy_threshold)


@cached_once(maxsize=8)
def _excluded_idf_for(catalog: MovieCatalog):
    from convsim.evaluation.crs.excluded_fields import ExcludedIdf
    return ExcludedIdf(catalog)


def _tas_idf(ctx: Context):
    """The idf TAS weighs concepts with: the catalog's, with name and plot added when they count."""
    catalog = _catalog(ctx)
    return _excluded_idf_for(catalog) if _params(ctx).tas_plot_name else catalog.idf


def _history(state: State) -> list[tuple[str, str]]:
    return [(e["speaker"], e["text"]) for e in state.get("transcript", [])]


# --- nodes ---------------------------------------------------------------------------------

def user(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    params, catalog = _params(ctx), _catalog(ctx)
    turn = state.get("turn", 0) + 1
    last = state["transcript"][-1] if state.get("transcript") else None
    titles = last["meta"].get("mentioned_ids", []) if last and last["speaker"] == "system" else []
    out = user_turn(state.get("user_state"), turn=turn, seed=ctx.seed, catalog=catalog,
                    params=params.user_params(), system_titles=titles, hidden=state.get("user_hidden"))
    text, meta = out.template, dict(out.meta)
    model = ctx.model("user")
    pair = scripted_pair(state, turn)
    if pair:  # a scripted opening turn: its text is said; the simulator's own agenda still advances
        text, meta = pair["user"], dict(meta, scripted=True)
    elif params.paraphrase_user and not model.is_none and params.user_llm == "goal":
        # the model writes the turn from the user's goal and reaction; the rule turn when it fails a check
        text, meta = goal_turn(model, _prompt("user_goal.txt"), out, catalog, _extractor(ctx), _history(state))
    elif params.paraphrase_user and not model.is_none:
        # sorted: extract() gives a set, whose order follows string hashing (PYTHONHASHSEED)
        values = sorted({v for _, v in _extractor(ctx).extract(out.template)})
        text, meta["paraphrase"] = paraphrase(model, _prompt("user_paraphrase.txt"), out.template,
                                              _history(state), values)
    update = {"turn": turn, "user_state": out.state, "user_hidden": out.hidden,
              "transcript": [{"turn": turn, "speaker": "user", "text": text, "meta": meta}]}
    if meta["shift"]:
        update["shift_events"] = [meta["shift"]]
    return update


def _oracle_view(state: State) -> dict:
    """What the oracle reference may read: the user's latent taste and its current constraints
    and focus (never the hidden target list)."""
    meta = state["transcript"][-1]["meta"]
    return {"liked": (state.get("user_state") or {}).get("liked", []),
            "constraints": meta["constraints"], "focus": [meta["focus_field"], meta["focus_value"]]}


def crs(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    params, catalog, extractor = _params(ctx), _catalog(ctx), _extractor(ctx)
    user_entry = state["transcript"][-1]
    crs_state = state.get("crs_state") or new_crs_state()
    concepts = extractor.extract(user_entry["text"])
    if params.agents.get("crs") and not is_builtin(params.agents["crs"], CRS_SLOT):  # the researcher's agent
        return slot_crs_update(state, spec=params.agents["crs"], session_id=ctx.session_id, catalog=catalog,
                               extractor=extractor, concepts=concepts, top_k=params.top_k)
    seen = {tuple(c) for c in crs_state.get("history_concepts", [])} | set(concepts)
    text, crs_state, meta = crs_turn(
        crs_state, user_text=user_entry["text"], user_concepts=concepts,
        history_concepts=seen, turn=state["turn"], seed=ctx.seed, catalog=catalog,
        extractor=extractor, params=params.crs_params(), model=ctx.model("crs"),
        prompt_template=_prompt("crs_respond.txt"), history=_history(state),
        oracle_view=_oracle_view(state) if params.crs_agent == "oracle" else None)
    crs_state = dict(crs_state, history_concepts=sorted([f, v] for f, v in seen))
    pair = scripted_pair(state, state["turn"])
    if pair and pair.get("system") is not None:  # the scripted reply replaces the recommender's text
        text, meta = pair["system"], dict(meta, scripted=True, agent_text=text)
    return {"crs_state": crs_state, "user_concepts": [state["turn"], sorted(map(list, concepts))],
            "transcript": [{"turn": state["turn"], "speaker": "system", "text": text, "meta": meta}]}


def evaluate_turn(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    # a turn whose model answer was invalid is scored as a failed (empty) reply, not as the fallback
    user_entry, system_entry = state["transcript"][-2], scored_entry(state["transcript"][-1])
    # the crs node already extracted this user turn with the same extractor: not scanned twice
    shared = state.get("user_concepts")
    known = shared[1] if shared and shared[0] == state["turn"] else None
    earlier = {i for e in scored_transcript(state["transcript"][:-2]) if e["speaker"] == "system"
               for i in (e.get("meta") or {}).get("mentioned_ids") or []}
    metrics, details = turn_evaluation(user_entry, system_entry, extractor=_extractor(ctx),
                                       idf=_tas_idf(ctx), settings=_params(ctx).tas_settings(),
                                       user_concepts=known, earlier_named=earlier)
    emit_metrics(runtime, turn=state["turn"],
                 metrics={k: metrics[k] for k in ("cc", "cr", "copy_penalty", "tas")
                          if metrics[k] is not None})
    return {"turn_metrics": [metrics], "turn_details": [details]}


def evaluate_dialogue(state: State, runtime: Runtime[Context]) -> dict:
    ctx = runtime.context
    scored = {**state, "transcript": scored_transcript(state.get("transcript") or [])}  # failed turns as failed
    metrics, details = dialogue_evaluation(scored, _params(ctx).tas_settings(), _tas_idf(ctx),
                                           DIALOGUE_CONTRIBUTORS)
    adapt, adapt_details = adaptation_metrics(state.get("transcript") or [], _catalog(ctx).by_id,
                                              hidden_targets(state), window=_params(ctx).recovery_window,
                                              k=_params(ctx).top_k)  # the headline metrics
    metrics, details = {**metrics, **adapt, **realism_metrics(state.get("transcript") or [])}, \
        {**details, **adapt_details}
    emit_metrics(runtime, turn=None, metrics=metrics, kind="dialogue")
    return {"dialogue_metrics": {**(state.get("dialogue_metrics") or {}), **metrics},
            "dialogue_details": {**(state.get("dialogue_details") or {}), **details}}


def evaluate_tas_cas(state: State, runtime: Runtime[Context]) -> dict:
    """TAS/CAS of the multi-model CRS experiment (``tas_cas*``, beside ``tas_grounded``), detected-vs-true shift scores,
    PEPPER preference coverage and Recall@K (evaluation/crs/tas_cas_eval.py)."""
    ctx = runtime.context
    params = _params(ctx)
    details: dict = {}
    scored = {**state, "transcript": scored_transcript(state.get("transcript") or [])}  # failed turns as failed
    metrics = tas_cas_metrics(scored, catalog=_catalog(ctx), embedder_spec=ctx.embedder_spec,
                              topic_mode=params.topic_mode, run_dir=ctx.run_dir,
                              model=ctx.model("topics"), rule=params.shift_rule,
                              compare=params.shift_compare, recovery_on=params.recovery_shifts, details=details,
                              top_k=params.top_k, recovery_search=params.recovery_search,
                              tfidf=params.tas_cas_tfidf)
    if not details:
        return merge_dialogue_metrics(state, metrics)
    return {**merge_dialogue_metrics(state, metrics),
            "dialogue_details": {**(state.get("dialogue_details") or {}), **details}}


def pepper_judge(state: State, runtime: Runtime[Context]) -> dict:
    """PEPPER-style judge (agents/crs/pepper_judge.py): judge_* scores, failures counted, never dropped."""
    params = _params(runtime.context)
    if not params.judge:
        return {}
    verdict = judge_conversation(runtime.context.model("judge"), scored_transcript(state.get("transcript", [])))
    metrics = labelled_judge_metrics(verdict, report_heuristic=params.report_heuristic_judge)
    return {**merge_dialogue_metrics(state, metrics), "judge_verdict": verdict}


# the recommender's slot: the researcher's own with --agent crs=SPEC (agents/crs/slot.py, docs/agents.md)
SLOTS = {"crs": CRS_SLOT}


# Nodes run once after the last turn, before evaluate_dialogue: (name, fn) pairs.
DIALOGUE_STAGE_NODES: list[tuple[str, object]] = [("evaluate_tas_cas", evaluate_tas_cas),
                                                  ("pepper_judge", pepper_judge)]


def check_simulator(state: State, runtime: Runtime[Context]) -> dict:
    """The LLM path of the simulator checks: with a "simulator_judge" model, a model reads the
    dialogue and flags a user that broke persona, ended early or contradicted itself. An unreadable
    answer is kept with ``failed`` and ``flags`` None (not checked); evaluate_dialogue counts it
    (``simulator_judge_failed``, evaluation/crs/nodes.py)."""
    model = runtime.context.model("simulator_judge")
    if model.is_none:
        # an explicit "not judged" (rather than no update) keeps one state version per node step,
        # so traces and checkpoints stay aligned
        return {"simulator_judge": None}
    from convsim.agents.crs.fidelity import llm_simulator_flags
    return {"simulator_judge": llm_simulator_flags(model, state.get("transcript", []))}


DIALOGUE_STAGE_NODES.append(("check_simulator", check_simulator))


def user_ended(transcript: list[dict]) -> bool:
    """Whether the last user turn ended the session (a satisfied user, ``user_meta.end_session``)."""
    last = next((e for e in reversed(transcript or []) if e.get("speaker") == "user"), None)
    return bool(last and (last.get("meta") or {}).get("end_session"))


def route(state: State, runtime: Runtime[Context]) -> str:
    if state["turn"] < _params(runtime.context).n_turns and not user_ended(state.get("transcript")):
        return "user"
    return DIALOGUE_STAGE_NODES[0][0] if DIALOGUE_STAGE_NODES else "evaluate_dialogue"


def build(params: Params) -> StateGraph:
    g = StateGraph(State, context_schema=Context)
    g.add_node("user", user)
    g.add_node("crs", crs)
    g.add_node("evaluate_turn", evaluate_turn)
    g.add_node("evaluate_dialogue", evaluate_dialogue)
    g.add_edge(START, "user")
    g.add_edge("user", "crs")
    g.add_edge("crs", "evaluate_turn")
    stage = [name for name, _ in DIALOGUE_STAGE_NODES]
    g.add_conditional_edges("evaluate_turn", route, ["user", (stage or ["evaluate_dialogue"])[0]])
    for (name, fn), nxt in zip(DIALOGUE_STAGE_NODES, stage[1:] + ["evaluate_dialogue"]):
        g.add_node(name, fn)
        g.add_edge(name, nxt)
    g.add_edge("evaluate_dialogue", END)
    return g


def sessions(params: Params, ctx: Context):
    """One simulated user per session id; its profile is drawn from the session seed in the
    user node, so the same id (and trial) is the same user in every variant."""
    for i in range(1, params.n_sessions + 1):
        yield {"session_id": f"u{i:04d}", "turn": 0, "user_state": None,
               "crs_state": new_crs_state(), "turn_details": [], "shift_events": [],
               "dialogue_details": {}}


# Headline metrics, shown first in the summary table (convsim.cli.print_summary) and tested against the
# baseline in the report. No simulator figure (UNCOMPARED_METRICS) is among them: those are in the
# dataset summary (tas_echo_ceiling, health_*) and in metrics.csv.
SUMMARY_METRICS = ["adapt_shift_rate", "named_precision", "hit_rate", "turns_to_accept", "target_recall_at_10",
                   "restate_turn_share", "tas_grounded", "echo_turn_share", "recall_at_10", "pc_final",
                   "cc_mean", "cr_mean", "copy_penalty_mean", "recovery_rate",
                   "avg_recovery_delay", "tas_cas",
                   "judge_proactiveness", "judge_coherence", "judge_personalization",
                   "health_repeat_rate"]

# Dialogue metrics that read the user turns only (the simulator, the shift detector run on user turns,
# the echo reply built from user turns): with strict pairing they are identical for every CRS agent by
# construction, so they describe the simulated users, not the system. Reported with this reason beside
# them (report.html, stats.json → metrics.<m>.not_compared, the dataset summary's
# ``simulator_metrics_note``) and kept out of the between-variant tests (evaluation/reporting/run_stats.py).
_SIMULATOR = "simulator figure: reads the user turns only, the same for every agent (strict pairing); not tested between variants"
_DETECTOR = ("detector figure: the shift detector scored on the user turns against the simulator's shifts, "
             "the same for every agent (strict pairing); not tested between variants")
UNCOMPARED_METRICS = {
    **{m: _DETECTOR for m in ("shift_detect_precision", "shift_detect_recall",
                              "shift_detect_legacy_precision", "shift_detect_legacy_recall",
                              "shift_detected_n", "shift_detected_legacy_n")},
    **{m: _SIMULATOR for m in ("tas_echo_ceiling", "tas_cas_n_shifts", "n_shifts", "n_segments", "n_turns",
                               "health_candidates_ge3_share", "health_candidates_min", "health_n_shifts",
                               "health_shifts_focus_changed", "health_shifts_anchor_changed",
                               "health_first_reaction_turn", "user_paraphrase_fallbacks")},
}

# What a reader must know beside a metric (report.html shows it under the metric's name): the simulator
# figures above, and where a metric is gameable (measured on configs/crs_reference.yaml;
# evaluation/crs/validity.py states each as a "gameable:" check).
METRIC_NOTES = {
    **UNCOMPARED_METRICS,
    "tas_grounded": "gameable: a verbatim copy of the user scores 1.0, the maximum (CC = CR = I = 1); "
                    "restating the user's concepts ~0.9; read beside echo_turn_share and recall_at_10",
    "cc_mean": "gameable: restating or copying the user maximises it",
    "cr_mean": "gameable: restating or copying the user maximises it",
    "segment_tas_mean": "gameable as tas_grounded",
    "recovery_rate": "gameable: CC >= tau is reached by restating or copying the user; film-naming systems score ~0",
    "tas_cas": "gameable: the echo reference ranks first (CC, 60 % of the weight, is u-s embedding similarity)",
    "tas_cas_ti_norm": "gameable: a reply naming no film has no interference (echo ranks first)",
    "tas_cas_rd_norm": "gameable: restating the new request counts as immediate recovery (echo ranks first)",
    "dst_precision_mean": "gameable: restating only the user's constraints gives precision 1 (echo ranks first)",
    "dst_f1_mean": "gameable as dst_precision_mean (echo ranks first)",
    "dst_joint_mean": "gameable as dst_precision_mean (echo ranks first)",
    "hallucinated_concepts_total": "counts a named film's own attributes: the oracle scores worst, the echo 0; not a quality measure",
    "judge_heuristic_coherence": "gameable: the heuristic counts words shared with the user (echo ranks first)",
    "judge_heuristic_personalization": "gameable: echo and restating top it",
    "pc_final": "each turn's logged list cut to top_k before scoring",
    "pc_mean": "each turn's logged list cut to top_k before scoring",
}


# The range of each dialogue metric whose bounds follow from its definition (docs/metrics.md §1-2): a
# mean's 95% CI is clipped to it (ci_clipped) and a value outside it is a warning (docs/ENGINE_API.md).
# TAS is clipped to [-1, 1] per turn; CC is a Jaccard index and CR a cosine of non-negative idf vectors,
# so both are in [0, 1]; the TAS/CAS similarities are embedding cosines (MiniLM's can be negative).
_SHARE = (0.0, 1.0)
_COUNT = (0.0, None)
METRIC_RANGES = {
    **{m: (-1.0, 1.0) for m in ("tas_grounded", "segment_tas_mean", "tas_echo_ceiling", "tas_cas",
                                "tas_cas_cross_coherence", "tas_cas_context_retention")},
    **{m: _SHARE for m in ("cc_mean", "cr_mean", "copy_penalty_mean", "segment_cc_mean", "segment_cr_mean",
                           "echo_turn_share", "recovery_rate", "off_catalog_rate",
                           "dst_precision_mean", "dst_recall_mean", "dst_f1_mean", "dst_joint_mean",
                           "tas_cas_topic_recovery_rate", "tas_cas_topic_interference", "tas_cas_rd_norm",
                           "tas_cas_ti_norm", "shift_detect_precision", "shift_detect_recall",
                           "shift_detect_legacy_precision", "shift_detect_legacy_recall",
                           "adapt_shift_rate", "named_precision", "hit_rate", "accepted_any",
                           "target_recall_at_10", "restate_turn_share", "realism_reaction_rate",
                           "realism_unseen_mention_share", "realism_bridge_share", "realism_forms", "realism_form_repeats",
                           "realism_user_model_fallback_share",
                           "pc_final", "pc_mean", "recall_at_1", "recall_at_5", "recall_at_10",
                           "judge_failed", "judge_heuristic", "health_candidates_ge3_share", "health_repeat_rate")},
    # judges answer integers 1-5; the heuristic judge is 1 + 4 x a share
    **{m: (1.0, 5.0) for m in ("judge_proactiveness", "judge_coherence", "judge_personalization",
                               "judge_heuristic_proactiveness", "judge_heuristic_coherence",
                               "judge_heuristic_personalization")},
    **{m: _COUNT for m in ("adapt_delay", "turns_to_accept", "avg_recovery_delay", "tas_cas_avg_recovery_delay", "n_turns", "n_turns_not_applicable",
                           "n_segments", "n_shifts", "n_recovered", "missing_concepts_total",
                           "hallucinated_concepts_total", "recommended_titles_total", "off_catalog_titles_total",
                           "crs_generation_failures", "user_paraphrase_fallbacks", "tas_cas_n_shifts",
                           "realism_user_model_unseen_rejected",
                           "shift_detected_n", "shift_detected_legacy_n", "health_candidates_min",
                           "health_n_shifts", "health_shifts_focus_changed", "health_shifts_anchor_changed",
                           "health_first_reaction_turn")},
}

# What each headline metric means, in one line, and which way is better (report.html's answer
# sentences and headline table, `convsim compare`; docs/analysis.md "Reading the answer"). A "*" in
# a name matches any characters, as in METRIC_RANGES.
METRIC_DESCRIPTIONS = {
    "adapt_shift_rate": "share of preference shifts followed, within W turns, by new films that fit the new "
                        "constraints (by catalog attributes)",
    "named_precision": "share of the films named that are new and fit the user's current constraints",
    "hit_rate": "share of system turns after which the simulated user accepted a film named in them",
    "turns_to_accept": "turns until the simulated user first accepted a film named to it",
    "target_recall_at_10": "share of the user's hidden targets (valid at the end) in the last top-10 list",
    "restate_turn_share": "share of replies restating the user's concepts without a named film that carries them",
    "tas_grounded": "topic adherence: how well replies keep to the user's current constraints "
                    "(concept overlap and similarity, minus copying)",
    "echo_turn_share": "share of replies that only restate the user and recommend no film",
    "recall_at_10": "share of sessions whose last recommendation list has a hidden target film in its top 10",
    "recall_at_*": "share of sessions whose last recommendation list has a hidden target film in its top K",
    "pc_final": "share of the user's hidden target films recommended at some point (preference coverage)",
    "pc_mean": "preference coverage averaged over turns",
    "cc_mean": "concept coverage: share of the user's current concepts the reply mentions, mean over turns",
    "cr_mean": "concept relevance: similarity of the reply's concepts to the user's, mean over turns",
    "copy_penalty_mean": "share of turns whose reply copies the user's words (3-grams)",
    "recovery_rate": "share of preference shifts the recommender follows within the recovery window (CC >= tau)",
    "avg_recovery_delay": "turns from a preference shift to the recommender following it, over recovered shifts",
    "tas_cas": "TAS-CAS composite: recovery, interference and embedding coherence after shifts",
    "judge_proactiveness": "judge score 1-5: the recommender proposes films or asks useful questions",
    "judge_coherence": "judge score 1-5: replies follow from what the user said",
    "judge_personalization": "judge score 1-5: replies use the user's stated preferences",
    "judge_heuristic_*": "heuristic judge score 1-5 (model none): word overlap with the user, not a quality judgement",
    "health_repeat_rate": "share of named films the recommender had already named earlier in the session",
}
METRIC_DIRECTIONS = {
    **{m: "higher" for m in ("adapt_shift_rate", "named_precision", "hit_rate", "target_recall_at_10",
                             "tas_grounded", "recall_at_*", "pc_final", "pc_mean", "cc_mean", "cr_mean",
                             "recovery_rate", "tas_cas", "judge_*")},
    **{m: "lower" for m in ("turns_to_accept", "restate_turn_share", "echo_turn_share", "copy_penalty_mean", "avg_recovery_delay", "health_repeat_rate")},
}


# Which state keys feed each turn metric and below which value it counts as low: the trace links a
# low metric (e.g. CC under tau after a shift) to the steps of its turn that wrote these keys.
METRIC_INPUTS = {"cc": ["crs_state", "user_state", "transcript"], "cr": ["crs_state", "transcript"],
                 "tas": ["crs_state", "user_state", "transcript"], "copy_penalty": ["transcript"]}
METRIC_THRESHOLDS = {"cc": 0.65, "tas": 0.65}


def dataset_metrics(records: list[dict]) -> dict:
    return {**pooled_dataset_metrics(records),
            "simulator_metrics_note": "the same for every agent by construction (user turns only; not "
                                      "tested between variants): " + ", ".join(UNCOMPARED_METRICS)}


MODEL_ROLES = ("crs", "user", "topics", "judge", "simulator_judge")  # the roles the nodes ask ctx.model() for


def preflight(params: Params, ctx: Context) -> None:
    """Load the catalog and its concept extractor once, before the first session (convsim preflight),
    and check the catalog holds the genres the user simulator draws from (else one line, nothing
    written: before, the first session found it, after the run directory was made)."""
    _extractor(ctx)
    profile_genres(_catalog(ctx), params.user_params())


def agent_checks(state: State) -> list[dict]:
    """A CRS turn whose model answer was invalid (empty, or a repeat of its prompt; its generation
    failed and the raw answer is in the turn's ``meta.generation``): the recommender failed, the
    session is an agent failure (scored)."""
    return [{"check": "crs_model_failed", "detail": f"turn {e.get('turn')}: "
                                                    f"{e['meta']['generation'].get('reason')}; raw: "
                                                    f"{str(e['meta']['generation'].get('raw'))[:200]}"}
            for e in state.get("transcript") or []
            if e.get("speaker") == "system" and ((e.get("meta") or {}).get("generation") or {}).get("ok") is False]


def simulator_checks(state: State) -> list[dict]:
    """Flags of a simulated user that broke persona, ended early or contradicted its own profile
    (agents/crs/fidelity.py), whose LLM paraphrase was invalid (the template was said instead), and
    of a topics model or PEPPER judge whose answer was invalid after its retries; a flagged session
    is a simulator failure, not a recommender score. An unreadable simulator-judge answer is recorded
    (``simulator_judge.failed``, raw kept, ``flags`` None) and flags nothing: the audit failed, not
    the user; it is counted by the dialogue metric ``simulator_judge_failed``."""
    from convsim.agents.crs.fidelity import crs_simulator_checks
    flags = list(crs_simulator_checks(state))
    flags += [{"check": "user_model_failed", "detail": f"turn {e.get('turn')}: the user's paraphrase was invalid "
                                                       f"({e['meta']['paraphrase'].get('reason')}; template used); "
                                                       f"raw: {str(e['meta']['paraphrase'].get('raw'))[:200]}"}
              for e in state.get("transcript") or []
              if e.get("speaker") == "user" and ((e.get("meta") or {}).get("paraphrase") or {}).get("ok") is False]
    for f in (state.get("dialogue_details") or {}).get("topic_failures") or []:  # the topics model (an evaluator)
        flags.append({"check": "topics_model_invalid", "detail": f"{f.get('error')}; raw: {str(f.get('raw'))[:200]}"})
    verdict = state.get("judge_verdict") or {}
    if verdict and not verdict.get("ok", True):  # the PEPPER judge answered garbage: it failed, not the CRS
        flags.append({"check": "judge_invalid",
                      "detail": f"{verdict.get('error')}; raw: {str(verdict.get('raw'))[:200]}"})
    return flags


def evaluate_transcript(transcript: list[dict], ctx: Context) -> dict:
    """Evaluate an existing transcript without simulating (``convsim eval``, evaluation/reporting/transcripts.py):
    the graph's own evaluation nodes replayed over the (user, system) turns, then the dialogue stage."""
    from types import SimpleNamespace
    runtime = SimpleNamespace(context=ctx, stream_writer=None)
    state: dict = {"transcript": [], "turn_metrics": [], "turn_details": [], "dialogue_metrics": {},
                   "dialogue_details": {}}
    for entry in transcript:
        state["transcript"] = state["transcript"] + [entry]
        if entry["speaker"] == "system" and "off_catalog_titles" not in entry.get("meta", {}):
            # an imported system turn: the same title checks the project's recommender makes
            text, extractor = entry["text"], _extractor(ctx)
            entry = {**entry, "meta": {**entry.get("meta", {}), "off_catalog_titles": off_catalog_titles(
                extractor, text), "mentioned_ids": [i for i in extractor.extract_titles(text)
                                                    if i in _catalog(ctx).by_id]}}
            state["transcript"][-1] = entry
        if entry["speaker"] == "system" and len(state["transcript"]) >= 2 \
                and state["transcript"][-2]["speaker"] == "user":
            state["turn"] = entry["turn"]
            update = evaluate_turn(state, runtime)
            for key in ("turn_metrics", "turn_details"):
                state[key] = state[key] + update[key]
    for _, node in [*DIALOGUE_STAGE_NODES, ("evaluate_dialogue", evaluate_dialogue)]:
        state.update(node(state, runtime))
    return {k: state[k] for k in ("turn_metrics", "dialogue_metrics", "dialogue_details", "judge_verdict")
            if k in state}


graph = compile_with_default_context(build(Params()))
