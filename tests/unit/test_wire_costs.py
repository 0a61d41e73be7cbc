"""The fast cost paths of `wire` and `search_budget.excerpt` give exactly what costing every
character one by one gives (the definitions they replace, kept here as oracles)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge import wire
from agent_knowledge.knowledge.search_budget import _anchor, excerpt

# Quotes, backslashes, control characters, 2-, 3- and 4-byte characters, lone surrogates.
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from('ab "\\\n\t\x00\x1f\x7fé中😀'),
        st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
    ),
    max_size=300,
)


def _costs(text: str) -> list[int]:
    return [wire.char_cost(char) for char in text]


def _reference_prefix(text: str, budget: int) -> int:
    total, length = 0, 0
    for cost in _costs(text):
        if total + cost > budget:
            break
        total, length = total + cost, length + 1
    return length


def _reference_excerpt(text: str, terms: tuple[str, ...], budget: int) -> str:
    """Grow one character at a time from the term, right then left by turns, summing each
    character's cost as it is taken (no prefix sums, no window)."""
    if budget <= 0:
        return ""
    costs = _costs(text)
    if sum(costs) <= budget:
        return text
    left, right = _anchor(text, terms)
    spent = sum(costs[left:right])
    if spent > budget:
        right, spent = left, 0
    stuck: set[str] = set()
    side = "right"
    while len(stuck) < 2:
        if side not in stuck:
            taken = right if side == "right" else left - 1
            if 0 <= taken < len(text) and spent + costs[taken] <= budget:
                spent += costs[taken]
                right, left = (right + 1, left) if side == "right" else (right, left - 1)
            else:
                stuck.add(side)
        side = "left" if side == "right" else "right"
    return text[left:right]


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_text_cost_is_the_sum_of_character_costs_and_what_dumps_sends(text):
    assert wire.text_cost(text) == sum(_costs(text))
    assert wire.prefix_costs(text)[-1] == sum(_costs(text))
    if not any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert (
            wire.text_cost(text) == wire.string_size(text) - 2 == len(json.dumps(text, ensure_ascii=False).encode()) - 2
        )


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(min_value=-2, max_value=400))
def test_longest_prefix_within_matches_character_by_character(text, budget):
    assert wire.longest_prefix_within(text, budget) == _reference_prefix(text, budget)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(st.sampled_from(["a", "中", "b a", "😀", "zz", ""]), max_size=3), st.integers(0, 120))
def test_excerpt_of_a_window_equals_the_excerpt_of_the_whole_text(text, terms, budget):
    assert excerpt(text, tuple(terms), budget) == _reference_excerpt(text, tuple(terms), budget)


def test_long_text_far_from_the_term_is_not_costed(monkeypatch):
    # 100,000 costly characters either side of the term: only the stretch within the budget of
    # the term is costed character by character, and the excerpt is the one around it.
    costed = []
    original = wire.char_cost

    def counting(char: str) -> int:
        costed.append(char)
        return original(char)

    monkeypatch.setattr(wire, "char_cost", counting)
    text = "中" * 100_000 + " okapi " + "中" * 100_000
    assert excerpt(text, ("okapi",), 40).count("okapi") == 1
    assert 0 < len(costed) <= 2 * 40 + len("okapi")
