"""Model clients and provider limits: model spec strings and LangChain chat models (models) over
Ollama, OpenAI-compatible servers (openai_client, httpjson) and in-process llama.cpp (llamacpp);
retries of infrastructure faults (retry), per-provider concurrency, rate and budget limits
(limits), the response cache (cache), token and latency accounting (usage), and sentence embedders
(embedders, textvec).
"""
