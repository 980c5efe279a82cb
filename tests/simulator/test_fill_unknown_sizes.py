"""`kvsim.fill_unknown_sizes` and the key codes the Cassandra preparation groups ops by (`simulation.layout.
key_codes`): the same output, bit for bit, as the sort-based implementation they replace (`_sorted_fill`, kept
here verbatim as the reference), on hand-made cases and on random ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

kvsim = pytest.importorskip("kvsim")

from simulation.layout import key_codes, request_layout  # noqa: E402


def _sorted_fill(sizes: Any, keys: Any = None) -> tuple[bytes, float, int, bool]:
    """The former implementation: the first known op of each distinct key through `np.unique` (a sort of the
    keys), `heterogeneous` through a sort of the filled sizes."""
    arr = np.array(sizes, dtype=np.float64, copy=True)
    bad = ~np.isfinite(arr) | (arr < 0)
    known = ~bad
    if keys is not None:
        k = np.asarray(keys)[known]
        _, first = np.unique(k, return_index=True)
        median = float(np.median(arr[known][first]))
    else:
        median = float(np.median(arr[known]))
    arr[bad] = median
    return arr.tobytes(), median, int(bad.sum()), bool(np.unique(arr).size > 1)


def _fill(sizes: Any, keys: Any = None) -> tuple[bytes, float, int, bool]:
    info = kvsim.fill_unknown_sizes(sizes, keys)
    assert info.sizes.dtype == np.float64
    return info.sizes.tobytes(), info.median_bytes, info.unknown, info.heterogeneous


def _codes(keys: list[Any], chunks: int = 1) -> npt.NDArray[np.int32]:
    """`key_codes` of a table whose `key` column is `keys` split into `chunks` chunks."""
    step = max(1, -(-len(keys) // chunks))
    col = pa.chunked_array([keys[i : i + step] for i in range(0, len(keys), step)])
    return key_codes(pa.table({"key": col}))


# Ties (keys a and e share 300 B; b's sizes differ from op to op: its first known one, 50, counts), unknown sizes
# (NaN, negative, infinite), a key whose first op is unknown and a later one known (c: 1000), a key seen only
# with an unknown size (d: not in the median), keys seen again after an unknown op of theirs (a, b).
HAND_SIZES = [np.nan, 300, 50, 900, -1, 300, np.inf, 1000, 300, 70, np.nan, 300, 50]
HAND_KEYS = ["c", "a", "b", "b", "a", "e", "d", "c", "a", "b", "b", "e", "f"]
# distinct keys' first known sizes: a 300, b 50, c 1000, e 300, f 50 → median 300


def test_hand_case_matches_the_sorted_implementation() -> None:
    want = _sorted_fill(HAND_SIZES, HAND_KEYS)
    assert want[1:] == (300.0, 4, True)
    assert _fill(HAND_SIZES, HAND_KEYS) == want  # object keys: the sort path
    for chunks in (1, 2, 5):
        codes = _codes(HAND_KEYS, chunks)
        assert codes.dtype == np.int32
        assert _fill(HAND_SIZES, codes) == want  # dense codes: the linear path
    assert _fill(HAND_SIZES) == _sorted_fill(HAND_SIZES)  # no keys: over ops


def test_even_count_of_keys_averages_the_two_middle_sizes() -> None:
    sizes = [10, 20, np.nan, 40, 10, 30]
    keys = ["w", "x", "w", "y", "z", "x"]  # w 10, x 20, y 40, z 10 → median (10 + 20) / 2 = 15
    want = _sorted_fill(sizes, keys)
    assert want[1] == 15.0
    assert _fill(sizes, keys) == want
    assert _fill(sizes, _codes(keys, 2)) == want


def test_integer_keys_dense_sparse_and_negative_take_the_same_median() -> None:
    sizes = [5, np.nan, 7, 7, 9, 11, np.nan, 5]
    for keys in (
        np.array([3, 3, 1, 0, 2, 1, 0, 4], dtype=np.int64),  # dense: the linear path
        np.array([3, 3, 1, 0, 2, 1, 0, 4], dtype=np.uint32) * 10**6,  # sparse: the sort path
        np.array([-3, -3, 1, 0, 2, 1, 0, 4], dtype=np.int64),  # negative: the sort path
    ):
        assert _fill(sizes, keys) == _sorted_fill(sizes, keys)


def test_all_sizes_equal_after_filling_are_not_heterogeneous() -> None:
    sizes = [100.0, np.nan, 100.0, -0.0, 0.0]
    keys = [1, 2, 1, 3, 4]
    assert _fill(sizes[:3], keys[:3]) == _sorted_fill(sizes[:3], keys[:3])
    assert _fill(sizes[:3], keys[:3])[3] is False
    # -0.0 and 0.0 are one value to both implementations
    assert _fill([0.0, -0.0], [1, 2]) == _sorted_fill([0.0, -0.0], [1, 2])
    assert _fill([0.0, -0.0], [1, 2])[3] is False


def test_no_known_size_is_refused() -> None:
    with pytest.raises(kvsim.ParameterError, match="value_size"):
        kvsim.fill_unknown_sizes([np.nan, -1.0], np.array([0, 1], dtype=np.int32))


def test_key_codes_are_equal_exactly_for_equal_keys_across_chunks() -> None:
    keys = ["k9", "k1", "k9", "k2", "k1", "k3", "k2", "k9"] * 3
    for chunks in (1, 3, 7):
        codes = _codes(keys, chunks)
        pairs = {(k, int(c)) for k, c in zip(keys, codes, strict=True)}
        assert len(pairs) == len(set(keys)) == len(set(codes.tolist()))
    ints = key_codes(pa.table({"key": pa.chunked_array([[7, 10**12], [7, -5, 10**12]])}))
    assert ints.tolist()[0] == ints.tolist()[2] and ints.tolist()[1] == ints.tolist()[4]
    assert len(set(ints.tolist())) == 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 12),
            st.one_of(st.sampled_from([np.nan, -2.0, np.inf]), st.integers(0, 6).map(lambda v: 100.0 * v)),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 4),
)
def test_random_cases_match_the_sorted_implementation(ops: list[tuple[int, float]], chunks: int) -> None:
    keys = [f"key{k}" for k, _ in ops]
    sizes = [s for _, s in ops]
    if not any(np.isfinite(s) and s >= 0 for s in sizes):
        with pytest.raises(kvsim.ParameterError):
            kvsim.fill_unknown_sizes(sizes, _codes(keys, chunks))
        return
    want = _sorted_fill(sizes, keys)
    assert _fill(sizes, keys) == want
    assert _fill(sizes, _codes(keys, chunks)) == want


def test_codes_in_layout_order_match_the_keys_in_layout_order() -> None:
    # requests interleaved in the file: the layout reorders the rows, and the codes are taken in the same order
    table = pa.table({
        "request_id": [2, 1, 2, 1, 3, 3, 1],
        "ts": [0.2, 0.1, 0.2, 0.1, 0.3, 0.3, 0.1],
        "key": ["b", "a", "c", "b", "a", "d", "c"],
        "value_size": [10.0, np.nan, 30.0, 20.0, 40.0, np.nan, 50.0],
    })
    lay = request_layout(table, source="t")
    assert lay.row_order is not None
    rows = np.asarray(table.column("value_size").to_numpy(), dtype=np.float64)
    want = _sorted_fill(lay.take(rows), lay.keys)
    assert _fill(lay.take(rows), lay.take(key_codes(table))) == want
