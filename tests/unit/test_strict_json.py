"""agent_knowledge.wire: what RFC 8259 JSON means, and nothing Python adds to it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_knowledge.wire import MAX_DEPTH, JsonRejected, check_tree, loads

# Text without surrogates (hypothesis' default alphabet already excludes category Cs).
finite = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
values = st.recursive(
    finite, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20
)


@given(values, st.booleans())
def test_plain_json_parses_exactly_as_the_json_module_does(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert loads(text) == json.loads(text)


@given(st.dictionaries(st.text(), values, min_size=1, max_size=4), st.data())
def test_a_repeated_key_is_refused_at_any_position_and_depth(obj, data):
    key = data.draw(st.sampled_from(sorted(obj)))
    members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()]
    members.insert(data.draw(st.integers(0, len(members))), f"{json.dumps(key)}: null")
    text = "{" + ", ".join(members) + "}"
    wrapped = data.draw(st.sampled_from(["{}", '{{"outer": [1, {}]}}', "[{}]"])).format(text)
    with pytest.raises(JsonRejected, match="duplicate key"):
        loads(wrapped)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"n": -Infinity}', "1e999", "[-1e400]", "1.8e308"])
def test_non_finite_numbers_are_refused(text):
    with pytest.raises(JsonRejected, match="number"):
        loads(text)


def test_the_largest_finite_float_is_accepted():
    assert loads("1.7976931348623157e308") == 1.7976931348623157e308


@given(st.sampled_from([chr(code) for code in (0xD800, 0xDBFF, 0xDC00, 0xDFFF)]), st.text(max_size=5), st.booleans())
def test_a_lone_surrogate_in_any_string_or_key_is_refused(surrogate, around, as_key):
    text = around + surrogate + around
    document = json.dumps({text: 1} if as_key else {"list": [1, {"value": text}]})
    assert "\\ud" in document  # json.dumps writes the surrogate as an escape, as an attacker would
    with pytest.raises(JsonRejected, match="not valid Unicode"):
        loads(document)


def test_a_surrogate_pair_is_one_character_and_accepted():
    assert loads('"\\ud83d\\ude00"') == "😀"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_depth_is_bounded_without_recursion():
    assert loads(nested(MAX_DEPTH)) is not None
    with pytest.raises(JsonRejected, match=f"deeper than {MAX_DEPTH}"):
        loads(nested(MAX_DEPTH + 1))
    # Deeper than the interpreter's recursion limit: the walk is a loop, so only the parser's own
    # RecursionError can stop it, and callers treat that as "not JSON".
    with pytest.raises(RecursionError):
        loads(nested(100_000))


@given(values)
def test_check_tree_reports_the_depth_of_containers(value):
    def depth(item) -> int:
        if isinstance(item, dict):
            return 1 + max((depth(child) for child in item.values()), default=0)
        if isinstance(item, list):
            return 1 + max((depth(child) for child in item), default=0)
        return 0

    assert check_tree(value, max_depth=1000) == depth(value)


def test_messages_never_repeat_content():
    secret = "secret-value-0123456789"
    for text in (f'{{"{secret}": 1, "{secret}": 2}}', f'{{"{secret}": NaN}}', f'{{"{secret}": "\\ud800"}}'):
        with pytest.raises(JsonRejected) as raised:
            loads(text)
        assert secret not in str(raised.value)


def test_an_integer_of_more_than_100_digits_is_refused_by_name():
    # Python's int() refuses more than 4,300 digits with a plain ValueError, taken for "not JSON".
    assert loads("[" + "9" * 100 + ", -" + "9" * 100 + "]") == [int("9" * 100), -int("9" * 100)]
    for text in ("1" * 101, "-" + "1" * 101, '{"id": ' + "7" * 5000 + "}"):
        with pytest.raises(JsonRejected, match="an integer of more than 100 digits"):
            loads(text)
