"""Predicted vs observed on real memcached: a trace replayed through the shipped client (`tailtune_client`) against
several memcached processes on 127.0.0.1 (a sharded pool), and through kvsim's sharded pool on the same deployment.

Per workload (mice-elephant, soundcloud, bimodal profiles): the trace's arrival times are scaled to a target mean
inter-arrival time, then `batching` and chisel at the levels kvsim's analyzer recommends (replica analyzer, the
profile measured on these servers) are replayed open loop, interleaved and repeated. The load is driven from
several processes (each its own `Client`, requests dealt round-robin, a few sender threads each so a slow request
does not hold back later ones); latency counts from the get_many call, the lag behind the scheduled arrival is
kept apart. Every answer is checked (every request answered, every key's value right).

The simulator gets: the servers' profile (`analysis.memcached_profile`, one server), the client's per-query
overhead (median `get_many` of one key through the client minus through a bare pymemcache connection, spaced as
the load's arrivals), the same servers' names (the placement is the client's hash) and `processes ×
connections_per_server` query threads per server. Two predictions: BEFORE, the client work of every query thread
in parallel (`client_cpus` 0, one client process holding all the threads); AFTER, the client host as it runs
here: `processes` client processes, requests dealt round-robin, each with ONE CPU (CPython: one interpreter lock)
serving its threads' per-query overhead and the per-key parse of the responses in turn (`client_cpus` 1,
`client_key_us` = the profile's per-key response slope d, which on loopback is the client library's parsing, so
the wire's per-key term is 0). Both run chisel at the same levels (the analyzer's). Values are 100 bytes whatever
the trace says (the profile's size).

Each load (`--gaps-us`: mean gaps between arrivals) is replayed with the variants interleaved and repeated. The
machine's own noise is measured beside: the load generator's lag (call − scheduled arrival) and, on the idle
machine before each load, the spread of one-key round trips through a bare pymemcache connection.

    .venv/bin/python -m validation.sharded_memcached --out validation/sharded_memcached.md

Not a CI test (minutes, noisy); tests/memcached/test_sharded_validation.py runs it on tiny inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

WORKLOADS = ("mice-elephant", "soundcloud", "bimodal")
VALUE_SIZE = 100
QS = (0.50, 0.95, 0.99)


def value_of(key: str) -> bytes:
    return (key.encode() + b":" + b"v" * VALUE_SIZE)[:VALUE_SIZE]


@dataclass(frozen=True)
class Job:
    servers: tuple[str, ...]
    config: dict[str, Any]
    connections: int
    requests: list[list[str]]
    arrivals: list[float]
    start_at: float
    senders: int


def _worker(job: Job, part: int, parts: int) -> dict[str, Any]:
    """One load-generator process: its share of the requests, open loop; latencies (µs) and checks."""
    from tailtune_client.memcached import Client

    mine = list(range(part, len(job.requests), parts))
    lat = np.full(len(mine), np.nan)
    lag = np.full(len(mine), np.nan)
    answers: list[dict[str, bytes] | None] = [None] * len(mine)
    lock = threading.Lock()
    nxt = [0]
    with Client(list(job.servers), config=job.config, poll_interval=0, connections_per_server=job.connections,
                timeout=5.0, request_timeout=10.0) as client:

        def send() -> None:
            # warm-up before the start: connections open, code paths hot (not measured)
            for r in range(3):
                client.get_many(job.requests[(part + r * parts) % len(job.requests)])
            while True:
                with lock:
                    j = nxt[0]
                    nxt[0] += 1
                if j >= len(mine):
                    return
                i = mine[j]
                due = job.start_at + job.arrivals[i]
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                keys = job.requests[i]
                sent = time.time()
                got = client.get_many(keys)
                done = time.time()
                with lock:
                    lat[j] = (done - sent) * 1e6
                    lag[j] = (sent - due) * 1e6
                    answers[j] = got

        threads = [threading.Thread(target=send) for _ in range(job.senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = client.stats()
    # checked after the timed part, so the check's Python work does not compete with the requests for the GIL
    wrong = sum(1 for j, i in enumerate(mine) if (got := answers[j]) is not None and (
        len(got) != len(job.requests[i]) or any(got.get(k) != value_of(k) for k in job.requests[i])))
    return {"index": mine, "latency_us": lat.tolist(), "lag_us": lag.tolist(), "wrong": wrong, "queries": sum(
        s["queries"] for s in stats["servers"].values()) if isinstance(stats.get("servers"), dict) else None}


def replay_real(job: Job, processes: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """Latency (µs, from the get_many call to its answer) of every request in arrival order (NaN: not answered),
    the generator's lag (call − scheduled arrival, µs) and the number of wrong answers."""
    ctx = mp.get_context("fork")
    with ctx.Pool(processes) as pool:
        parts = pool.starmap(_worker, [(job, p, processes) for p in range(processes)])
    lat = np.full(len(job.requests), np.nan)
    lag = np.full(len(job.requests), np.nan)
    wrong = 0
    for part in parts:
        lat[np.asarray(part["index"], dtype=np.int64)] = part["latency_us"]
        lag[np.asarray(part["index"], dtype=np.int64)] = part["lag_us"]
        wrong += int(part["wrong"])
    return lat, lag, wrong


