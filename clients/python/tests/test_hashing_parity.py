"""server_for is pymemcache's HashClient placement, bit for bit (and on real servers)."""

from __future__ import annotations

import random
import string

from pymemcache.client.base import Client as PmClient
from pymemcache.client.base import normalize_server_spec
from pymemcache.client.hash import HashClient
from pymemcache.client.murmur3 import murmur3_32 as pm_murmur3_32
from pymemcache.client.rendezvous import RendezvousHash
from ttc_support import Memcached

from tailtune_client.hashing import murmur3_32, server_for, server_name
from tailtune_client.memcached import Client


def _keys(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + ":_-./|{}"
    out = [f"user:{i}" for i in range(n // 2)]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 120))) for _ in range(n - len(out))]
    return out


def test_murmur3_matches_pymemcache_on_any_text() -> None:
    rng = random.Random(7)
    alphabet = string.printable + "éüß€漢字😀"
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 64)))
        for seed in (0, 1, 0xDEADBEEF):
            assert murmur3_32(s, seed) == pm_murmur3_32(s, seed), (s, seed)


def test_server_for_matches_rendezvous_hash_on_many_keys() -> None:
    for servers in (
        ["127.0.0.1:11211", "127.0.0.1:11212", "127.0.0.1:11213"],
        [f"10.0.0.{i}:11211" for i in range(1, 8)],
        ["cache-a:11211", "cache-b:11211"],
        ["only:1"],
    ):
        ring = RendezvousHash(list(servers))
        for key in _keys(6000, seed=len(servers)):
            assert server_for(key, servers) == ring.get_node(key), (key, servers)


def test_server_for_matches_hash_client_with_its_server_specs() -> None:
    specs: list[str | tuple[str, int]] = ["127.0.0.1:11300", "localhost", ("10.1.2.3", 11999), "[::1]:11400"]
    hc = HashClient([normalize_server_spec(s) for s in specs])
    assert sorted(server_name(s) for s in specs) == sorted(hc.clients)
    for key in _keys(3000, seed=11):
        host, port = hc._get_client(key).server
        assert server_for(key, specs) == f"{host}:{port}", key


def test_keys_land_where_hash_client_reads_them(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"parity:{i}" for i in range(300)]
    with Client(addrs, config={"memcached_client": {"mode": "batching"}}, poll_interval=0) as client:
        assert client.set_many({k: k.encode() for k in keys}) == []
    singles = {a: PmClient(normalize_server_spec(a)) for a in addrs}
    try:
        for k in keys:
            home = server_for(k, addrs)
            for a, c in singles.items():
                assert (c.get(k) == k.encode()) == (a == home), (k, a, home)
    finally:
        for c in singles.values():
            c.close()
    hc = HashClient([normalize_server_spec(a) for a in addrs])
    try:
        assert hc.get_many(keys) == {k: k.encode() for k in keys}
    finally:
        hc.close()
