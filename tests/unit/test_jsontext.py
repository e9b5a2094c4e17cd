"""``jsontext.loads`` gives what ``json.loads`` gives, value for value and type for type, and fails where it fails;
``jsontext.json_bytes`` writes what ``json.dumps`` writes, read back.

msgspec decodes, and the standard library takes over whatever msgspec refuses. Its rules differ from ``json``'s on
a few inputs (``1e400``, ``NaN``, lone surrogates, UTF-16 bytes); each is pinned below, and hypothesis checks the
rest for any JSON it can write and any text or bytes at all.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from include.core.jsontext import field_reader, json_bytes, loads, sorted_compact


def same(a, b) -> bool:
    """Equal, and of the same types all the way down (1 is not 1.0, -0.0 is not 0.0, NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def outcome(decode, text):
    try:
        return "value", decode(text)
    except RecursionError:
        return "error", RecursionError
    except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        return "error", ValueError


def assert_as_json_does(text) -> None:
    ours, theirs = outcome(loads, text), outcome(json.loads, text)
    assert ours[0] == theirs[0], (text, ours, theirs)
    if ours[0] == "value":
        assert same(ours[1], theirs[1]), (text, ours[1], theirs[1])
    else:
        assert ours[1] is theirs[1], (text, ours, theirs)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats()  # NaN, infinities, -0.0, subnormals
    | st.text(),  # lone surrogates too
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400)
@given(value=json_values, ascii_only=st.booleans())
def test_any_json_the_standard_library_writes_reads_back_the_same(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert_as_json_does(text)
    try:
        encoded = text.encode()
    except UnicodeEncodeError:  # a lone surrogate written raw: no UTF-8 for it
        return
    assert_as_json_does(encoded)


@settings(max_examples=400)
@given(text=st.text(alphabet=st.sampled_from('{}[]",:0123456789.eE+-tnfrulasN\\ \t\nuIy\ud800é')))
def test_any_text_of_json_characters_reads_or_fails_as_json_does(text):
    assert_as_json_does(text)


@settings(max_examples=300)
@given(raw=st.binary(max_size=64))
def test_any_bytes_read_or_fail_as_json_does(raw):
    assert_as_json_does(raw)


@pytest.mark.parametrize(
    "text",
    [
        "1e400",  # json: infinity; msgspec: out of range
        "-1e400",
        "[1e-400]",  # underflows to 0.0 in both
        "NaN",
        "[Infinity, -Infinity]",
        '"\\ud800"',  # a lone surrogate, escaped
        '"\ud800"',  # ... and raw in the text
        '"\\udc00\\ud800"',
        '{"a": 1, "a": 2}',  # the last one wins in both
        "123456789012345678901234567890",  # beyond 64 bits
        "-0",
        "-0.0",
        "1E2",
        "1.0",
        '"\\u0000\\u001f\\u2028"',
        "\ufeff{}",  # a BOM in text: json refuses it
        b"\xef\xbb\xbf{}",  # ... in UTF-8 bytes: json reads it
        '{"a": 1}'.encode("utf-16"),  # json reads UTF-16 and UTF-32 bytes
        '{"a": 1}'.encode("utf-32-le"),
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8: json reads it (surrogatepass)
        b'"\xff"',
        "",
        "  ",
        "[1,]",
        '{"a":1}x',
        "[" * 100_000 + "]" * 100_000,  # nested too deeply for both
    ],
)
def test_inputs_where_msgspec_and_json_disagree_read_as_json_reads_them(text):
    assert_as_json_does(text)


def test_parse_constant_is_used_for_nan_and_infinity():
    def refuse(constant):
        raise ValueError(f"{constant} refused")

    with pytest.raises(ValueError, match="NaN refused"):
        loads('{"x": NaN}', parse_constant=refuse)
    assert loads('{"x": "NaN"}', parse_constant=refuse) == {"x": "NaN"}


answer_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text().filter(lambda t: t.encode("utf-8", "ignore")),
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def plain(value):
    """What ``json.dumps`` then ``json.loads`` make of a value, NaN and the infinities as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@settings(max_examples=400)
@given(value=answer_values)
def test_an_answer_encodes_to_json_that_reads_back_as_the_standard_library_writes_it(value):
    try:
        encoded = json_bytes(value)
    except UnicodeEncodeError:  # a lone surrogate: not UTF-8, for either encoder
        with pytest.raises(UnicodeEncodeError):
            json.dumps(value, ensure_ascii=False).encode()
        return
    assert same(json.loads(encoded), plain(json.loads(json.dumps(value)))), encoded


def test_an_answer_keeps_its_key_order_and_writes_decimals_as_numbers():
    assert json_bytes({"b": 1, "a": [Decimal("1.50"), Decimal("3")]}) == b'{"b":1,"a":[1.50,3]}'


def test_what_msgspec_cannot_encode_is_made_plain_by_the_fallback_first():
    with pytest.raises(TypeError):
        json_bytes({("a", 1): 1})
    assert json_bytes({("a", 1): 1}, fallback=lambda v: {str(k): x for k, x in v.items()}) == b"{\"('a', 1)\":1}"


@settings(max_examples=300)
@given(value=answer_values)
def test_sorted_keys_give_one_spelling_per_value_whatever_the_insertion_order(value):
    """``sort_keys=True`` keys ``validation.py``'s cache of facets found valid: a value must have one spelling."""

    def reversed_keys(item):
        if isinstance(item, dict):
            return {k: reversed_keys(item[k]) for k in reversed(list(item))}
        if isinstance(item, list | tuple):
            return [reversed_keys(v) for v in item]
        return item

    try:
        spelled = json_bytes(value, sort_keys=True)
    except UnicodeEncodeError:
        return
    assert json_bytes(reversed_keys(value), sort_keys=True) == spelled
    assert same(json.loads(spelled), plain(json.loads(json.dumps(value, sort_keys=True))))


def _standard(value) -> tuple[str, object]:
    try:
        return "text", json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as error:
        return "error", type(error)


def _sorted_compact(value) -> tuple[str, object]:
    try:
        return "text", sorted_compact(value)
    except (TypeError, ValueError, RecursionError) as error:
        return "error", type(error)


canonical_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats()  # NaN, infinities, -0.0, 1e+16 and 1e-05 (spelled otherwise by msgspec)
    | st.decimals(allow_nan=False)  # the standard library refuses them
    | st.text(),  # lone surrogates and every character that needs an escape
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4)
    ),  # a key that is not a string too
)


