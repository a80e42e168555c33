"""A `ChatModel` on a local Ollama server, through the official ``ollama`` client.

    python -m agent_loop.demo --model ollama:llama3.2      # OLLAMA_HOST picks the server

Decoding is greedy (temperature 0, fixed seed) as for the bundled model, so a turn is
repeatable as far as the server allows. Nothing is pulled: the model must already be on
the server (``ollama pull NAME``); a missing server or model is `ModelUnavailable`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from .model import Message, ModelUnavailable

INSTALL_HINT = "pip install -e '.[ollama]' (the official ollama client)"


class OllamaChat:
    """Ollama's ``/api/chat`` behind the `ChatModel` protocol.

    >>> # OllamaChat("llama3.2").complete([{"role": "user", "content": "Hi"}], max_tokens=8)
    """

    def __init__(self, model: str, *, host: str | None = None, seed: int = 0, timeout: float = 120.0) -> None:
        if importlib.util.find_spec("ollama") is None:
            raise ModelUnavailable(f"the ollama client is not installed: {INSTALL_HINT}")
        import ollama

        self.model = model
        self.name = f"ollama:{model}"
        self.seed = seed
        self._client = ollama.Client(host=host, timeout=timeout)

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 128) -> str:
        """The server's reply to *messages*, at most *max_tokens* tokens."""
        import httpx
        import ollama

        try:
            response: Any = self._client.chat(
                model=self.model,
                messages=[dict(m) for m in messages],
                options={"temperature": 0.0, "top_k": 1, "seed": self.seed, "num_predict": max_tokens},
            )
        except ollama.ResponseError as exc:
            raise ModelUnavailable(f"ollama: {exc.error} (is the model pulled? `ollama pull {self.model}`)") from exc
        except (httpx.HTTPError, ConnectionError) as exc:
            raise ModelUnavailable(
                f"no Ollama server reachable ({exc}); start `ollama serve` or set OLLAMA_HOST"
            ) from exc
        return (response.message.content or "").strip()

    def close(self) -> None:
        """Nothing to free: the model lives in the server."""


def build_model(spec: str) -> Any:
    """``smollm2`` (the bundled model) or ``ollama:NAME``."""
    if spec.startswith("ollama:") and spec[len("ollama:") :]:
        return OllamaChat(spec[len("ollama:") :])
    if spec == "smollm2":
        from .model import SmolLM2

        return SmolLM2()
    raise ModelUnavailable(f"unknown model {spec!r}: use smollm2 or ollama:NAME")
