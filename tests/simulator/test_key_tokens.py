"""Ring tokens straight from the Arrow key column equal `kvsim.tokens_for_keys` of the keys as Python strings."""

from __future__ import annotations

import kvsim
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.layout import key_tokens

KEYS = ["a", "bb", "ключ", "", "x" * 100, "a", "🙂"]


def _expected(keys: list[str]) -> np.ndarray:
    return kvsim.tokens_for_keys(np.array(keys, dtype=object))


@pytest.mark.parametrize(
    "column",
    [
        pa.chunked_array([pa.array(KEYS)]),
        pa.chunked_array([pa.array(KEYS[:3]), pa.array(KEYS[3:])]),  # several chunks
        pa.chunked_array([pa.array(KEYS, pa.large_string())]),
        pa.chunked_array([pa.array(KEYS).dictionary_encode()]),  # Parquet reads text keys as dictionaries too
    ],
)
def test_every_arrow_spelling_of_text_keys(column: pa.ChunkedArray) -> None:
    assert np.array_equal(key_tokens(pa.table({"key": column})), _expected(KEYS))


def test_a_sliced_table_hashes_its_own_rows() -> None:
    table = pa.concat_tables([pa.table({"key": pa.array(KEYS)})] * 2).slice(3, 7)
    assert np.array_equal(key_tokens(table), _expected((KEYS * 2)[3:10]))


def test_integer_keys_hash_their_eight_bytes() -> None:
    ids = np.array([0, 1, 2**40, 7], dtype=np.int64)
    assert np.array_equal(key_tokens(pa.table({"key": pa.array(ids)})), kvsim.tokens_for_keys(ids))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=40))
def test_any_text(keys: list[str]) -> None:
    assert np.array_equal(key_tokens(pa.table({"key": pa.array(keys)})), _expected(keys))


def test_a_trailing_nul_is_part_of_the_key() -> None:
    keys = ["a\x00", "a"]
    tokens = _expected(keys)
    assert tokens[0] != tokens[1]
    assert np.array_equal(key_tokens(pa.table({"key": pa.array(keys)})), tokens)
