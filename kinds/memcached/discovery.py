"""Discovery of a memcached pool: each server's `stats` and `stats settings` → `worker_threads` (its `-t`) and the
readings (`item_size_max`, ...); with `profile_servers` the profiler (`analysis.memcached_profile.profile_address`)
times multigets of 1..200 keys on a scratch key range it deletes afterwards → `client_overhead` (µs per request).

What a server reports is not trusted: the `stats` replies are read within `TAILTUNE_MEMCACHED_STATS_MAX_BYTES` /
`_MAX_LINES` and the timeout (`base.linereader.read_stats`), and every value goes through `control.discovery`'s
checks.
"""

from __future__ import annotations

import math
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from base.errors import BadInputError, TailtuneError
from base.linereader import STATS_CAPS, LineCaps, WireLimit, read_stats
from control.discovery import DIGITS_MAX, checked, integer, shown
from control.egress import Egress, EgressRefused, parse_server
from control.kind import Discovered, DiscoveryFailed

__all__ = ["discover_memcached"]

KIND = "memcached"


def _plain(text: str) -> Any:
    """A `stats` value as a reading: an integer or a finite number when it reads as one (at most 40 digits),
    else the text."""
    if len(text) <= DIGITS_MAX:
        for cast in (int, float):
            try:
                value = cast(text)
            except ValueError:
                continue
            if not isinstance(value, float) or math.isfinite(value):
                return value
    return text


def _server_stats(server: str, address: str, port: int, timeout_s: float,
                  caps: LineCaps) -> tuple[dict[str, str], dict[str, str]]:
    """`stats` and `stats settings` of one server, each reply within `caps` and `timeout_s`."""
    hint = f"check the server is up and answers within TAILTUNE_DISCOVER_TIMEOUT_S ({timeout_s:g} s)"
    try:
        sock = socket.create_connection((address, port), timeout=timeout_s)
    except ConnectionRefusedError:
        raise DiscoveryFailed(
            f"memcached {server}: connection refused — no server listens there: start it, or fix connection.servers"
        ) from None
    except OSError as exc:
        raise DiscoveryFailed(f"memcached {server}: {type(exc).__name__}: {exc}: {hint}") from None
    with sock:
        try:
            return (read_stats(sock, server, timeout_s=timeout_s, caps=caps),
                    read_stats(sock, server, timeout_s=timeout_s, caps=caps, what="stats settings"))
        except WireLimit as exc:
            if exc.permanent:
                raise DiscoveryFailed(f"{exc}: is it a memcached server? (TAILTUNE_MEMCACHED_STATS_MAX_BYTES, "
                                      "TAILTUNE_MEMCACHED_STATS_MAX_LINES)", permanent=True) from None
            raise DiscoveryFailed(f"{exc}: {hint}") from None
        except OSError as exc:
            raise DiscoveryFailed(f"memcached {server}: {type(exc).__name__}: {exc}: {hint}") from None


def discover_memcached(
    connection: Mapping[str, Any],
    *,
    egress: Egress,
    timeout_s: float,
    profile_servers: bool = False,
    profile_reps: int = 20,
    caps: LineCaps = STATS_CAPS,
    log: Callable[[str], None] = lambda _: None,
) -> Discovered:
    """Read every server's `stats` and `stats settings` (each reply within `caps`); with `profile_servers` also
    profile the first server on a scratch key range (written, then deleted). Raises DiscoveryFailed."""
    from pymemcache.exceptions import MemcacheError

    found = Discovered(KIND, time.time())
    servers: dict[str, dict[str, Any]] = {}
    addresses: dict[str, tuple[str, int]] = {}
    threads: dict[str, int] = {}
    for server in connection.get("servers", []):
        try:
            host, port = parse_server(str(server), "connection.servers", "servers")
        except BadInputError as exc:  # a server the API would not have accepted (written straight into the DB)
            raise DiscoveryFailed(f"memcached {str(server)[:300]!r}: {exc}", permanent=True) from None
        try:
            address = egress.resolve(host, port)[0]
        except EgressRefused as exc:
            raise DiscoveryFailed(f"memcached {server}: {exc}", permanent=exc.permanent) from None
        addresses[str(server)] = (address, port)
        raw_stats, raw_settings = _server_stats(str(server), address, port, timeout_s, caps)
        stats = {k: _plain(v) for k, v in raw_stats.items()}
        settings = {k: _plain(v) for k, v in raw_settings.items()}
        raw_threads = raw_stats.get("threads", raw_settings.get("num_threads"))
        if raw_threads is not None:
            where = f"memcached {server}: stats"
            threads[str(server)] = checked("worker_threads", integer(raw_threads, where, "threads"), where,
                                           "threads")
        servers[str(server)] = {
            "version": stats.get("version"),
            "threads": stats.get("threads", settings.get("num_threads")),
            "item_size_max": settings.get("item_size_max"),
            "maxconns": settings.get("maxconns"),
            "limit_maxbytes": stats.get("limit_maxbytes", settings.get("maxbytes")),
            "stats": stats,
            "settings": settings,
        }
        log(f"memcached {server}: version {shown(stats.get('version'))}, {shown(raw_threads)} threads")
    found.readings["servers"] = servers
    found.readings["how"] = "memcached `stats` and `stats settings` of every server"
    if threads:
        common = Counter(threads.values()).most_common(1)[0][0]
        first = next(s for s, t in threads.items() if t == common)
        found.put("worker_threads", common, f"memcached `stats` threads (its -t) of {first}"
                  + ("" if len(threads) == 1 else f" and the {len(threads) - 1} other server(s) that agree"))
        odd = {s: t for s, t in threads.items() if t != common}
        if odd:
            found.notes.append("worker threads differ between servers: "
                               + ", ".join(f"{s} {t}" for s, t in odd.items()))
    else:
        found.missing.append("worker_threads")
    if profile_servers and addresses:
        from analysis.memcached_profile import profile_address

        server, (address, port) = next(iter(addresses.items()))
        prefix = f"tailtune:discover:{uuid.uuid4().hex[:12]}:"
        log(f"memcached {server}: profiling multigets on scratch keys {prefix}* (deleted afterwards)")
        try:
            profile = profile_address(address, port, key_prefix=prefix, reps=profile_reps, caps=caps)
        except (OSError, MemcacheError, TailtuneError) as exc:
            raise DiscoveryFailed(
                f"memcached {server}: profiling failed ({type(exc).__name__}: {exc}): check the server has room "
                "for 200 keys of 100 bytes, or discover without --profile-servers"
            ) from None
        # the per-request part of a round trip: the smallest multigets' median less their keys' share (the slope
        # of round trip against keys per request); the fit's intercept alone is noisier (it can come out < 0)
        k0 = profile.ks[0]
        us = checked("client_overhead_us", round(max(0.0, profile.total_us[0] - profile.total.slope * k0), 3),
                     f"memcached {server}: the profile", "client_overhead.us")
        found.put("client_overhead", {"us": us},
                  f"analysis.memcached_profile on {server}: the per-request client/server overhead, i.e. the median "
                  f"round trip of a {k0}-key multiget less {k0} × the per-key slope of round trip against keys per "
                  f"request (K = {k0}..{profile.ks[-1]}, {profile_reps} sequential multigets each), on scratch keys "
                  "deleted afterwards")
        found.readings["profile"] = {"server": server, "key_prefix": prefix, "keys_removed": True,
                                     **profile.to_dict()}
    return found
