"""Which server holds a key: rendezvous (highest random weight) hashing, bit for bit as pymemcache's `HashClient`.

`HashClient` names each server `"host:port"` (`server_name`), scores every server for a key as
`murmur3_32(f"{name}-{key}", seed=0)` and picks the highest score; on a tie the larger name (as a string) wins.
`server_for(key, servers)` is that choice as a pure function, so an application using this client, one using
`pymemcache.client.hash.HashClient` with its defaults, and the simulator's sharded pool agree on every key.

pymemcache's murmur3 takes each character's code point modulo 256 (`ord(c) & 0xFF`), which is what
`_codes` reproduces for keys outside latin-1; for ASCII keys (the only keys memcached's text protocol accepts
by default) it is the plain MurmurHash3 x86_32 of the key's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["murmur3_32", "server_for", "server_name"]

_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def _codes(data: str) -> bytes:
    try:
        return data.encode("latin-1")
    except UnicodeEncodeError:
        return bytes(ord(c) & 0xFF for c in data)


def murmur3_32(data: str | bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 (public domain, Austin Appleby) as pymemcache computes it for a str."""
    raw = _codes(data) if isinstance(data, str) else data
    length = len(raw)
    h1 = seed & _MASK
    end = length & ~3
    for k1 in struct.unpack_from(f"<{end >> 2}I", raw):
        k1 = (k1 * _C1) & _MASK
        k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
        k1 = (k1 * _C2) & _MASK
        h1 ^= k1
        h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
        h1 = (h1 * 5 + 0xE6546B64) & _MASK
    tail = length & 3
    if tail:
        k1 = 0
        if tail == 3:
            k1 = raw[end + 2] << 16
        if tail >= 2:
            k1 |= raw[end + 1] << 8
        k1 |= raw[end]
        k1 = (k1 * _C1) & _MASK
        k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
        k1 = (k1 * _C2) & _MASK
        h1 ^= k1
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1


def server_name(server: str | tuple[str, int]) -> str:
    """The name HashClient gives a server: `"host:port"` (port 11211 when absent, IPv6 brackets dropped)."""
    if isinstance(server, tuple):
        host, port = server
        return f"{host}:{port}"
    if server.startswith(("unix:", "/")):
        raise ValueError(f"server {server!r}: UNIX sockets are not supported (give host:port)")
    if ":" not in server or server.endswith("]"):
        host, port = server, 11211
    else:
        host, _, port_text = server.rpartition(":")
        port = int(port_text)
    return f"{host.strip('[]')}:{port}"


def _pick(key: str, servers: Sequence[str]) -> str:
    high = -1
    winner = ""
    for node in servers:
        score = murmur3_32(f"{node}-{key}")
        if score > high:
            high, winner = score, node
        elif score == high:
            winner = max(node, winner)
    return winner


def server_for(key: str, servers: Sequence[str | tuple[str, int]]) -> str:
    """The server (as `server_name` names it) that pymemcache's HashClient picks for `key` among `servers`."""
    names = [server_name(s) for s in servers]
    if not names:
        raise ValueError("server_for: no servers")
    return _pick(key, names)


@lru_cache(maxsize=1 << 16)
def _cached_index(key: str, names: tuple[str, ...]) -> int:
    return names.index(_pick(key, names))


def server_index(key: str, names: tuple[str, ...]) -> int:
    """Index in `names` (already `server_name`d) of the server for `key`; memoized for hot keys."""
    return _cached_index(key, names)
