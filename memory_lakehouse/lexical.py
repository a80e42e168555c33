"""Lexical matching: the tokens, the BM25 model and the coverage measure recall fuses.

BM25 is bm25s's (a sparse term matrix; scoring a query reads only the columns of its
words), its matrix built here with numpy (`_term_matrix`). Words are Snowball-stemmed
(PyStemmer) and English stopwords dropped, so "invoices" matches "invoiced" and "can",
"do", "we" match nothing. `Bm25.coverage` puts a row's lexical match on a fixed [0, 1]
scale — the share of the query's IDF mass its words hold — which is what hybrid fusion
adds to a cosine (`retrieve.fuse_scores`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Lexical tokens: runs of two or more letters or digits (``sso_provider`` -> sso, provider;
#: ``C-20417`` -> 20417), lower-cased, NLTK's English stopwords dropped (bm25s "en_plus"),
#: Snowball-stemmed (PyStemmer) so that "invoices" matches "invoiced".
TOKEN_PATTERN = r"(?u)[^\W_]{2,}"
STOPWORDS = "en_plus"
STEMMER = "english"

_local = threading.local()


def _stemmer() -> Any:
    """One Snowball stemmer per thread (PyStemmer objects are not thread-safe)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer(STEMMER)
    return stemmer


@functools.cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


#: What texts are joined with before one split (`_words`): not a token character, so no token
#: spans two texts, and a token of its own in the split.
_ROW_BREAK = "\x00"
_split_rows = re.compile(TOKEN_PATTERN + "|" + _ROW_BREAK).findall