def client_overhead_us(servers: Sequence[str], keys: Sequence[str], reps: int = 300, gap_s: float = 0.0) -> float:
    """Median get_many of one key through the client minus through a bare pymemcache connection (µs); calls back
    to back (`gap_s` 0) or spaced by `gap_s` (the machine idles between calls, as in an open-loop replay)."""
    from pymemcache.client.base import Client as Bare
    from tailtune_client.hashing import server_for
    from tailtune_client.memcached import Client

    key = keys[0]
    host, _, port = server_for(key, servers).rpartition(":")
    bare = Bare((host, int(port)), no_delay=True)
    ours = Client(list(servers), config={"memcached_client": {"mode": "batching"}}, poll_interval=0)
    try:
        def med(fn: Any) -> float:
            for _ in range(20):
                fn([key])
            t = np.empty(reps)
            for r in range(reps):
                if gap_s:
                    time.sleep(gap_s)
                t0 = time.perf_counter()
                fn([key])
                t[r] = time.perf_counter() - t0
            return float(np.median(t)) * 1e6

        # interleave to share the machine's drift
        a = [med(bare.get_many), med(ours.get_many), med(bare.get_many), med(ours.get_many)]
        return max(0.0, (a[1] + a[3] - a[0] - a[2]) / 2)
    finally:
        bare.close()
        ours.close()


def idle_round_trips_us(servers: Sequence[str], key: str, *, blocks: int = 5, reps: int = 200,
                        gap_s: float = 0.0) -> dict[str, Any]:
    """The idle machine's own noise: `blocks` × `reps` one-key gets through a bare pymemcache connection (spaced
    by `gap_s`); each block's p50 (their spread is how well a p50 repeats here) and the pooled p50/p95/p99 (µs)."""
    from pymemcache.client.base import Client as Bare
    from tailtune_client.hashing import server_for

    host, _, port = server_for(key, servers).rpartition(":")
    bare = Bare((host, int(port)), no_delay=True)
    try:
        for _ in range(20):
            bare.get_many([key])
        t = np.empty((blocks, reps))
        for b in range(blocks):
            for r in range(reps):
                if gap_s:
                    time.sleep(gap_s)
                t0 = time.perf_counter()
                bare.get_many([key])
                t[b, r] = (time.perf_counter() - t0) * 1e6
    finally:
        bare.close()
    return {"block_p50_us": [float(np.median(row)) for row in t],
            "pooled_us": [float(np.percentile(t, q * 100)) for q in QS]}


def percentiles(lat: npt.NDArray[np.float64]) -> list[float]:
    s = np.sort(lat[np.isfinite(lat)])
    return [float(s[max(1, int(np.ceil(q * s.size))) - 1]) / 1e3 for q in QS]  # nearest rank, ms


