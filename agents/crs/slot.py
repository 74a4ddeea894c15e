"""The crs_shift recommender's agent slot: the researcher's own recommender in the ``crs`` node.

The agent is handed the conversation so far (the seeker's turns ``HumanMessage``, its own earlier
replies ``AIMessage``) and ``{"turn": t}``; it returns a reply and may report ``recommended_ids``
(catalog ids, best first). When it reports none, the films are read from the reply through the
catalog, as ``convsim eval`` reads an imported system turn (graphs/crs_shift.py,
``evaluate_transcript``): the titles it names (``mentioned_ids``), in order, are its ranking, and
title-like spans no catalog film resolves are ``off_catalog_titles``. ``meta.rec_ids_source`` says
which (``"agent"`` or ``"reply text"``).
"""
from __future__ import annotations

from convsim.agents.crs.recommender import off_catalog_titles
from convsim.agents.language import node_vocabulary
from convsim.agents.crs.tools import TOOL_NAMES, FilmTools
from convsim.running.prefix import scripted_pair
from convsim.slots import Slot
from convsim.slots.nodes import call_slot

BUILTINS = ("template", "echo", "random", "titles_only", "oracle", "restating", "parrot", "echo_plus_fixed_film")

CRS_SLOT = Slot(role="crs", handed="the conversation so far (the seeker's turns, its own replies) and {turn}",
                returns="reply", structured=("recommended_ids",), builtins=BUILTINS,
                language="en", vocabulary=node_vocabulary, tools=TOOL_NAMES)  # a reply in English (convsim.agents.language)


def reported_ids(structured: dict, catalog) -> tuple[list[str] | None, list]:
    """The catalog ids among the agent's ``recommended_ids`` (None when it reported none) and the
    ones no catalog film has (kept in the turn's meta, never scored as films)."""
    ids = structured.get("recommended_ids")
    if ids is None:
        return None, []
    ids = [str(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])]
    return [i for i in ids if i in catalog.by_id], [i for i in ids if i not in catalog.by_id]


def slot_crs_update(state: dict, *, spec: str, session_id: str, catalog, extractor, concepts,
                    top_k: int) -> dict:
    """The crs node's update when the researcher's agent fills the slot: the reply as the system turn
    (its meta: ``agent_spec``, ``tool_calls``, ``structured``, ``mentioned_ids``, ``rec_ids``,
    ``off_catalog_titles``, ``rec_ids_source``) and the user turn's concepts for evaluate_turn."""
    turn = state["turn"]
    films = FilmTools(catalog)  # the scenario's tools (search_films, lookup_film): the catalog only, no targets
    answer, meta = call_slot(spec, CRS_SLOT, state["transcript"], context={"turn": turn}, session_id=session_id,
                             user_speakers=("user",), tools=films.tools())
    if films.calls and not meta.get("tool_calls"):  # a callable's calls of the tools it was handed
        meta["tool_calls"] = films.calls
    text = answer.text
    named = [i for i in extractor.extract_titles(text) if i in catalog.by_id]
    reported, unknown = reported_ids(answer.structured, catalog)
    meta.update({"mentioned_ids": reported[:top_k] if reported is not None else named,
                 "rec_ids": (reported if reported is not None else named)[:top_k],
                 "rec_ids_source": "agent" if reported is not None else "reply text",
                 "off_catalog_titles": off_catalog_titles(extractor, text)})
    if unknown:
        meta["unknown_ids"] = unknown
    pair = scripted_pair(state, turn)
    if pair and pair.get("system") is not None:  # the scripted reply replaces the agent's text
        text, meta = pair["system"], dict(meta, scripted=True, agent_text=text)
    return {"user_concepts": [turn, sorted(map(list, concepts))],
            "transcript": [{"turn": turn, "speaker": "system", "text": text, "meta": meta}]}