def _words(texts: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The lexical rule, once for `tokenize` and `term_ids`: the words of *texts* in order, with
    `_ROW_BREAK` between texts, and the stem of each distinct word that is not a stopword.

    Each text is lower-cased alone (a final sigma depends on what follows it), then all are
    joined and split in one regex pass; each distinct word is looked up once. A row break
    inside a text reads as a space: neither is a token character.
    """
    if any(_ROW_BREAK in text for text in texts):
        texts = [text.replace(_ROW_BREAK, " ") for text in texts]
    words = _split_rows(_ROW_BREAK.join([text.lower() for text in texts]))
    stop = _stopwords()
    distinct = [w for w in dict.fromkeys(words) if w not in stop and w != _ROW_BREAK]
    return words, dict(zip(distinct, _stemmer().stemWords(distinct), strict=True))


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lexical tokens of each text (see `TOKEN_PATTERN`): what BM25 and coverage compare.

    The steps of ``bm25s.tokenize(texts, stopwords=STOPWORDS, stemmer=..., token_pattern=TOKEN_PATTERN,
    return_ids=False)`` (lower-case, split, drop stopwords, stem each distinct word once),
    written out (`_words`): bm25s builds its stopword set again for every text and wraps
    each step in a progress bar, which cost a recall ~0.4 ms to tokenize its query.
    tests/test_ranking.py checks the two agree.

    >>> tokenize(["Invoices: customer:C-20417 sso_provider", "the invoiced customers"])
    [['invoic', 'custom', '20417', 'sso', 'provid'], ['invoic', 'custom']]
    """
    if not texts:
        return []
    words, stem_of = _words(texts)
    out: list[list[str]] = [[]]
    for word in words:
        if word == _ROW_BREAK:
            out.append([])
        elif (stem := stem_of.get(word)) is not None:
            out[-1].append(stem)
    return out


@dataclass(frozen=True)
class TermIds:
    """`tokenize` of many texts as arrays: each token's id in *vocab* and its text's index,
    in order, and each text's count of tokens."""

    tokens: np.ndarray  # int64
    rows: np.ndarray  # int64, ascending
    lengths: np.ndarray  # int64, one per text
    vocab: dict[str, int]  # stem -> id, in order of first use


def term_ids(texts: Sequence[str]) -> TermIds:
    """`tokenize` of *texts* (the same tokens, text by text) without a Python step per token.

    An org's BM25 build maps every token of its rows: at 1M rows (50,000 an org) that took
    0.66-0.75 s a token at a time, 0.45-0.48 s this way; at 100k 40-43 ms, 33-34 (what is
    left is mostly the one regex pass of `_words`, ~45 ns a character). Each distinct
    word's id is looked up once, the rest is a C-level map and numpy.
    tests/test_ranking.py checks it reads back as `tokenize`.
    """
    words, stem_of = _words(texts)
    vocab = {stem: i for i, stem in enumerate(dict.fromkeys(stem_of.values()))}  # first use of a stem
    code = {word: vocab[stem] for word, stem in stem_of.items()}
    code[_ROW_BREAK] = -2
    ids = np.fromiter(map(code.get, words, itertools.repeat(-1)), np.int64, len(words))  # -1: a stopword
    row_of = np.cumsum(ids == -2)  # each word's text: the breaks before it
    kept = ids >= 0
    rows = row_of[kept]
    return TermIds(ids[kept], rows, np.bincount(rows, minlength=len(texts)).astype(np.int64), vocab)


@functools.lru_cache(maxsize=4096)
def query_tokens(query: str) -> tuple[str, ...]:
    """`tokenize` of one query, remembered (recall tokenizes its query twice per org: scores, coverage)."""
    return tuple(tokenize([query])[0])


def lexical_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 score of *query* against each of *texts* (zeros when nothing matches)."""
    return Bm25(list(texts)).scores(query)


class Bm25:
    """A bm25s model over a fixed list of texts."""

    def __init__(self, texts: list[str]) -> None:
        import bm25s

        self.size = len(texts)
        self.model = None
        terms = term_ids(texts)
        #: the rows' mean length in tokens: BM25's length normalisation (`scores_of` needs it)
        self.average_length = int(terms.lengths.sum()) / len(texts) if texts else 0.0
        if len(terms.tokens):
            self.model = bm25s.BM25()
            _term_matrix(self.model, terms)

    def _column(self, token: str) -> int | None:
        """The token's column in the model's term matrix (None: no row holds it)."""
        if self.model is None:
            return None
        col = self.model.vocab_dict.get(token)
        return col if col is not None and col + 1 < len(self.model.scores["indptr"]) else None

    def idf(self, tokens: Sequence[str]) -> list[float]:
        """Robertson–Spärck Jones IDF of each token here, floored at 0 (a token no row holds is as rare as can be).

        A word half the rows or more hold weighs nothing: it is no evidence that a row
        is the one asked for ("customer" in a CRM store). Lucene's BM25 adds 1 inside the
        logarithm to keep scores positive; a share of the query's evidence
        (`coverage`) has no such need, and with it a near-tie of cosines was decided by
        such a word (docs/performance.md, retrieval quality).
        """
        return [max(0.0, math.log((self.size - df + 0.5) / (df + 0.5))) for df in map(self._document_frequency, tokens)]

    def _shares(self, query: str, idf_from: Bm25 | None = None) -> list[tuple[str, float]]:
        """Each distinct word of *query* with its share of the query's IDF mass (*idf_from*'s
        IDF, this model's by default): the one definition `coverage`, `coverage_at` and
        `coverage_of` add up. Empty when the query has no words, or every word is in half the
        rows or more (no lexical evidence at all)."""
        words = list(dict.fromkeys(query_tokens(query)))
        if not words:
            return []
        idf = (idf_from or self).idf(words)
        total = sum(idf)
        if total <= 0:
            return []
        return [(word, weight / total) for word, weight in zip(words, idf, strict=True)]

    def coverage(self, query: str, idf_from: Bm25 | None = None) -> np.ndarray:
        """Per row, the share of the query's IDF mass its words match (`lexical_coverage`), in [0, 1].

        One pass over the rows holding each query word (the term matrix's columns), as
        cheap as BM25 scoring itself. *idf_from*: the model whose IDF weighs the words
        (rows newer than the org's model are weighed by the org's, not by their own few).
        """
        out = np.zeros(self.size, dtype=np.float32)
        if self.model is None:
            return out
        indptr, indices = self.model.scores["indptr"], self.model.scores["indices"]
        for word, share in self._shares(query, idf_from):
            col = self._column(word)
            if col is not None:
                out[indices[indptr[col] : indptr[col + 1]]] += share
        return out

    def coverage_at(self, query: str, rows: np.ndarray) -> np.ndarray:
        """``coverage(query)[rows]``, without a pass over every row holding a query word.

        Recall needs the coverage of its pool only (a few dozen rows), and at 1M a query's
        common words are held by most of an org's 50,000 rows (~0.17 ms a recall for the
        whole array). Each word's column holds its rows in order, so a binary search per
        word tells which of *rows* hold it; the shares are added in the same order.
        tests/test_ranking.py checks it against `coverage`.
        """
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float32)
        if self.model is None or not len(rows):
            return out
        indptr, indices = self.model.scores["indptr"], self.model.scores["indices"]
        for word, share in self._shares(query):
            col = self._column(word)
            held = indices[indptr[col] : indptr[col + 1]] if col is not None else indices[:0]
            if not len(held):
                continue
            at = np.minimum(np.searchsorted(held, rows), len(held) - 1)
            out[held[at] == rows] += share
        return out

    def _document_frequency(self, token: str) -> int:
        col = self._column(token)
        if col is None or self.model is None:
            return 0
        indptr = self.model.scores["indptr"]
        return int(indptr[col + 1] - indptr[col])

    def scores_of(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """BM25 of *query* against each of *texts* under this model's statistics: its rows'
        document frequencies and mean length, bm25s's Lucene formula (k1, b).

        Rows written since the model was built are scored on the model's own scale this way,
        without building a model of their own (a bm25s index costs ~1.5 ms even for a few
        rows, and recall right after a write needed one each time). A row of the model gets
        the score `scores` gives it; a query word no row of the model holds counts as the
        rarest (document frequency 0). tests/test_ranking.py checks both.
        """
        out = np.zeros(len(texts), dtype=np.float32)
        if self.model is None or not texts:
            return out
        words = list(query_tokens(query))
        k1, b = float(self.model.k1), float(self.model.b)
        idf = {
            w: np.float32(math.log(1 + (self.size - df + 0.5) / (df + 0.5)))
            for w in words
            for df in [self._document_frequency(w)]
        }
        for i, doc in enumerate(tokenize(texts)):
            counts: dict[str, int] = {}
            for token in doc:
                counts[token] = counts.get(token, 0) + 1
            norm = k1 * ((1 - b) + b * len(doc) / self.average_length)
            total = np.float32(0.0)
            for word in words:
                tf = counts.get(word)
                if tf:
                    total += idf[word] * np.float32(tf / (norm + tf))
            out[i] = total
        return out

    def coverage_of(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """`coverage` of *query* for each of *texts* (rows this model does not hold), weighed by
        this model's IDF: what ``Bm25(texts).coverage(query, idf_from=self)`` gives, without the model."""
        out = np.zeros(len(texts), dtype=np.float32)
        shares = self._shares(query) if texts else []
        if not shares:
            return out
        for i, doc in enumerate(tokenize(texts)):
            present = set(doc)
            share = np.float32(0.0)
            for word, weight in shares:
                if word in present:
                    share += np.float32(weight)
            out[i] = share
        return out

    def scores(self, query: str, mask: np.ndarray | None = None) -> np.ndarray:
        if self.model is None:
            return np.zeros(self.size, dtype=np.float32)
        tokens = [t for t in query_tokens(query) if t in self.model.vocab_dict]
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        scores = np.asarray(self.model.get_scores(tokens), dtype=np.float32)
        return scores if mask is None else np.where(mask, scores, 0.0)


def best_of(scores: np.ndarray, allowed: np.ndarray, depth: int) -> np.ndarray:
    """The allowed rows with a nonzero score, best first (ties in row order), at most *depth*.

    What ``matched[np.argsort(-scores[matched], kind="stable")][:depth]`` gives for
    ``matched = np.flatnonzero((scores != 0) & allowed)``, without sorting them all: at 1M
    a query's common words match most of an org's 50,000 rows. Only the rows at or
    above the depth-th best score are sorted (all of them when ties straddle it), still
    in row order, so the stable sort breaks ties as the full one would.

    >>> best_of(np.array([0.0, 2.0, 1.0, 2.0, 3.0], np.float32), np.array([1, 1, 1, 1, 0], bool), 2).tolist()
    [1, 3]
    """
    rows = np.flatnonzero(allowed)
    values = scores[rows]
    kept = values != 0
    rows, values = rows[kept], values[kept]
    if len(rows) > depth > 0:
        threshold = -np.partition(-values, depth - 1)[depth - 1]  # the depth-th best score
        kept = values >= threshold
        rows, values = rows[kept], values[kept]
    order: np.ndarray = rows[np.argsort(-values, kind="stable")][:depth]
    return order


def _term_matrix(model: Any, terms: TermIds) -> None:
    """What ``model.index(corpus, show_progress=False)`` gives a fresh ``bm25s.BM25()`` for
    the corpus *terms* holds: the same term matrix, built with numpy over every token at once.

    bm25s builds it a row at a time in Python (a `Counter` and three small arrays a row,
    ~17 µs a row), and an org's first recall after a restart builds the org's model: at 100k
    rows (5,000 an org) the build took 111-113 ms that way and 40-43 this way, at 1M (50,000
    an org) 1.44-1.51 s and 0.66-0.75 (tokenizing was most of what was left: `term_ids`).

    The arithmetic is bm25s's, step for step, so the matrix is the same to the bit: its
    default Lucene scoring (IDF ``log(1 + (N - df + 0.5) / (df + 0.5))`` by `math.log`,
    rounded to the model's dtype; each (row, token) scored in float64 as
    ``idf * tf / (k1 * (1 - b + b * len / mean len) + tf)``, then rounded), a column per token
    holding its rows in order, and the empty token after the others. Only the token ids
    differ (bm25s numbers them in a set's order, this in order of first use): no score
    depends on them. tests/test_ranking.py checks the scores and coverage against bm25s's
    own build. Other settings than bm25s's defaults are refused, not approximated.
    """
    settings = (model.method, model.idf_method, model.csc_backend)
    if settings != ("lucene", "lucene", "numpy"):
        raise ValueError(f"the numpy build spells out bm25s's Lucene scoring only, not {settings}")
    vocab, lengths = dict(terms.vocab), terms.lengths
    n_docs, n_vocab = len(lengths), len(vocab)
    pairs, counts = np.unique(terms.tokens * n_docs + terms.rows, return_counts=True)
    column, row = np.divmod(pairs, n_docs)  # sorted by token, then row: the CSC order
    df = np.bincount(column, minlength=n_vocab)
    idf = np.array(
        [math.log(1 + (n_docs - d + 0.5) / (d + 0.5)) for d in df.tolist()], dtype=model.dtype
    )  # bm25s: _build_idf_array with _score_idf_lucene
    tf = counts.astype(model.dtype)
    tfc = tf / (model.k1 * ((1 - model.b) + model.b * lengths[row] / lengths.mean()) + tf)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    model.scores = {
        "data": (idf[column] * tfc).astype(model.dtype),
        "indices": row.astype(model.int_dtype),
        "indptr": indptr,
        "num_docs": n_docs,
    }
    model.nonoccurrence_array = None
    if "" not in vocab:
        vocab[""] = n_vocab
    model.vocab_dict = vocab
    # bm25s's `index` also keeps ``set(vocab.values())``, which only its `retrieve` of queries
    # given as token ids reads (`Bm25` scores through `get_scores`, by words): it held ~330 KB
    # an org of 5,000 rows (6.6 MB of the 100k tenants store, by tracemalloc), not kept
    model.unique_token_ids_set = None


def lexical_coverage(query: str, text: str, bm25: Bm25) -> float:
    """The share of *query*'s IDF mass that *text*'s words match, in [0, 1] (IDF from *bm25*).

    The lexical half of hybrid fusion. Unlike a BM25 score it has a fixed scale — 1 when
    every query word occurs, whatever the query — so it can be added to a cosine without
    normalising by the query's best hit, and a hit matching only words half the rows hold
    ("customer") counts for nothing next to one matching a rare order id (`Bm25.idf`).
    Query words no row holds count as unmatched (as rare as can be), so a query mostly
    made of words the store never saw trusts its few matches less. Term frequency and
    length are left out: memories are short, a word rarely occurs twice in one. One
    text's coverage is `Bm25.coverage` over that text alone, weighed by *bm25*'s IDF
    (`Bm25.coverage_of`, which gives it without building a model of the one text).

    >>> corpus = Bm25(["order:NW-88213 status: delivered", "order:NW-1 status: lost", "order:NW-2 status: lost"])
    >>> lexical_coverage("order NW-88213", "order:NW-88213 status: delivered", corpus)
    1.0
    >>> lexical_coverage("order NW-88213", "order:NW-1 status: lost", corpus)  # "order", "nw": in every row
    0.0
    """
    return float(bm25.coverage_of(query, [text])[0])