def run(
    workloads: Sequence[str] = WORKLOADS,
    *,
    requests: int = 1500,
    servers: int = 3,
    worker_threads: int = 2,
    connections: int = 4,
    processes: int = 2,
    senders: int = 8,
    gaps_us: Sequence[float] = (2000.0, 500.0),
    repeats: int = 3,
    profile_reps: int = 30,
    overhead_reps: int = 300,
    start_delay_s: float = 1.5,
    seed: int = 1,
) -> dict[str, Any]:
    """Run everything; the figures as a dict (see `to_markdown`). `gaps_us`: the loads (mean gap between
    arrivals, µs); `overhead_reps`: calls per median of the client-overhead measurement; `start_delay_s`: how
    long after a replay's processes are started its first request is due (they connect and warm up meanwhile)."""
    import kvsim
    from kvsim.chisel import MemcachedSetup, ServiceProfile
    from tailtune_client.memcached import Client

    from analysis.memcached_profile import profile_memcached
    from simulation import memcached
    from simulation.memcached import MemcachedDeployment
    from simulation.source import WorkloadSource
    from tests.servers.memcached_server import MemcachedNode, running_memcached

    started = time.time()
    out: dict[str, Any] = {"settings": {
        "requests": requests, "servers": servers, "worker_threads": worker_threads, "connections": connections,
        "processes": processes, "senders": senders, "gaps_us": list(gaps_us), "repeats": repeats},
        "loads": {str(g): {"gap_us": g, "workloads": {}} for g in gaps_us}}
    with contextlib.ExitStack() as stack:
        procs: list[MemcachedNode] = [stack.enter_context(running_memcached(threads=worker_threads, memory_mb=256))
                                        for _ in range(servers)]
        names = tuple(f"{p.host}:{p.port}" for p in procs)
        prof = profile_memcached(procs[0].host, procs[0].port, ks=(1, 5, 10, 20, 50, 100), reps=profile_reps)
        coeffs = prof.coefficients()
        out["profile"] = {"a": coeffs[0], "b": coeffs[1], "c": coeffs[2], "d": coeffs[3]}
        dep = MemcachedDeployment(servers=servers, worker_threads=worker_threads, pool="sharded",
                                  server_addresses=",".join(names))
        for w in workloads:
            trace = memcached.prepare(WorkloadSource(profile=w, requests=requests, trace_seed=seed).load(),
                                      source=w)
            n = int(trace.sizes.size)
            mean_gap = float(trace.arrivals[-1]) / max(1, n - 1)
            reqs = [trace.request_keys(i) for i in range(n)]
            distinct = sorted({k for r in reqs for k in r})
            with Client(list(names), config={"memcached_client": {"mode": "batching"}}, poll_interval=0) as c:
                for lo in range(0, len(distinct), 500):
                    failed = c.set_many({k: value_of(k) for k in distinct[lo : lo + 500]})
                    if failed:
                        raise RuntimeError(f"{w}: memcached did not store {len(failed)} keys")
            shards = memcached.shards_for(trace, dep, n)
            for gap_us in gaps_us:
                arrivals = trace.arrivals * (gap_us * 1e-6 / mean_gap) if mean_gap > 0 else trace.arrivals
                idle = idle_round_trips_us(names, distinct[0], gap_s=gap_us * 1e-6)
                overhead = client_overhead_us(names, distinct, reps=overhead_reps, gap_s=gap_us * 1e-6)
                overhead_b2b = client_overhead_us(names, distinct, reps=overhead_reps)
                profile = ServiceProfile(*coeffs)
                models = {
                    # every query thread's client work in parallel, one process holding all the threads
                    "before": MemcachedSetup(servers=servers, worker_threads=worker_threads,
                                          query_threads=servers * connections * processes,
                                          client_overhead_us=overhead, profile=profile),
                    # the client host: `processes` CPython processes, one CPU each, the per-key parse on it
                    "after": MemcachedSetup(servers=servers, worker_threads=worker_threads,
                                         query_threads=servers * connections * processes,
                                         client_overhead_us=overhead,
                                         profile=ServiceProfile(coeffs[0], coeffs[1], coeffs[2], 0.0),
                                         client_cpus=1, client_processes=processes, client_key_us=coeffs[3]),
                }

                def sim(model: str, policy: str, params: dict[str, int], rep: int,
                        shards: kvsim.memcached.Shards = shards, arrivals: npt.NDArray[np.float64] = arrivals,
                        sizes: npt.NDArray[np.int64] = trace.sizes,
                        models: dict[str, MemcachedSetup] = models) -> Any:
                    return kvsim.memcached.replay(sizes, arrivals, kvsim.MemcachedConfig(
                        policy=policy, params=params, deployment=models[model], seed=rep, shards=shards))

                levels = dict(sim("before", "chisel", {}, 0).params)
                variants = {"batching": ({"memcached_client": {"mode": "batching"}}, "batching", {}),
                            "chisel": ({"memcached_client": {"mode": "chisel", **levels}}, "chisel", levels)}
                real: dict[str, list[list[float]]] = {v: [] for v in variants}
                wrong = unanswered = 0
                lags: list[float] = []
                for rep in range(repeats):
                    order = list(variants) if rep % 2 == 0 else list(reversed(variants))
                    for v in order:
                        cfg = variants[v][0]
                        job = Job(names, cfg, connections, reqs, arrivals.tolist(), time.time() + start_delay_s,
                                  senders)
                        lat, lag, bad = replay_real(job, processes)
                        lags += lag[np.isfinite(lag)].tolist()
                        wrong += bad
                        unanswered += int(np.isnan(lat).sum())
                        real[v].append(percentiles(lat))
                predicted: dict[str, dict[str, list[float]]] = {m: {} for m in models}
                loads: dict[str, dict[str, float]] = {m: {} for m in models}
                for m in models:
                    for v, (_, p, prm) in variants.items():
                        res = sim(m, p, prm, 1)
                        predicted[m][v] = percentiles(np.asarray(res.latencies_ms) * 1e3)
                        loads[m][v] = float(res.client_cpu_load)
                after_b = sim("after", "batching", {}, 1)
                out["loads"][str(gap_us)]["workloads"][w] = {
                    "requests": n, "keys": int(trace.sizes.sum()), "levels": levels,
                    "client_overhead_us": overhead, "client_overhead_b2b_us": overhead_b2b,
                    "client_key_us": coeffs[3], "idle_rtt": idle,
                    "lag_us": [float(np.percentile(lags, q * 100)) for q in QS] if lags else [],
                    "real": real, "predicted": predicted, "client_cpu_load": loads,
                    "wrong": wrong, "unanswered": unanswered,
                    "server_load_max": float(after_b.server_load_max)}
    out["wall_s"] = time.time() - started
    return out