@settings(max_examples=1000)
@given(value=canonical_values)
def test_the_canonical_spelling_is_the_standard_librarys_byte_for_byte_for_any_value(value):
    """An event's dedup key is the SHA-256 of this text: one character apart and every stored event of that shape
    would be stored again as new. ``sorted_compact`` writes it with msgspec where it can; whatever it is given, the
    text (or the error) is ``json.dumps``' own."""
    assert _sorted_compact(value) == _standard(value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": float("nan")},  # msgspec writes null, the standard library NaN
        {"a": [float("inf"), float("-inf")]},
        {"a": 1e16, "b": 1e-05, "c": 1.5e300, "d": 5e-324},  # msgspec writes 1e16, 0.00001 ...
        {"a": -0.0, "b": 0.1},
        {"a": (1, "x")},  # a tuple reads back as a list: not equal, so the standard library writes it
        {"k": "\ud800"},  # msgspec cannot write a lone surrogate
        {"k": '\u2028\x7f\x00\x1f"\\/é😀'},
        {"b": None, "a": [True, False, 10**40, -(2**63) - 1]},
        {"é": 1, "e": 2, "\uffff": 3, "😀": 4, "": 5},  # code-point order, not UTF-16's
        {1: "an integer key"},
        {"a": Decimal("1.5")},  # refused by both, as the standard library refuses it
    ],
)
def test_the_canonical_spelling_of_what_msgspec_writes_otherwise(value):
    assert _sorted_compact(value) == _standard(value)


_read_three = field_reader("schema", "a", "")


def _members_as_json_gives(text) -> dict:
    value = json.loads(text)
    return {name: value.get(name) if isinstance(value, dict) else None for name in ("schema", "a", "")}


@settings(max_examples=400)
@given(
    value=json_values | st.dictionaries(st.sampled_from(["schema", "a", "", "b", "schemas"]), json_values, max_size=5),
    ascii_only=st.booleans(),
)
def test_a_field_reader_gives_the_members_json_gives_of_any_value(value, ascii_only):
    """The named members of an object as ``json.loads`` reads them (None when absent; all None for what is not an
    object), whatever the other members hold: floats beyond a double, NaN, lone surrogates among them."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    ours, theirs = _read_three(text), _members_as_json_gives(text)
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert same(ours[name], theirs[name]), (text, name, ours[name], theirs[name])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"schema": 1, "schema": 2}', {"schema": 2, "a": None, "": None}),  # the last one wins, as in json
        ('{"a": 1e400, "b": [NaN]}', {"schema": None, "a": math.inf, "": None}),  # read by json
        (
            '{"": {"x": "\\ud800"}, "schema": null}',
            {"schema": None, "a": None, "": {"x": "\ud800"}},
        ),  # a lone surrogate
        ("[1, 2]", {"schema": None, "a": None, "": None}),
        ("null", {"schema": None, "a": None, "": None}),
    ],
)
def test_a_field_reader_reads_what_msgspec_refuses_as_json_does(text, expected):
    assert _read_three(text) == expected


@pytest.mark.parametrize("text", ["{", '{"schema": }', "", '{"a": 1} x'])
def test_a_field_reader_refuses_what_is_not_json_as_json_does(text):
    with pytest.raises(json.JSONDecodeError):
        _read_three(text)
