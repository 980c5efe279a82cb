from __future__ import annotations

import pytest

from analysis.topology import murmur3_x64_128, primary_server, ring, server_tokens, token


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def test_murmur3_matches_reference_vectors() -> None:
    # Reference values of MurmurHash3_x64_128 (seed 0), as published for the `mmh3` package (hash64/hash128).
    h1, h2 = murmur3_x64_128(b"foo")
    assert (_signed(h1), _signed(h2)) == (-2129773440516405919, 9128664383759220103)
    assert (h2 << 64) | h1 == 168394135621993849475852668931176482145
    assert murmur3_x64_128(b"") == (0, 0)


def test_murmur3_covers_every_tail_length() -> None:
    # 0..33 bytes exercise the block loop and all 15 tail lengths; every hash must differ.
    hashes = {murmur3_x64_128(bytes(range(n))) for n in range(34)}
    assert len(hashes) == 34


def test_token_is_signed_first_half() -> None:
    assert token("foo") == -2129773440516405919


def test_server_tokens_evenly_spaced() -> None:
    assert server_tokens(4) == (-(1 << 63), -(1 << 62), 0, 1 << 62)
    with pytest.raises(ValueError):
        server_tokens(0)


def test_primary_is_first_token_at_or_above_key_token() -> None:
    # token("foo") = -2129773440516405919 lies in (-2**62, 0] → server 2 of 4 (tokens -2**63, -2**62, 0, 2**62)
    assert primary_server("foo", 4) == 2
    for key in ("a", "b", "user:1", "x" * 40):
        t = token(key)
        tokens = server_tokens(7)
        expected = next((i for i, st in enumerate(tokens) if st >= t), 0)
        assert primary_server(key, 7) == expected


def test_ring_is_primary_then_next_servers_clockwise_with_wrap() -> None:
    assert ring("foo", 4, 3) == [2, 3, 0]
    assert ring("foo", 4, 1) == [2]
    assert sorted(ring("foo", 4, 4)) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        ring("foo", 4, 5)


def test_simulator_ring_tokens_agree() -> None:
    kvsim = pytest.importorskip("kvsim")
    if not hasattr(kvsim, "tokens_for_keys"):
        pytest.skip("this kvsim build has no tokens_for_keys")
    keys = ["foo", "", "a", "user:12345", "x" * 40, "ü-non-ascii-head", "é", "ключ", "x" * 17 + "é", "🙂" * 5]
    assert [int(t) for t in kvsim.tokens_for_keys(keys)] == [token(k) for k in keys]


def test_tokens_are_cassandras_for_non_ascii_tails() -> None:
    # the DataStax driver's Murmur3Token.hash_fn is Cassandra's hash (tail bytes read signed)
    from cassandra.metadata import Murmur3Token

    keys = ["é", "ключ", "x" * 17 + "é", "🙂" * 5, "abc", "ü" * 9]
    assert [token(k) for k in keys] == [Murmur3Token.hash_fn(k.encode()) for k in keys]
    assert murmur3_x64_128("é".encode())[0] != murmur3_x64_128("é".encode(), signed_tail=True)[0]
