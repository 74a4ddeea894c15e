"""A tool-calling customer-service agent built on ``langchain.agents.create_agent``.

Evaluate it in convsim's customer-service scenario (simulated MultiWOZ customers)::

    convsim run customer_service --agent service=examples/service_agent.py:graph --sessions 20

The agent gets the scenario's tools: ``find_entities``, ``lookup_entity`` and ``book``, acting on
the session's own copy of the booking system (``session_tools()``: bound to the running session
at call time, so this graph is built once). convsim grades what it booked against each customer's
goal (``task_success_state``, ``policy_compliance_state``) beside the text metrics.

The chat model: set ``CONVSIM_EXAMPLE_MODEL`` to any model ``langchain.chat_models.init_chat_model``
knows (``openai:gpt-4o-mini``, ``ollama:qwen2.5:7b`` ...). Unset, a scripted tool-calling model
stands in (``examples/scripted_models.py``: deterministic, offline) so the example runs anywhere.
Copy this file and change the prompt, the model or the graph: anything that takes and returns
``{"messages": [...]}`` fills the slot.
"""
from __future__ import annotations

import os

from langchain.agents import create_agent

from convsim.agents.service.tools import session_tools

PROMPT = ("You are the Cambridge TownInfo help desk. Help the customer find and book restaurants, hotels, "
          "attractions and trains. Always search with find_entities before naming a venue; name one venue "
          "with its address; book only with the details the customer gave (restaurant: people, day, time; "
          "hotel: people, day, stay; train: people) and say the reference number.")


def chat_model():
    spec = os.environ.get("CONVSIM_EXAMPLE_MODEL")
    if spec:
        from langchain.chat_models import init_chat_model
        return init_chat_model(spec)
    from scripted_models import ScriptedServiceModel
    return ScriptedServiceModel()


graph = create_agent(chat_model(), tools=session_tools(), system_prompt=PROMPT)
