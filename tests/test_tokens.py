"""A prompt budget is a budget: token counts never under-count, and a long memory is cut, not overflowed."""

from __future__ import annotations

import pytest
from _support import MEMBER, day, examples, fact
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_lakehouse as ml
from memory_lakehouse.tokens import WINDOW, count_tokens, cut


def test_a_word_too_long_for_word_pieces_costs_a_token_a_character():
    assert count_tokens("x" * 10_000_000) == 10_000_000  # WordPiece alone says 1 ([UNK])
    url = "https://example.com/" + "a" * 1998
    assert len(url) == 2018 and count_tokens(url) >= 1998  # WordPiece alone says 10
    assert count_tokens("naïve café " + "é" * 150) >= 150  # non-ASCII long words too


def test_counting_a_text_in_windows_is_counting_it_whole():
    from memory_lakehouse.tokens import _tokenizer

    tok, _ = _tokenizer()
    text = "the refund window is thirty days for orders placed in the US; " * 300
    assert len(text) > 3 * WINDOW
    assert count_tokens(text) == len(tok.encode(text, add_special_tokens=False).ids)


@settings(max_examples=examples(60), deadline=None)
@given(st.text(alphabet=st.sampled_from("ab x1.é€😀-\n"), max_size=400), st.integers(0, 120))
def test_a_cut_costs_at_most_its_budget_and_is_a_prefix(text, budget):
    prefix, cost = cut(text, budget)
    assert text.startswith(prefix) and cost <= budget
    assert count_tokens(prefix) <= cost or count_tokens(prefix) <= budget
    if count_tokens(text) <= budget:
        assert (prefix, cost) == (text, count_tokens(text))


@pytest.fixture
def hstore(tmp_path, clock):
    clock.set(day(2))
    return ml.open(tmp_path / "store", clock=clock, embedder=ml.HashingEmbedder())


@pytest.mark.parametrize("budget", [50, 200, 800])
def test_a_long_memory_is_cut_to_the_budget_and_marked_cut(hstore, budget):
    hstore.write(
        fact("user:42", "notes", "plan " + "detail " * 7_000, day(1), evidence="https://crm.example/42"), by=MEMBER
    )
    block = hstore.context("plan", by=MEMBER, budget_tokens=budget)
    assert count_tokens(block) <= budget
    if budget >= 200:
        [line] = block.split("\n")[1:]
        assert line.endswith("; cut]") and "evidence https://crm.example/42" in line
        assert count_tokens(block) > budget - 20  # the budget is used, not wasted


def test_a_word_of_fifty_thousand_characters_does_not_pass_as_one_token(hstore):
    hstore.write(fact("user:42", "blob", "x" * 50_000, day(1)), by=MEMBER)
    block = hstore.context("blob", by=MEMBER, budget_tokens=50)
    assert count_tokens(block) <= 50 and len(block) < 400
    assert "; cut]" in block  # cut, not dropped: the header and the line's frame leave room for some of it


def test_short_memories_are_whole_and_a_long_one_is_cut_after_them(hstore):
    hstore.write(fact("user:42", "plan", "Enterprise Pro", day(1)), by=MEMBER)
    hstore.write(fact("user:42", "history", "plan changes " * 2_000, day(1)), by=MEMBER)
    block = hstore.context("plan", by=MEMBER, subject="user:42", budget_tokens=300)
    lines = block.split("\n")[1:]
    assert any("Enterprise Pro" in line and "cut]" not in line for line in lines)
    assert count_tokens(block) <= 300
