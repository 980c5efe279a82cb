"""Profile a real memcached: fit P_S = a + b·K and N_S = c + d·K (µs) for multigets of K keys.

Chisel's analyzer needs the server processing time P_S and the network time N_S of a query of K keys (the
paper instruments memcached for P_S and takes N_S = T_S − P_S). Here, without patching memcached:

- T_S(K) is the round-trip time of one `get k1 .. kK` measured by the client at low load (sequential queries;
  the median over repetitions, so scheduler hiccups do not bend the fit);
- P_S(K) is the server's CPU time per query: the change of memcached's own `rusage_user + rusage_system`
  over a run of repetitions divided by their count;
- N_S(K) = T_S(K) − P_S(K) (network, kernel and client library together).

Both lines are least-squares fits over the profiled K with their R². `running_memcached()` starts (and always
stops) a private memcached on a free 127.0.0.1 port for code and tests that need one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tailtune.base.errors import TailtuneError

__all__ = [
    "DEFAULT_KS",
    "LinearFit",
    "MemcachedProfile",
    "MemcachedServer",
    "fit_line",
    "free_port",
    "populate",
    "profile_address",
    "profile_memcached",
    "running_memcached",
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


@dataclass(frozen=True, slots=True)
class MemcachedServer:
    host: str
    port: int
    threads: int


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_memcached(
    threads: int = 4, memory_mb: int = 64, timeout_s: float = 10.0
) -> Iterator[MemcachedServer]:
    """Start a private memcached (Debian package) on a free 127.0.0.1 port; always stop it on exit."""
    exe = shutil.which("memcached")
    if exe is None:
        raise TailtuneError("memcached is not installed", hint="apt-get install -y memcached")
    port = free_port()
    rundir = Path(tempfile.mkdtemp(prefix="tailtune-memcached-"))
    os.chmod(rundir, 0o777)  # the pidfile's folder must be writable by the memcache user
    cmd = [exe, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", str(threads), "-m", str(memory_mb)]
    cmd += ["-P", str(rundir / "memcached.pid")]
    if os.geteuid() == 0:
        cmd += ["-u", "memcache"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise TailtuneError(f"memcached exited at start (code {proc.returncode}): {err.strip()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise TailtuneError(f"memcached did not listen on 127.0.0.1:{port} within {timeout_s} s")
            time.sleep(0.05)
        yield MemcachedServer("127.0.0.1", port, threads)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
        shutil.rmtree(rundir, ignore_errors=True)


def _client(server: MemcachedServer) -> Any:
    from pymemcache.client.base import Client

    return Client((server.host, server.port), connect_timeout=2.0, timeout=5.0, no_delay=True)


def populate(server: MemcachedServer, n_keys: int, value_size: int, key_prefix: str = KEY_PREFIX) -> list[str]:
    """Store `n_keys` keys of `value_size` bytes (acknowledged sets) named `key_prefix`0.. and return them."""
    keys = [f"{key_prefix}{i}" for i in range(n_keys)]
    value = b"v" * value_size
    client = _client(server)
    try:
        for start in range(0, n_keys, 100):
            failed = client.set_many({k: value for k in keys[start : start + 100]}, noreply=False)
            if failed:
                raise TailtuneError(f"memcached refused to store {len(failed)} keys (e.g. {failed[0]})")
    finally:
        client.close()
    return keys


def _server_cpu_s(client: Any) -> float:
    stats = client.stats()
    return float(stats[b"rusage_user"]) + float(stats[b"rusage_system"])


def profile_memcached(
    server: MemcachedServer,
    ks: Sequence[int] = DEFAULT_KS,
    reps: int = 50,
    value_size: int = 100,
    warmup: int = 5,
    key_prefix: str = KEY_PREFIX,
) -> MemcachedProfile:
    """Measure T_S and P_S for every K in `ks` (`reps` sequential multigets each, on keys `key_prefix`0..) and
    fit both lines."""
    if not ks or min(ks) < 1:
        raise ValueError("ks: needs multiget sizes >= 1")
    if reps < 1:
        raise ValueError("reps: must be >= 1")
    keys = populate(server, max(ks), value_size, key_prefix)
    client = _client(server)
    totals: list[float] = []
    procs: list[float] = []
    try:
        for k in ks:
            batch = keys[:k]
            for _ in range(warmup):
                client.get_many(batch)
            cpu0 = _server_cpu_s(client)
            times = np.empty(reps)
            for r in range(reps):
                t0 = time.perf_counter()
                got = client.get_many(batch)
                times[r] = time.perf_counter() - t0
                if len(got) != k:
                    raise TailtuneError(f"memcached returned {len(got)} of {k} keys (evicted?)")
            cpu1 = _server_cpu_s(client)
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
) -> MemcachedProfile:
    """Profile the memcached already running at `host`:`port` on a scratch key range (`key_prefix`0 ..
    `key_prefix`{max(ks) - 1}), which is deleted afterwards whatever happens."""
    server = MemcachedServer(host, port, threads=0)  # threads: not needed to profile
    try:
        return profile_memcached(server, ks, reps=reps, value_size=value_size, key_prefix=key_prefix)
    finally:
        client = _client(server)
        try:
            client.delete_many([f"{key_prefix}{i}" for i in range(max(ks, default=0))], noreply=False)
        finally:
            client.close()
