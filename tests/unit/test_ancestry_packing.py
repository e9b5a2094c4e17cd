"""The packed upstream closure (include/lineage/store/ancestry.py): what goes in comes out, in a byte order fixed for
every machine, and a depth limit cuts exactly the pairs beyond it."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from include.lineage.store import ancestry

PAIRS = st.dictionaries(st.integers(1, 2**62), st.integers(0, 10_000), max_size=300).map(lambda d: list(d.items()))


@given(PAIRS)
def test_unpack_returns_every_pair_packed_ordered_by_depth_then_ancestor(pairs):
    assert ancestry.unpack(ancestry.pack(pairs)) == sorted(pairs, key=lambda pair: (pair[1], pair[0]))


@given(PAIRS, st.integers(0, 10_001))
def test_a_depth_limit_keeps_exactly_the_pairs_within_it(pairs, depth):
    assert sorted(ancestry.unpack(ancestry.pack(pairs), depth)) == sorted(p for p in pairs if p[1] <= depth)


@given(PAIRS)
def test_equal_sets_pack_to_equal_bytes_whatever_their_order(pairs):
    assert ancestry.pack(pairs) == ancestry.pack(reversed(pairs))


def test_the_blob_is_little_endian_64_bit_ancestor_depth_pairs():
    blob = ancestry.pack([(7, 2), (3, 0), (5, 1)])
    assert blob == struct.pack("<6q", 3, 0, 5, 1, 7, 2)
    assert ancestry.unpack(memoryview(blob)) == [(3, 0), (5, 1), (7, 2)]  # PostgreSQL's driver gives a memoryview


def test_an_empty_blob_is_no_ancestors():
    assert ancestry.pack([]) == b""
    assert ancestry.unpack(b"", 3) == []
