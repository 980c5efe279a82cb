"""Profile a real memcached: fit P_S = a + b·K and N_S = c + d·K (µs) for multigets of K keys.

Chisel's analyzer needs the server processing time P_S and the network time N_S of a query of K keys (the
paper instruments memcached for P_S and takes N_S = T_S − P_S). Here, without patching memcached:

- T_S(K) is the round-trip time of one `get k1 .. kK` measured by the client at low load (sequential queries;
  the median over repetitions, so scheduler hiccups do not bend the fit);
- P_S(K) is the server's CPU time per query: the change of memcached's own `rusage_user + rusage_system`
  over a run of repetitions divided by their count;
- N_S(K) = T_S(K) − P_S(K) (network, kernel and client library together).

Both lines are least-squares fits over the profiled K with their R². The profiler starts no server: it profiles
the memcached at the host and port it is given (it stores keys `tt:k:0..` there). memcached's CPU time counts
every client's work, so P_S is only the profiled queries' cost on a server nobody else is using.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from base.errors import TailtuneError
from base.linereader import STATS_CAPS, LineCaps, read_stats

__all__ = [
    "DEFAULT_KS",
    "LinearFit",
    "MemcachedProfile",
    "fit_line",
    "populate",
    "profile_address",
    "profile_memcached",
]

DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 120, 140, 160, 180, 200)
KEY_PREFIX = "tt:k:"


@dataclass(frozen=True, slots=True)
class LinearFit:
    """y = intercept + slope·K, with the coefficient of determination of the fit."""

    intercept: float
    slope: float
    r2: float

    def at(self, k: float) -> float:
        return self.intercept + self.slope * k


def fit_line(ks: Sequence[float], ys: Sequence[float]) -> LinearFit:
    """Ordinary least squares of ys on ks (needs two distinct K)."""
    x = np.asarray(ks, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError("fit_line: needs at least two distinct K")
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(float(intercept), float(slope), r2)


@dataclass(frozen=True, slots=True)
class MemcachedProfile:
    """Measured profile: P_S fit (a, b), N_S fit (c, d), the total T_S fit, and the raw medians per K."""

    processing: LinearFit
    network: LinearFit
    total: LinearFit
    ks: tuple[int, ...]
    total_us: tuple[float, ...]
    processing_us: tuple[float, ...]
    value_size: int

    def coefficients(self) -> tuple[float, float, float, float]:
        """(a, b, c, d), clipped at 0, as `kvsim.chisel.ServiceProfile` takes them."""
        p, n = self.processing, self.network
        return (max(0.0, p.intercept), max(0.0, p.slope), max(0.0, n.intercept), max(0.0, n.slope))

    def to_dict(self) -> dict[str, Any]:
        a, b, c, d = self.coefficients()
        return {
            "a": a,
            "b": b,
            "c": c,
            "d": d,
            "r2_processing": self.processing.r2,
            "r2_network": self.network.r2,
            "r2_total": self.total.r2,
            "total_intercept_us": self.total.intercept,
            "total_slope_us": self.total.slope,
            "value_size": self.value_size,
            "ks": list(self.ks),
            "total_us": list(self.total_us),
            "processing_us": list(self.processing_us),
        }


def _client(host: str, port: int) -> Any:
    from pymemcache.client.base import Client

    return Client((host, port), connect_timeout=2.0, timeout=5.0, no_delay=True)


def populate(host: str, port: int, n_keys: int, value_size: int, key_prefix: str = KEY_PREFIX) -> list[str]:
    """Store `n_keys` keys of `value_size` bytes (acknowledged sets) named `key_prefix`0.. and return them."""
    keys = [f"{key_prefix}{i}" for i in range(n_keys)]
    value = b"v" * value_size
    client = _client(host, port)
    try:
        for start in range(0, n_keys, 100):
            try:
                failed = client.set_many({k: value for k in keys[start : start + 100]}, noreply=False)
            except OSError as exc:
                raise TailtuneError(f"memcached at {host}:{port}: {exc.strerror or exc}") from exc
            if failed:
                raise TailtuneError(f"memcached refused to store {len(failed)} keys (e.g. {failed[0]})")
    finally:
        client.close()
    return keys


def _server_cpu_s(host: str, port: int, caps: LineCaps = STATS_CAPS) -> float:
    """The server's CPU seconds so far (`rusage_user` + `rusage_system` of `stats`), read within `caps` and a
    5 s deadline (`base.linereader.read_stats`): a server that streams an endless reply costs no more."""
    label = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=5.0) as sock:
            stats = read_stats(sock, label, timeout_s=5.0, caps=caps)
    except OSError as exc:
        raise TailtuneError(f"memcached at {label}: stats: {exc.strerror or exc}") from exc
    try:
        cpu = float(stats["rusage_user"]) + float(stats["rusage_system"])
    except (KeyError, ValueError):
        raise TailtuneError(f"memcached at {label}: stats: field 'rusage_user'/'rusage_system': missing or not a "
                            "number: is it a memcached server?") from None
    if not math.isfinite(cpu) or cpu < 0:
        raise TailtuneError(f"memcached at {label}: stats: field 'rusage_user'/'rusage_system': {cpu} is not a "
                            "CPU time")
    return cpu


def profile_memcached(
    host: str,
    port: int,
    ks: Sequence[int] = DEFAULT_KS,
    reps: int = 50,
    value_size: int = 100,
    warmup: int = 5,
    key_prefix: str = KEY_PREFIX,
    caps: LineCaps = STATS_CAPS,
) -> MemcachedProfile:
    """Measure T_S and P_S of the memcached at `host`:`port` for every K in `ks` (`reps` sequential multigets
    each, on keys `key_prefix`0.. after storing `max(ks)` of them) and fit both lines; its `stats` replies are
    read within `caps`."""
    if not ks or min(ks) < 1:
        raise ValueError("ks: needs multiget sizes >= 1")
    if reps < 1:
        raise ValueError("reps: must be >= 1")
    keys = populate(host, port, max(ks), value_size, key_prefix)
    client = _client(host, port)
    totals: list[float] = []
    procs: list[float] = []
    try:
        for k in ks:
            batch = keys[:k]
            for _ in range(warmup):
                client.get_many(batch)
            cpu0 = _server_cpu_s(host, port, caps)
            times = np.empty(reps)
            for r in range(reps):
                t0 = time.perf_counter()
                got = client.get_many(batch)
                times[r] = time.perf_counter() - t0
                if len(got) != k:
                    raise TailtuneError(f"memcached returned {len(got)} of {k} keys (evicted?)")
            cpu1 = _server_cpu_s(host, port, caps)
            totals.append(float(np.median(times)) * 1e6)
            procs.append(max(0.0, (cpu1 - cpu0) / reps * 1e6))
    finally:
        client.close()
    total = fit_line(ks, totals)
    processing = fit_line(ks, procs)
    network = fit_line(ks, [t - p for t, p in zip(totals, procs, strict=True)])
    return MemcachedProfile(
        processing=processing,
        network=network,
        total=total,
        ks=tuple(int(k) for k in ks),
        total_us=tuple(totals),
        processing_us=tuple(procs),
        value_size=value_size,
    )


def profile_address(
    host: str,
    port: int,
    *,
    key_prefix: str,
    ks: Sequence[int] = DEFAULT_KS,
    reps: int = 50,
    value_size: int = 100,
    caps: LineCaps = STATS_CAPS,
) -> MemcachedProfile:
    """Profile the memcached already running at `host`:`port` on a scratch key range (`key_prefix`0 ..
    `key_prefix`{max(ks) - 1}), which is deleted afterwards whatever happens."""
    try:
        return profile_memcached(host, port, ks, reps=reps, value_size=value_size, key_prefix=key_prefix, caps=caps)
    finally:
        client = _client(host, port)
        try:
            client.delete_many([f"{key_prefix}{i}" for i in range(max(ks, default=0))], noreply=False)
        finally:
            client.close()