def _err(pred: float, obs: float) -> str:
    return f"{(pred - obs) / obs * 100:+.0f}%" if obs > 0 else "n/a"


def to_markdown(res: dict[str, Any]) -> str:
    p = res["profile"]
    s = res["settings"]
    lines = [
        f"{s['servers']} memcached × {s['worker_threads']} threads on 127.0.0.1; {s['processes']} client processes "
        f"× {s['connections']} connections per server; {s['requests']} requests per workload; {s['repeats']} runs "
        f"per variant, interleaved. Profile (µs): P_S = {p['a']:.1f} + {p['b']:.2f}·K, N_S = {p['c']:.1f} + "
        f"{p['d']:.2f}·K. Cells: predicted BEFORE (client work in parallel) / AFTER (client host: one CPU per "
        "client process) / observed (median of the runs), in ms, and the error of each prediction; obs spread = "
        "min–max over the runs.",
    ]
    for load in res["loads"].values():
        lines += [
            "",
            f"**Mean gap {load['gap_us']:.0f} µs**",
            "",
            "| workload | variant | levels | p50 before / after / obs | err before / after | p95 before / after / obs "
            "| err before / after | p99 before / after / obs | err before / after | obs spread p50 / p99 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for w, r in load["workloads"].items():
            for v in ("batching", "chisel"):
                obs = np.asarray(r["real"][v])
                med = np.median(obs, axis=0)
                bef, aft = r["predicted"]["before"][v], r["predicted"]["after"][v]
                cells = []
                for j in range(3):
                    cells += [f"{bef[j]:.3f} / {aft[j]:.3f} / {med[j]:.3f}",
                              f"{_err(bef[j], med[j])} / {_err(aft[j], med[j])}"]
                spread = [f"{obs[:, j].min():.3f}–{obs[:, j].max():.3f}" for j in (0, 2)]
                lv = ", ".join(f"{k}={x}" for k, x in r["levels"].items()) if v == "chisel" else "—"
                lines.append(f"| {w} | {v} | {lv} | " + " | ".join(cells) + f" | {spread[0]} / {spread[1]} |")
        lines.append("")
        for w, r in load["workloads"].items():
            lag = "/".join(f"{x:.0f}" for x in r["lag_us"])
            idle = r["idle_rtt"]
            blocks = idle["block_p50_us"]
            pooled = "/".join(f"{x:.0f}" for x in idle["pooled_us"])
            cpu = r["client_cpu_load"]["after"]
            lines.append(
                f"* {w}: {r['requests']} requests, {r['keys']} keys; client overhead {r['client_overhead_us']:.0f} "
                f"µs/query spaced as the replay ({r['client_overhead_b2b_us']:.0f} back to back), parse "
                f"{r['client_key_us']:.2f} µs/key; generator lag p50/p95/p99 {lag} µs (not in the latencies); idle "
                f"one-key round trip p50/p95/p99 {pooled} µs (block p50s {min(blocks):.0f}–{max(blocks):.0f}); "
                f"simulated client CPU load (after) {cpu['batching']:.2f} batching / {cpu['chisel']:.2f} chisel, "
                f"busiest server load {r['server_load_max']:.2f}; wrong answers {r['wrong']}, unanswered "
                f"{r['unanswered']}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gaps-us", default="2000,500", help="the loads: mean gaps between arrivals (µs), comma-separated")
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--overhead-reps", type=int, default=300)
    ap.add_argument("--profile-reps", type=int, default=30)
    ap.add_argument("--start-delay-s", type=float, default=1.5)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--json-out", type=Path, default=None, help="write every figure as JSON here")
    a = ap.parse_args(argv)
    gaps = tuple(float(g) for g in a.gaps_us.split(",") if g.strip())
    res = run(tuple(a.workloads.split(",")), requests=a.requests, repeats=a.repeats, gaps_us=gaps,
              servers=a.servers, processes=a.processes, overhead_reps=a.overhead_reps,
              profile_reps=a.profile_reps, start_delay_s=a.start_delay_s)
    text = to_markdown(res)
    print(text)
    if a.out is not None:
        a.out.write_text(text)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
