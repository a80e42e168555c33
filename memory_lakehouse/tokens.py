"""Prompt tokens: the one definition of what a text costs in a context budget.

A token is a word piece of the default model's tokenizer (BERT-uncased WordPiece, the
vocabulary in ``data/vocab.txt``), whatever embedder a store runs, so a budget means the
same on every store. Where WordPiece says ``[UNK]`` — an unknown character, or any
word longer than 100 characters, which it gives one ``[UNK]`` (ten million ``x`` would
cost 1) — each character costs one token: a word piece covers at least one character,
so this can only over-count.

Text is tokenized a window of ~4,000 characters at a time, cut at whitespace (where
WordPiece splits anyway), so the cost of a text is the sum of its windows' and `cut`
stops as soon as the budget is spent: fitting a 60 kB value into 800 tokens reads
only the part that fits.

>>> count_tokens("tokenization")
2
>>> count_tokens("x" * 5_000)
5000
>>> cut("the plan is Enterprise Pro", 3)
('the plan is', 3)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .errors import ValidationError

if TYPE_CHECKING:
    import tokenizers

#: Characters tokenized at a time: WordPiece's cost grows faster than linearly on long runs.
WINDOW = 4096
_LONG_RUN = re.compile(r"[A-Za-z0-9]{101,}")


@functools.cache
def _tokenizer() -> tuple[tokenizers.Tokenizer, int]:
    from .embed import _build_tokenizer

    tok = _build_tokenizer(None)
    unk = tok.token_to_id("[UNK]")
    if unk is None:  # the MiniLM vocabulary has one; a tokenizer without it cannot over-count safely
        raise RuntimeError("the word-piece tokenizer has no [UNK] token")
    return tok, unk


def _windows(text: str, start: int, n: int) -> Iterator[tuple[int, str]]:
    """(offset, piece) of ``text[start:n]`` in windows of at most `WINDOW` characters, cut after whitespace."""
    while start < n:
        end = min(n, start + WINDOW)
        if end < n:
            space = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
            if space > start:
                end = space + 1
        yield start, text[start:end]
        start = end


def _segments(text: str) -> Iterator[tuple[int, int, list[int], list[tuple[int, int]]]]:
    """(offset, cost, token ids, offsets) of each tokenized window of *text*, in order.

    A run of more than 100 ASCII letters and digits lies in a word WordPiece would make
    one ``[UNK]``: it is one segment costing its length, without a tokenizer call (ids
    and offsets empty).
    """
    tok, unk = _tokenizer()
    start = 0
    for run in _LONG_RUN.finditer(text):
        yield from _encoded(tok, unk, text, start, run.start())
        yield run.start(), run.end() - run.start(), [], []
        start = run.end()
    yield from _encoded(tok, unk, text, start, len(text))


def _encoded(
    tok: tokenizers.Tokenizer, unk: int, text: str, start: int, end: int
) -> Iterator[tuple[int, int, list[int], list[tuple[int, int]]]]:
    for offset, window in _windows(text, start, end):
        encoding = tok.encode(window, add_special_tokens=False)
        ids, offsets = encoding.ids, encoding.offsets
        cost = len(ids)
        if unk in ids:
            cost += sum(max(0, b - a - 1) for i, (a, b) in zip(ids, offsets, strict=True) if i == unk)
        yield offset, cost, ids, offsets


def _check(text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError("text must be a str", field="text")
    return text


def count_tokens(text: str) -> int:
    """Tokens *text* costs in a prompt budget (see the module docstring)."""
    return sum(cost for _, cost, _, _ in _segments(_check(text)))


def cut(text: str, budget: int) -> tuple[str, int]:
    """The longest prefix of *text* that costs at most *budget* tokens, and its cost.

    The prefix ends at a token boundary, or inside an ``[UNK]`` run (one token per
    character). It is *text* itself when the whole text fits.
    """
    _check(text)
    used = end = 0
    for offset, cost, ids, offsets in _segments(text):
        if used + cost <= budget:  # the whole window fits: no walk over its tokens
            used += cost
            end = offset + (offsets[-1][1] if offsets else cost)
            continue
        if not ids:  # a long run, a token a character: keep the characters that fit
            return text[: offset + budget - used], budget
        _, unk = _tokenizer()
        for token_id, (a, b) in zip(ids, offsets, strict=True):
            piece = max(1, b - a) if token_id == unk else 1
            if used + piece > budget:
                if piece > 1:
                    end, used = offset + a + (budget - used), budget
                return text[:end].rstrip(), used
            used, end = used + piece, offset + b
        return text[:end].rstrip(), used  # not reached: the window's cost is its tokens'
    return text, used


__all__ = ["count_tokens", "cut", "WINDOW"]
