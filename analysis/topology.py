"""The hash ring that maps a key to its replica servers — the one definition shared with the Rust simulator.

The ring (documented in docs/analysis.md, "Hash ring"; the simulator implements the same function):

1. **Token of a key** — MurmurHash3 x64_128 (seed 0) of the key's UTF-8 bytes as Cassandra computes it
   (Austin Appleby's reference, except that the tail bytes — the last `len % 16` — are read as signed
   bytes, so a tail byte >= 0x80 is sign-extended); the token is the first 64-bit half read as a signed
   int64, and `-2**63` is mapped to `2**63 - 1` — Cassandra's `Murmur3Partitioner` token.
2. **Server tokens** — `servers` servers, one token each, evenly spaced:
   `token_i = -2**63 + i * (2**64 // servers)` (Cassandra's recommended `initial_token` layout, no vnodes).
3. **Primary** — server `i` owns the range `(token_{i-1}, token_i]`; a key goes to the first server whose
   token is `>=` the key's token, wrapping round to server 0 past the last token.
4. **Replicas** — the primary and the next `replication - 1` servers clockwise (`SimpleStrategy`):
   `[(p + j) % servers for j in range(replication)]`.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache

__all__ = ["murmur3_x64_128", "primary_server", "ring", "server_tokens", "token"]

_MASK64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_MIN_TOKEN = -(1 << 63)
_MAX_TOKEN = (1 << 63) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def _tail_word(tail: bytes, signed: bool) -> int:
    k = 0
    for i, b in enumerate(tail):
        k ^= ((b - 256 if signed and b >= 128 else b) << (8 * i)) & _MASK64
    return k


def murmur3_x64_128(data: bytes, seed: int = 0, *, signed_tail: bool = False) -> tuple[int, int]:
    """MurmurHash3_x64_128 of `data`: the two unsigned 64-bit halves (h1, h2) of the reference implementation
    (`signed_tail`: Cassandra's, which sign-extends the tail bytes)."""
    n = len(data)
    h1 = seed & _MASK64
    h2 = seed & _MASK64
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        k1 = (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[16 * nblocks :]
    t = len(tail)
    if t > 8:
        k2 = _tail_word(tail[8:], signed_tail)
        k2 = (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 ^= k2
    if t > 0:
        k1 = _tail_word(tail[:8], signed_tail)
        k1 = (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 ^= k1
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def token(key: str) -> int:
    """The ring token of `key`: signed first half of MurmurHash3 x64_128 (Cassandra's Murmur3Partitioner)."""
    h1, _ = murmur3_x64_128(key.encode("utf-8"), signed_tail=True)
    signed = h1 - (1 << 64) if h1 >= (1 << 63) else h1
    return _MAX_TOKEN if signed == _MIN_TOKEN else signed


@lru_cache(maxsize=64)
def server_tokens(servers: int) -> tuple[int, ...]:
    """The evenly spaced tokens of `servers` servers, ascending (server i has the i-th token)."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    step = (1 << 64) // servers
    return tuple(_MIN_TOKEN + i * step for i in range(servers))


def primary_server(key: str, servers: int) -> int:
    """Index of the server owning `key`: first server with token >= the key's token (wrapping to 0)."""
    tokens = server_tokens(servers)
    i = bisect_left(tokens, token(key))
    return 0 if i == servers else i


def ring(key: str, servers: int, replication: int) -> list[int]:
    """The replica servers of `key`, primary first, then the next `replication - 1` servers clockwise."""
    if not 1 <= replication <= servers:
        raise ValueError(f"replication must be in 1..servers ({servers}), got {replication}")
    p = primary_server(key, servers)
    return [(p + j) % servers for j in range(replication)]
