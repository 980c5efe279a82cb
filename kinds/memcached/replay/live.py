"""memcached's live replay driver (`control.replay_trace.ReplayDriver`): the trace's multigets sent through
tailtune-client (`tailtune_client.Client`, the very client applications run), one client per config — batching or
Chisel with its levels — each request dealt to one arm's client, in one open-loop stream.

**Scratch keys.** Each arm reads keys of its own, `tailtune:replay:<run>:<arm>:<digest of the key>:<n>`, with the
smallest n whose server (the client's rendezvous hash over the addresses it connects to) is the server the
original key lives on in production (the hash over the deployment's `connection.servers`): every request touches
the same servers, in the same batches, as it would. Each scratch key holds a value of its key's size (unknown: the
median; past `TAILTUNE_REPLAY_MAX_VALUE_BYTES` or memcached's 1 MiB item: cut, said so), bytes derived from the key,
so every answer is checked: a value read that is not the one written, or a key missing, counts as a `wrong`
answer (an error; a key missing is also counted apart, `missing_answers`). Keys are written with an expiry
(`TAILTUNE_REPLAY_LEASE_S` past the replay's planned end, the rest of the load's own time included) and deleted
afterwards, on a failure or a stop too: a replay that died leaves keys that expire by themselves (memcached cannot
list keys to sweep).

**Memory.** Before anything is written, each server's `stats` (`limit_maxbytes`, `bytes`) and `stats settings`
(its slab classes: `growth_factor`, `chunk_size`, `slab_chunk_max`; `item_size_max`) are read, and the pages the
scratch items of all arms take in its slab classes are counted (`scratch_memory`): a scratch over
`TAILTUNE_REPLAY_MEMCACHED_MAX_FILL` of what the server has free (its `limit_maxbytes` less the bytes its items
hold) is refused (`ScratchTooLarge`, naming the server, the figures and the longest `--duration` whose keys fit),
since memcached would evict scratch keys (or the server's own items) to hold it and the answers would be wrong. The
servers' `evictions`, `evicted_unfetched` and `expired_unfetched` are read before the load and after the run:
`cluster.servers` has each server's figures and their deltas, `cluster.evictions` the total, and a note says when
missing answers came with evictions (the servers' memory, not the config); a run stopped for its errors says so too.

**Configs.** `batching` and `chisel` (`elephant_threshold`, `merge`, `split_keys`); a Chisel config without its
levels runs Chisel's own analyzer's for the trace (kvsim's, as the model does). Every arm is client-side, so all
run concurrently.

**The run.** The scheduling thread sends request i at start + offset_i / rate_scale into a pool of
`min(TAILTUNE_REPLAY_MAX_IN_FLIGHT, 128)` threads, each calling `get_many`; a request's latency is from its intended
time to its answer, the lag from its intended time to the moment a thread starts it. The warm-up (the trace's first
`warmup_s`) is sent once before each measured run, unmeasured. Every server connection goes to an address the
egress rules resolved and checked. Interference: an arm's reads are the queries its client sent (`stats()`), its
extra ones those beyond one per server a request touches (Chisel's elephant chunks).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from base.errors import BadInputError
from control.egress import EgressRefused, parse_server
from control.kind import Target
from control.replay_trace import (
    Arm,
    ArmMeasure,
    DriverRun,
    Progress,
    ReplayJob,
    ReplayRefused,
    ReplayTrace,
    latency_blocks,
)

__all__ = ["PREFIX", "MemcachedReplay", "ScratchTooLarge", "ServerMemory", "scratch_key", "scratch_memory"]

PREFIX: Final = "tailtune:replay:"
#: memcached's default largest item (1 MiB) less room for the key and the item header.
ITEM_MAX: Final = 1024 * 1024 - 1024
POOL_THREADS: Final = 128
CHISEL_KEYS: Final = ("elephant_threshold", "merge", "split_keys")
#: memcached's slab page (`slab_page_size`, 1 MiB) and its item header with the CAS value and the flags.
PAGE: Final = 1024 * 1024
ITEM_HEADER: Final = 48 + 8 + 4
#: The counters read before the load and after the run (their deltas are in the report).
COUNTERS: Final = ("evictions", "evicted_unfetched", "expired_unfetched")
MIB: Final = 1024 * 1024


class ScratchTooLarge(ReplayRefused):
    """The scratch keys would not fit a server's memory (module doc § Memory); `fitting_duration_s` is the longest
    `--duration` whose keys fit (0: not even the first request's)."""

    def __init__(self, message: str, *, hint: str, fitting_duration_s: float) -> None:
        super().__init__(message, hint=hint)
        self.fitting_duration_s = fitting_duration_s


class _Aborted(ReplayRefused):
    """The run stopped for its errors (TAILTUNE_REPLAY_MAX_ERROR_FRACTION)."""


@dataclass(frozen=True)
class ServerMemory:
    """What one server's `stats` and `stats settings` say of its memory (module doc § Memory)."""

    name: str
    limit_maxbytes: int
    bytes: int
    curr_items: int
    growth_factor: float
    chunk_size: int
    slab_chunk_max: int
    item_size_max: int
    counters: dict[str, int]

    def classes(self) -> npt.NDArray[np.int64]:
        """The chunk size of each slab class, smallest first (memcached's `slabs_init` without `-o slab_sizes`)."""
        size, out = 48 + self.chunk_size, list[int]()
        while size < self.slab_chunk_max / self.growth_factor and len(out) < 62:
            size += -size % 8
            out.append(size)
            size = int(size * self.growth_factor)
        out.append(self.slab_chunk_max)
        return np.asarray(out, dtype=np.int64)

    @property
    def free(self) -> int:
        return max(0, self.limit_maxbytes - self.bytes)


def _number(stats: Mapping[Any, Any], key: str, default: float) -> float:
    value = stats.get(key.encode(), stats.get(key))
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _read_memory(names: Sequence[str], addresses: Sequence[tuple[str, int]], timeout: float) -> list[ServerMemory]:
    from pymemcache.client.base import Client as Raw

    out = []
    for name, address in zip(names, addresses, strict=True):
        raw = Raw(address, connect_timeout=timeout, timeout=timeout)
        try:
            stats, settings = raw.stats(), raw.stats("settings")
        except Exception as exc:
            raise ReplayRefused(f"memcached {name}: its stats could not be read ({type(exc).__name__}: {exc})"
                                ) from None
        finally:
            raw.close()
        out.append(ServerMemory(
            name=name, limit_maxbytes=int(_number(stats, "limit_maxbytes", 64 * MIB)),
            bytes=int(_number(stats, "bytes", 0)), curr_items=int(_number(stats, "curr_items", 0)),
            growth_factor=max(1.01, _number(settings, "growth_factor", 1.25)),
            chunk_size=int(_number(settings, "chunk_size", 48)),
            slab_chunk_max=int(_number(settings, "slab_chunk_max", PAGE / 2)),
            item_size_max=int(_number(settings, "item_size_max", PAGE)),
            counters={c: int(_number(stats, c, 0)) for c in COUNTERS}))
    return out


def _counters(addresses: Sequence[tuple[str, int]], timeout: float) -> list[dict[str, int] | None]:
    """Each server's COUNTERS now (None: not read)."""
    from pymemcache.client.base import Client as Raw

    out: list[dict[str, int] | None] = []
    for address in addresses:
        try:
            raw = Raw(address, connect_timeout=timeout, timeout=timeout)
            try:
                stats = raw.stats()
            finally:
                raw.close()
            out.append({c: int(_number(stats, c, 0)) for c in COUNTERS})
        except Exception:
            out.append(None)
    return out


def scratch_memory(trace: ReplayTrace, sizes: Mapping[str, int], home: Mapping[str, int],
                   memory: Sequence[ServerMemory], arms: int, key_bytes: int, fill: float
                   ) -> tuple[list[int], int]:
    """The bytes (whole slab pages) the scratch of all `arms` takes on each server, and how many of the trace's
    first requests have keys that fit every server's budget (`fill` of its free memory; `trace.requests`: all)."""
    first: dict[str, int] = {}
    for i in range(trace.requests):
        for k in trace.request_keys(i):
            first.setdefault(k, i)
    keys = list(first)
    at = np.asarray([first[k] for k in keys], dtype=np.int64)
    server = np.asarray([home[k] for k in keys], dtype=np.int64)
    total = ITEM_HEADER + key_bytes + 1 + np.asarray([sizes[k] for k in keys], dtype=np.int64) + 2
    need_at: list[Any] = []
    for s, mem in enumerate(memory):
        classes = mem.classes()
        per_page = np.maximum(1, PAGE // classes)
        mine = server == s
        big = total[mine] > mem.slab_chunk_max
        # an item past the largest chunk is chained over chunks of the largest class
        cls = np.where(big, classes.size - 1, np.minimum(np.searchsorted(classes, total[mine]), classes.size - 1))
        units = np.where(big, -(-total[mine] // mem.slab_chunk_max), 1) * arms
        need_at.append((at[mine], cls, units, per_page))

    def need(n: int) -> list[int]:
        out = []
        for when, cls, units, per_page in need_at:
            counts = np.bincount(cls[when < n], weights=units[when < n], minlength=per_page.size)
            out.append(int(np.sum(np.ceil(counts / per_page))) * PAGE)
        return out

    budget = [int(fill * m.free) for m in memory]
    whole = need(trace.requests)
    if all(b <= c for b, c in zip(whole, budget, strict=True)):
        return whole, trace.requests
    lo, hi = 0, trace.requests  # need(lo) fits, need(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if all(b <= c for b, c in zip(need(mid), budget, strict=True)):
            lo = mid
        else:
            hi = mid
    return whole, lo


def scratch_key(run_id: str, arm: int, key: str, server: int, names: tuple[str, ...]) -> str:
    """Arm `arm`'s scratch key of `key`, on server `server` of `names` (the client's hash; module doc)."""
    from tailtune_client.hashing import server_index

    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    for n in range(100_000):
        k = f"{PREFIX}{run_id}:{arm}:{digest}:{n}"
        if server_index(k, names) == server:
            return k
    raise ReplayRefused(f"no scratch key of {key!r} lands on server {names[server]}")


def _value(key: str, size: int) -> bytes:
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


class MemcachedReplay:
    """The live replay of one memcached deployment (module doc)."""

    one_key_per_request = False

    def __init__(self, target: Target) -> None:
        self.target = target

    def default_config(self) -> dict[str, Any]:
        return {"policy": "batching", "params": {}}

    def modes(self, arms: Sequence[Arm]) -> list[str]:
        for a in arms:
            if a.config.get("policy") not in ("batching", "chisel"):
                raise ReplayRefused(f"arm {a.name}: memcached replays batching or chisel, not "
                                    f"{a.config.get('policy')!r}")
        return ["concurrent"] * len(arms)

    def cluster_settings(self, arm: Arm) -> dict[str, Any]:
        """None: every memcached setting is the client's (one client per arm)."""
        return {}

    # --- the pool -----------------------------------------------------------------------------------------------
    def _servers(self) -> tuple[tuple[str, ...], list[tuple[str, int]]]:
        """(the deployment's server names as the client hashes them, the checked (address, port) of each)."""
        from tailtune_client.hashing import server_name

        names, addresses = [], []
        for server in self.target.connection.get("servers") or []:
            try:
                host, port = parse_server(str(server))
                address = self.target.egress.resolve(host, port)[0]
            except (EgressRefused, BadInputError) as exc:
                raise ReplayRefused(f"memcached {server}: {exc}") from None
            names.append(server_name(str(server)))
            addresses.append((address, port))
        if not names:
            raise ReplayRefused(f"deployment {self.target.name!r} names no connection.servers")
        return tuple(names), addresses

    def complete(self, arms: Sequence[Arm], trace: ReplayTrace, rate_scale: float, seed: int,
                 notes: list[str]) -> list[Arm]:
        """A Chisel config without its levels gets Chisel's analyzer's levels for the trace (kvsim's, as the model
        finds them)."""
        from simulation import memcached

        out, levels = [], None
        for a in arms:
            params = {k: int(v) if isinstance(v, float) and v.is_integer() else v
                      for k, v in (a.config.get("params") or {}).items()}
            if a.config.get("policy") == "chisel" and any(k not in params for k in CHISEL_KEYS):
                if levels is None:
                    prepared = memcached.prepare(trace.to_table(rate_scale), source="the replayed requests")
                    found = memcached.replay(prepared, memcached.MemcachedDeployment(), "chisel", {}, seed).params
                    levels = {k: int(v) for k, v in dict(found).items()}
                filled = {k: levels[k] for k in CHISEL_KEYS if k not in params}
                params.update(filled)
                notes.append(f"arm {a.name}: chisel without {', '.join(filled)} runs Chisel's analyzer's levels for "
                             f"the trace ({', '.join(f'{k}={v}' for k, v in filled.items())})")
            out.append(Arm(a.name, a.spec, {"policy": a.config.get("policy"), "params": params}, a.mode))
        return out

    # --- the run ------------------------------------------------------------------------------------------------
    def run(self, job: ReplayJob, *, stop: threading.Event, progress: Progress) -> DriverRun:
        from tailtune_client import __version__ as client_version
        from tailtune_client.hashing import server_index, server_name
        from tailtune_client.memcached import Client

        progress("connect", 0.0)
        names, addresses = self._servers()
        client_names = tuple(server_name(a) for a in addresses)
        notes: list[str] = []
        configs = {a.name: dict(a.config) for a in job.arms}
        trace, s = job.trace, job.settings
        distinct = sorted(set(trace.keys))
        if len(distinct) > s.replay_max_keys:
            raise ReplayRefused(f"the replay reads {len(distinct):,} distinct keys: over TAILTUNE_REPLAY_MAX_KEYS "
                                f"({s.replay_max_keys:,})")
        memory = _read_memory(names, addresses, s.discover_timeout_s)
        item_max = min([ITEM_MAX, *(m.item_size_max - 1024 for m in memory)])
        sizes = _sizes(trace.keys, trace.value_sizes.tolist(), max(1, min(s.replay_max_value_bytes, item_max)), notes)
        home = {k: server_index(k, names) for k in distinct}
        key_bytes = len(scratch_key(job.run_id, len(job.arms) - 1, distinct[0], home[distinct[0]], client_names)) + 2
        scratch_bytes = self._check_fit(job, sizes, home, memory, key_bytes)
        scratch = [{k: scratch_key(job.run_id, a, k, home[k], client_names) for k in distinct}
                   for a in range(len(job.arms))]
        clients = [Client(addresses, config=configs[a.name], poll_interval=0, on_server_error="raise",
                          connect_timeout=s.discover_timeout_s, timeout=2.0, request_timeout=4.0)
                   for a in job.arms]
        planned = (job.warmup_s + job.duration_s) * job.repeats
        before = _counters(addresses, s.discover_timeout_s)
        try:
            progress("load", 0.05)
            total, done, t_load = len(distinct) * len(clients), 0, time.monotonic()
            for a, client in enumerate(clients):
                values = {scratch[a][k]: _value(scratch[a][k], sizes[k]) for k in distinct}
                for chunk in _chunks(list(values.items()), 500):
                    if stop.is_set():
                        raise ReplayRefused("the replay was stopped")
                    # the rest of the load (projected from its pace so far, twice over) is before the run too
                    pace = (time.monotonic() - t_load) / done if done else 1e-4
                    expire = int(min(s.replay_lease_s + planned + 60 + 2 * pace * (total - done), 30 * 86_400 - 1))
                    failed = client.set_many(dict(chunk), expire=expire)
                    if failed:
                        raise ReplayRefused(f"loading the scratch keys failed: {len(failed)} not stored")
                    done += len(chunk)
                progress("load", 0.05 + 0.2 * (a + 1) / len(clients))
            queries0 = [_queries(c) for c in clients]
            runs = []
            try:
                for r in range(job.repeats):
                    runs.append(_send(job, r, clients, scratch, sizes, stop,
                                      lambda f, r=r: progress("replay", 0.25 + 0.7 * (r + f) / job.repeats)))
            except _Aborted as exc:
                lost = _evicted(_delta(before, _counters(addresses, s.discover_timeout_s)))
                if lost:
                    raise ReplayRefused(
                        f"{exc} — the servers evicted or expired {lost:,} items meanwhile: the missing answers are "
                        "memcached's memory, not the config", hint="give the servers more memory (memcached -m), "
                        "replay a shorter --duration, or keep other writers off the servers while it runs") from None
                raise
            queries = [_queries(c) - q for c, q in zip(clients, queries0, strict=True)]
            after = _counters(addresses, s.discover_timeout_s)
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    client.close()
            _delete(addresses, [k for arm in scratch for k in arm.values()])
        progress("cleanup", 0.97)
        measured = _measured(job, runs, queries, home, configs, notes, f"tailtune-client-{client_version}")
        return _with_memory(measured, memory, scratch_bytes, _delta(before, after))

    def _check_fit(self, job: ReplayJob, sizes: Mapping[str, int], home: Mapping[str, int],
                   memory: Sequence[ServerMemory], key_bytes: int) -> list[int]:
        """Each server's scratch bytes, or ScratchTooLarge (module doc § Memory)."""
        s, trace = job.settings, job.trace
        arms = len(job.arms)
        need, fits = scratch_memory(trace, sizes, home, memory, arms, key_bytes, s.replay_memcached_max_fill)
        if fits >= trace.requests:
            return need
        over = max(range(len(memory)), key=lambda i: need[i] / max(1, memory[i].free))
        m = memory[over]
        fitting = float(trace.offsets_us[fits]) / 1e6 / job.rate_scale if fits else 0.0
        keys = sum(1 for h in home.values() if h == over)
        shorter = "replay fewer arms, or "
        if fitting >= job.block_s:
            shorter = f"replay --duration {math.floor(fitting * 10) / 10:g} s or less (its keys fit), fewer arms, or "
        raise ScratchTooLarge(
            f"the scratch keys do not fit memcached {m.name}: {arms} arms × {keys:,} keys take about "
            f"{need[over] / MIB:.1f} MiB of its slab pages, over TAILTUNE_REPLAY_MEMCACHED_MAX_FILL "
            f"({s.replay_memcached_max_fill:g}) of its free memory (limit_maxbytes {m.limit_maxbytes / MIB:.1f} MiB, "
            f"{m.bytes / MIB:.1f} MiB held by its {m.curr_items:,} items): memcached would evict scratch keys (or its "
            "own items) and the answers would be wrong; nothing was written",
            hint=f"{shorter}give the servers more memory (memcached -m)",
            fitting_duration_s=fitting)


def _delta(before: Sequence[dict[str, int] | None], after: Sequence[dict[str, int] | None]
           ) -> list[dict[str, int] | None]:
    return [None if b is None or a is None else {c: max(0, a[c] - b[c]) for c in COUNTERS}
            for b, a in zip(before, after, strict=True)]


def _evicted(deltas: Sequence[dict[str, int] | None]) -> int:
    return sum(d["evictions"] + d["expired_unfetched"] for d in deltas if d is not None)


def _with_memory(run: DriverRun, memory: Sequence[ServerMemory], scratch_bytes: Sequence[int],
                 deltas: Sequence[dict[str, int] | None]) -> DriverRun:
    """`run` with each server's memory figures and counter deltas in `cluster`, and a note on evictions."""
    from dataclasses import replace

    cluster = dict(run.cluster)
    cluster["servers"] = {m.name: {"limit_maxbytes": m.limit_maxbytes, "bytes_before": m.bytes,
                                   "items_before": m.curr_items, "scratch_bytes": need, "counted": d is not None,
                                   **(d or {c: 0 for c in COUNTERS})}
                          for m, need, d in zip(memory, scratch_bytes, deltas, strict=True)}
    evictions = sum(d["evictions"] for d in deltas if d is not None)
    expired = sum(d["expired_unfetched"] for d in deltas if d is not None)
    cluster["evictions"] = evictions
    missing = sum(int(a.get("missing_answers", 0)) for a in cluster.get("arms", {}).values())
    notes = list(run.notes)
    if evictions or expired:
        notes.append(f"the servers evicted {evictions:,} items and expired {expired:,} unread during the replay: a "
                     f"missing answer ({missing:,} of them) after an eviction is the servers' memory, not the config")
    elif missing:
        notes.append(f"{missing:,} answers were missing with no eviction or expiry counted on the servers")
    if any(d is None for d in deltas):
        notes.append("some servers' eviction counters could not be read after the run")
    return replace(run, cluster=cluster, notes=tuple(notes))


def _sizes(keys: Sequence[str], sizes: Sequence[int], cap: int, notes: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in zip(keys, sizes, strict=True):
        if v >= 0 or k not in out:
            out[k] = int(v)
    known = [v for v in out.values() if v >= 0]
    median = int(statistics.median(known)) if known else 100
    if len(known) < len(out):
        notes.append(f"{len(out) - len(known)} keys without a value size were written at the median size, "
                     f"{median} bytes")
    cut = sum(1 for v in out.values() if v > cap)
    if cut:
        notes.append(f"{cut} values larger than {cap} bytes (TAILTUNE_REPLAY_MAX_VALUE_BYTES or memcached's item "
                     "limit) were written at that size")
    return {k: min(v if v >= 0 else median, cap) for k, v in out.items()}


def _chunks(items: list[Any], n: int) -> list[list[Any]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


def _queries(client: Any) -> int:
    return int(sum(s["queries"] for s in client.stats()["servers"].values()))


def _delete(addresses: Sequence[tuple[str, int]], keys: Sequence[str]) -> None:
    """Delete `keys` on every server (each holds its own; a key absent elsewhere is a no-op)."""
    from pymemcache.client.base import Client as Raw

    for address in addresses:
        with contextlib.suppress(Exception):
            raw = Raw(address, connect_timeout=2.0, timeout=5.0)
            try:
                for chunk in _chunks(list(keys), 500):
                    raw.delete_many(chunk, noreply=False)
            finally:
                raw.close()


class _Run:
    """One repeat's per-request figures (measured requests only), written by the pool's threads at their own
    index."""

    def __init__(self, n: int) -> None:
        self.latency_us = np.zeros(n)
        self.lag_us = np.zeros(n)
        self.outcome = np.zeros(n, dtype=np.int8)  # 0 not sent, 1 ok, 2 error, 3 timeout, 4 wrong, 5 missing
        self.lock = threading.Lock()
        self.completed = 0
        self.failed = 0
        self.abort: str | None = None
        self.cpu_s = 0.0
        self.send_s = 0.0
        self.sent = 0


def _send(job: ReplayJob, repeat: int, clients: Sequence[Any], scratch: Sequence[Mapping[str, str]],
          sizes: Mapping[str, int], stop: threading.Event, progress: Any) -> _Run:
    """The warm-up, then the measured run of `repeat`, open loop (module doc)."""
    from tailtune_client.memcached import ServerError

    trace, s = job.trace, job.settings
    dealt = job.dealt[repeat]
    warm = trace.sent_before(job.warmup_s, job.rate_scale)
    ns_per_us = 1000.0 / job.rate_scale
    threads = min(s.replay_max_in_flight, POOL_THREADS)

    def one(i: int, intended: int, out: _Run | None) -> None:
        started = time.perf_counter_ns()
        a = int(dealt[i])
        wanted = [scratch[a][k] for k in trace.request_keys(i)]
        outcome = 1
        try:
            got = clients[a].get_many(wanted)
            if any(k not in got for k in wanted):
                outcome = 5
            elif any(got.get(k) != _value(k, sizes[orig]) for k, orig in zip(wanted, trace.request_keys(i),
                                                                             strict=True)):
                outcome = 4
        except ServerError as exc:
            outcome = 3 if all("no answer" in e for e in exc.errors.values()) else 2
        except Exception:
            outcome = 2
        done = time.perf_counter_ns()
        if out is None:
            return
        out.latency_us[i] = max(1.0, (done - intended) / 1e3)
        out.lag_us[i] = max(0.0, (started - intended) / 1e3)
        out.outcome[i] = outcome
        with out.lock:
            out.completed += 1
            out.failed += outcome != 1
            if out.abort is None and out.completed >= s.replay_abort_after \
                    and out.failed > s.replay_max_error_fraction * out.completed:
                out.abort = (f"{out.failed} of {out.completed} requests failed, timed out or read a wrong or "
                             f"missing value, over the limit of {s.replay_max_error_fraction:g}")

    def send(end: int, out: _Run | None) -> None:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tailtune-replay") as pool:
            start = time.perf_counter_ns()
            last_progress = 0.0
            for i in range(end):
                intended = start + int(trace.offsets_us[i] * ns_per_us)
                while True:
                    left = intended - time.perf_counter_ns()
                    if left <= 0:
                        break
                    time.sleep(min(left / 1e9, 0.05) if left > 200_000 else 0)
                if stop.is_set():
                    raise ReplayRefused("the replay was stopped")
                if out is not None and out.abort is not None:
                    break
                pool.submit(one, i, intended, out)
                if out is not None:
                    out.sent += 1
                    now = time.monotonic()
                    if now - last_progress > 0.5:
                        progress(i / max(end, 1))
                        last_progress = now
            if out is not None:
                out.send_s = (time.perf_counter_ns() - start) / 1e9

    if warm:
        send(warm, None)
    run = _Run(trace.requests)
    cpu0 = time.process_time()
    send(trace.requests, run)
    run.cpu_s = time.process_time() - cpu0
    if run.abort is not None:
        raise _Aborted(f"the replay stopped: {run.abort} (TAILTUNE_REPLAY_MAX_ERROR_FRACTION)")
    return run


def _measured(job: ReplayJob, runs: Sequence[_Run], queries: Sequence[int], home: Mapping[str, int],
              configs: dict[str, dict[str, Any]], notes: list[str], generator: str) -> DriverRun:
    trace = job.trace
    n = len(job.arms)
    blocks = job.blocks
    t = trace.offsets_us / job.rate_scale / 1e6
    block = np.floor(t / job.block_s).astype(np.int64)
    lat, arm, blk = [], [], []
    for r, run in enumerate(runs):
        done = run.outcome > 0
        lat.append(run.latency_us[done])
        arm.append(np.asarray(job.dealt[r], dtype=np.int64)[done])
        blk.append(np.where(block[done] < blocks, block[done] + r * blocks, -1))
    hists = latency_blocks(np.concatenate(lat), np.concatenate(arm), np.concatenate(blk), n,
                           blocks * len(runs), job.block_s)
    batches = np.zeros(n, dtype=np.int64)
    keys_read = np.zeros(n, dtype=np.int64)
    for r in range(len(runs)):
        for i in range(trace.requests):
            if runs[r].outcome[i] > 0:
                keys = trace.request_keys(i)
                batches[job.dealt[r][i]] += len({home[k] for k in keys})
                keys_read[job.dealt[r][i]] += len(keys)
    measures = []
    cluster: dict[str, Any] = {"source": "tailtune-client stats (queries per arm)", "arms": {}}
    for a, arm_ in enumerate(job.arms):
        outcomes = np.concatenate([run.outcome[np.asarray(job.dealt[r]) == a] for r, run in enumerate(runs)])
        sent = int(np.count_nonzero(outcomes))
        warm_batches = _warm_batches(job, a, home)
        expected = int(batches[a]) + warm_batches  # the warm-up's queries are in the clients' counts too
        extra = max(0, queries[a] - expected)
        missing = int(np.count_nonzero(outcomes == 5))
        wrong = int(np.count_nonzero(outcomes == 4)) + missing
        cluster["arms"][arm_.name] = {"requests": sent, "queries": queries[a], "server_batches": expected,
                                      "extra_queries": extra, "answers_checked": sent, "wrong_answers": wrong,
                                      "missing_answers": missing}
        # The arm's reads are the keys its requests read, each once: Chisel's chunks (`extra_queries`) split a
        # request's keys, they read none twice, so they are no extra reads for `interference` (a note says what
        # their per-query work is).
        measures.append(ArmMeasure(arm_.name, hists[a], sent, int(np.count_nonzero(outcomes == 2)),
                                   int(np.count_nonzero(outcomes == 3)), wrong,
                                   int(keys_read[a]), 0))
        if extra:
            notes.append(f"{arm_.name}'s {extra} queries beyond one per server a request touches (its chunks) read "
                         "no key twice: they are not counted as interference, though their per-query work loaded "
                         "the servers every arm shared")
    lags = np.concatenate([run.lag_us[run.outcome > 0] for run in runs]) / 1e3
    sent_total = sum(run.sent for run in runs)
    send = sum(run.send_s for run in runs)
    span = float(t[-1]) if trace.requests else 0.0
    return DriverRun(
        generator=generator,
        arms=tuple(measures),
        intended_per_s=trace.requests / span if span > 0 else 0.0,
        achieved_per_s=sent_total / send if send > 0 else 0.0,
        cpu_us_per_request=sum(run.cpu_s for run in runs) * 1e6 / sent_total if sent_total else 0.0,
        lag_ms={"p50": float(np.percentile(lags, 50)) if lags.size else 0.0,
                "p99": float(np.percentile(lags, 99)) if lags.size else 0.0,
                "max": float(lags.max()) if lags.size else 0.0},
        configs=configs,
        cluster=cluster,
        notes=tuple(notes),
    )


def _warm_batches(job: ReplayJob, a: int, home: Mapping[str, int]) -> int:
    warm = job.trace.sent_before(job.warmup_s, job.rate_scale)
    total = 0
    for r in range(job.repeats):
        for i in range(warm):
            if job.dealt[r][i] == a:
                total += len({home[k] for k in job.trace.request_keys(i)})
    return total

