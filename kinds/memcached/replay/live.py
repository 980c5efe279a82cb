"""memcached's live replay driver (`control.replay_trace.ReplayDriver`): the trace's multigets sent through
tailtune-client (`tailtune_client.Client`, the very client applications run), one client per config — batching or
Chisel with its levels — each request dealt to one arm's client, in one open-loop stream.

**Scratch keys.** Each arm reads keys of its own, `tailtune:replay:<run>:<arm>:<digest of the key>:<n>`, with the
smallest n whose server (the client's rendezvous hash over the addresses it connects to) is the server the
original key lives on in production (the hash over the deployment's `connection.servers`): every request touches
the same servers, in the same batches, as it would. Each scratch key holds a value of its key's size (unknown: the
median; past `TAILTUNE_REPLAY_MAX_VALUE_BYTES` or memcached's 1 MiB item: cut, said so), bytes derived from the key,
so every answer is checked: a value read that is not the one written, or a key missing, counts as a `wrong`
answer (an error). Keys are written with an expiry (`TAILTUNE_REPLAY_LEASE_S` past the replay's planned end) and
deleted afterwards, on a failure or a stop too: a replay that died leaves keys that expire by themselves (memcached
cannot list keys to sweep).

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
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import numpy as np

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

__all__ = ["PREFIX", "MemcachedReplay", "scratch_key"]

PREFIX: Final = "tailtune:replay:"
#: memcached's default largest item (1 MiB) less room for the key and the item header.
ITEM_MAX: Final = 1024 * 1024 - 1024
POOL_THREADS: Final = 128
CHISEL_KEYS: Final = ("elephant_threshold", "merge", "split_keys")


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
        sizes = _sizes(trace.keys, trace.value_sizes.tolist(), min(s.replay_max_value_bytes, ITEM_MAX), notes)
        home = {k: server_index(k, names) for k in distinct}
        scratch = [{k: scratch_key(job.run_id, a, k, home[k], client_names) for k in distinct}
                   for a in range(len(job.arms))]
        clients = [Client(addresses, config=configs[a.name], poll_interval=0, on_server_error="raise",
                          connect_timeout=s.discover_timeout_s, timeout=2.0, request_timeout=4.0)
                   for a in job.arms]
        expire = int(s.replay_lease_s + (job.warmup_s + job.duration_s) * job.repeats + 60)
        try:
            progress("load", 0.05)
            for a, client in enumerate(clients):
                values = {scratch[a][k]: _value(scratch[a][k], sizes[k]) for k in distinct}
                for chunk in _chunks(list(values.items()), 500):
                    if stop.is_set():
                        raise ReplayRefused("the replay was stopped")
                    failed = client.set_many(dict(chunk), expire=expire)
                    if failed:
                        raise ReplayRefused(f"loading the scratch keys failed: {len(failed)} not stored")
                progress("load", 0.05 + 0.2 * (a + 1) / len(clients))
            queries0 = [_queries(c) for c in clients]
            runs = []
            for r in range(job.repeats):
                runs.append(_send(job, r, clients, scratch, sizes, stop,
                                  lambda f, r=r: progress("replay", 0.25 + 0.7 * (r + f) / job.repeats)))
            queries = [_queries(c) - q for c, q in zip(clients, queries0, strict=True)]
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    client.close()
            _delete(addresses, [k for arm in scratch for k in arm.values()])
        progress("cleanup", 0.97)
        return _measured(job, runs, queries, home, configs, notes, f"tailtune-client-{client_version}")


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
        self.outcome = np.zeros(n, dtype=np.int8)  # 0 not sent, 1 ok, 2 error, 3 timeout, 4 wrong
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
            if any(got.get(k) != _value(k, sizes[orig]) for k, orig in zip(wanted, trace.request_keys(i),
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
                out.abort = (f"{out.failed} of {out.completed} requests failed, timed out or read a wrong value, "
                             f"over the limit of {s.replay_max_error_fraction:g}")

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
        raise ReplayRefused(f"the replay stopped: {run.abort} (TAILTUNE_REPLAY_MAX_ERROR_FRACTION)")
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
    for r in range(len(runs)):
        for i in range(trace.requests):
            if runs[r].outcome[i] > 0:
                batches[job.dealt[r][i]] += len({home[k] for k in trace.request_keys(i)})
    measures = []
    cluster: dict[str, Any] = {"source": "tailtune-client stats (queries per arm)", "arms": {}}
    for a, arm_ in enumerate(job.arms):
        outcomes = np.concatenate([run.outcome[np.asarray(job.dealt[r]) == a] for r, run in enumerate(runs)])
        sent = int(np.count_nonzero(outcomes))
        warm_batches = _warm_batches(job, a, home)
        expected = int(batches[a]) + warm_batches  # the warm-up's queries are in the clients' counts too
        extra = max(0, queries[a] - expected)
        wrong = int(np.count_nonzero(outcomes == 4))
        cluster["arms"][arm_.name] = {"requests": sent, "queries": queries[a], "server_batches": expected,
                                      "extra_queries": extra, "answers_checked": sent, "wrong_answers": wrong}
        measures.append(ArmMeasure(arm_.name, hists[a], sent, int(np.count_nonzero(outcomes == 2)),
                                   int(np.count_nonzero(outcomes == 3)), wrong,
                                   queries[a], min(extra, queries[a])))
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

