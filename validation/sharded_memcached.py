"""Predicted vs observed on real memcached through the live replay engine (`control.replay.run_replay`,
docs/replay.md): generated traces replayed through the shipped client (`tailtune_client`) against a sharded pool
of memcached processes on 127.0.0.1, batching and Chisel side by side, beside the deployment's model of the same
requests.

**The deployment.** `--servers` memcached × `--worker-threads` threads (`-m --memory-mb`), registered as a memcached
deployment of them (`connection.servers`; `replay_allowed`, set by an admin) in a throw-away TAILTUNE_HOME
(`validation.engine_harness`). Its model is the product's: discovery (the servers' threads) and calibration (the
client overhead per request, the profiler's), as `tailtune deployments discover` / `calibrate` store them.

**The replays.** Per workload (`--workloads`: the mice-elephant, soundcloud and bimodal profiles, `--requests` each,
seeded) the generator's trace is ingested as a dataset; per load (`--gaps-us`: mean gaps between arrivals) the
rate scale that gives that gap; then one `run_replay` of `batching` against `chisel` (at Chisel's analyzer's levels
for the trace, which the engine fills in, as the model finds them), `--repeats` repeats of `--duration` s (default:
the whole trace) in blocks of `--block-s`, after the engine's warm-up. What is printed and kept comes from its
report: each arm's observed p50/p95/p99 and the model's predicted ones (the deployment's model at the rate the
generator achieved), chisel against batching with the paired block bootstrap's interval (the engine refuses it
under 20 blocks of 15 s and says so), the generator's lag and CPU per request, chisel's extra queries (the
interference), every answer checked (wrong, missing) and the servers' evictions.

**Beside it** (the engine does not measure it): the machine's own noise — before each load, 5 blocks of one-key
round trips through a bare pymemcache connection, spaced as the load's arrivals (the spread of their p50s is how
well a p50 repeats here).

**What moving onto the engine changed, and why it is sounder.** The script used to run its own load loop: the
variants one after another (interleaved, repeated), latency from the `get_many` call with the generator's lag
apart, 100-byte values, 2 processes × 8 sender threads, and two hand-built models (client work in parallel, or one
CPU per client process). Now both configs run concurrently in one stream, each request dealt to one of them, so
every config meets the same machine at the same moment (this box's drift between sequential runs was larger than
the effects) and the difference gets a paired interval; latency counts from each request's intended start, so a
generator that falls behind shows in the latencies instead of hiding in a separate lag figure (no coordinated
omission); values are the trace's own sizes; the model is the one a tune of this deployment replays, not one built
for the script (its client-host inputs, `client_cpus`/`client_processes`, are no deployment model input, so they are
not in the prediction). The generator is the engine's: one process, a pool of threads, one client per arm.

    .venv/bin/python -m validation.sharded_memcached --requests 30000 --gaps-us 2000 --duration 60 --repeats 5 \
        --out validation/sharded_memcached.md --json-out sharded.json

Not a CI test (minutes, noisy); tests/memcached/test_sharded_validation.py runs it on tiny inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

WORKLOADS = ("mice-elephant", "soundcloud", "bimodal")
QS = (0.50, 0.95, 0.99)
ARMS = (("batching", "batching"), ("chisel", "chisel"))


def idle_round_trips_us(servers: Sequence[str], key: str, *, blocks: int = 5, reps: int = 200,
                        gap_s: float = 0.0) -> dict[str, Any]:
    """The idle machine's own noise: `blocks` × `reps` one-key gets through a bare pymemcache connection (spaced
    by `gap_s`); each block's p50 (their spread is how well a p50 repeats here) and the pooled p50/p95/p99 (µs)."""
    from pymemcache.client.base import Client as Bare
    from tailtune_client.hashing import server_for

    host, _, port = server_for(key, servers).rpartition(":")
    bare = Bare((host, int(port)), no_delay=True)
    try:
        bare.set(key, b"v" * 100)
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
        bare.delete(key)
    finally:
        bare.close()
    return {"block_p50_us": [float(np.median(row)) for row in t],
            "pooled_us": [float(np.percentile(t, q * 100)) for q in QS]}


def run(
    workloads: Sequence[str] = WORKLOADS,
    *,
    requests: int = 30000,
    servers: int = 3,
    worker_threads: int = 2,
    memory_mb: int = 1024,
    gaps_us: Sequence[float] = (2000.0,),
    duration_s: float | None = None,
    repeats: int = 1,
    block_s: float = 15.0,
    warmup_s: float = 10.0,
    max_lag_ms: float = 50.0,
    noise_reps: int = 200,
    seed: int = 1,
) -> dict[str, Any]:
    """Everything of the module doc; the figures as a dict (`to_markdown`). A workload whose scratch keys would
    not fit the servers is kept with the engine's refusal (`refused`)."""
    import pyarrow.parquet as pq

    from kinds.memcached.replay.live import ScratchTooLarge
    from simulation import memcached
    from simulation.source import WorkloadSource
    from tests.servers.memcached_server import MemcachedNode, running_memcached
    from validation import engine_harness as h

    started = time.time()
    out: dict[str, Any] = {
        "settings": {"requests": requests, "servers": servers, "worker_threads": worker_threads,
                     "memory_mb": memory_mb, "gaps_us": list(gaps_us), "duration_s": duration_s, "repeats": repeats,
                     "block_s": block_s, "warmup_s": warmup_s, "max_lag_ms": max_lag_ms, "seed": seed},
        "load_average": list(os.getloadavg()),
        "loads": {str(g): {"gap_us": g, "workloads": {}} for g in gaps_us}}
    env = {"TAILTUNE_REPLAY_WARMUP_S": str(warmup_s), "TAILTUNE_REPLAY_MAX_LAG_MS": str(max_lag_ms)}
    with h.engine_home("sharded-memcached", env) as settings, contextlib.ExitStack() as stack:
        procs: list[MemcachedNode] = [stack.enter_context(running_memcached(threads=worker_threads,
                                                                            memory_mb=memory_mb))
                                      for _ in range(servers)]
        names = tuple(p.address for p in procs)
        dep = h.register(settings, {"name": "pool", "kind": "memcached", "replay_allowed": True,
                                    "connection": {"servers": list(names)}})
        found = h.discover(settings, dep)
        calibrated = h.calibrate(settings, dep)
        out["model"] = {"discovered": found.get("inputs"), "calibrated": calibrated.get("inputs"),
                        "notes": [*found.get("notes", []), *calibrated.get("notes", [])]}
        for w in workloads:
            table = WorkloadSource(profile=w, requests=requests, trace_seed=seed).load()
            path = settings.home_dir / f"{w}.parquet"
            pq.write_table(table, path)
            dataset = h.ingest(settings, path)
            trace = memcached.prepare(table, source=w)
            n = int(trace.sizes.size)
            mean_gap_us = float(trace.arrivals[-1]) * 1e6 / max(1, n - 1)
            first_key = str(table.column("key")[0])
            for gap_us in gaps_us:
                idle = idle_round_trips_us(names, f"tailtune:noise:{first_key}", gap_s=gap_us * 1e-6,
                                           reps=noise_reps)
                entry: dict[str, Any] = {"requests": n, "keys": int(trace.sizes.sum()), "idle_rtt": idle,
                                         "rate_scale": mean_gap_us / gap_us}
                try:
                    entry["report"] = h.replay("pool", dataset, ARMS, settings=settings,
                                               rate_scale=mean_gap_us / gap_us, duration_s=duration_s,
                                               repeats=repeats, block_s=block_s, seed=seed)
                except ScratchTooLarge as exc:
                    entry["refused"] = f"{exc} ({exc.hint})"
                    print(f"  {w} at {gap_us:g} µs: refused: {entry['refused']}", file=sys.stderr, flush=True)
                out["loads"][str(gap_us)]["workloads"][w] = entry
    out["wall_s"] = time.time() - started
    return out


def _err(pred: float | None, obs: float | None) -> str:
    return f"{(pred - obs) / obs * 100:+.0f}%" if pred is not None and obs else "n/a"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def to_markdown(res: dict[str, Any]) -> str:
    s = res["settings"]
    la = "/".join(f"{x:.1f}" for x in res.get("load_average", []))
    model = res.get("model", {})
    overhead = ((model.get("calibrated") or {}).get("client_overhead") or {}).get("value")
    threads = ((model.get("discovered") or {}).get("worker_threads") or {}).get("value")
    lines = [
        f"{s['servers']} memcached × {s['worker_threads']} threads (-m {s['memory_mb']}) on 127.0.0.1, through "
        f"`run_replay` (batching and chisel concurrent in one stream, the engine's generator); {s['requests']} "
        f"requests per workload, {s['repeats']} repeat(s) of "
        f"{'the whole trace' if s['duration_s'] is None else str(s['duration_s']) + ' s'} in blocks of "
        f"{s['block_s']:g} s after a {s['warmup_s']:g} s warm-up. The model: the deployment's (discovered worker "
        f"threads {threads}, calibrated client overhead {overhead}). Load average at the start {la}. Cells: "
        "predicted / observed (ms) and the prediction's error.",
    ]
    for load in res["loads"].values():
        lines += [
            "",
            f"**Mean gap {load['gap_us']:.0f} µs**",
            "",
            "| workload | arm | levels | requests | p50 pred / obs | err | p95 pred / obs | err | p99 pred / obs "
            "| err |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for w, r in load["workloads"].items():
            if "report" not in r:
                lines.append(f"| {w} | — | — | — | refused: {r.get('refused', '')} |  |  |  |  |  |")
                continue
            doc = r["report"]
            for arm in doc["arms"]:
                name = arm["name"]
                o, p = doc["observed"].get(name, {}), doc["predicted"].get(name, {})
                params = arm["config"].get("params") or {}
                lv = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "—"
                cells = []
                for q in ("p50_ms", "p95_ms", "p99_ms"):
                    cells += [f"{_ms(p.get(q))} / {_ms(o.get(q))}", _err(p.get(q), o.get(q))]
                lines.append(f"| {w} | {name} | {lv} | {o.get('requests', 0)} | " + " | ".join(cells) + " |")
        lines.append("")
        for w, r in load["workloads"].items():
            if "report" not in r:
                continue
            doc = r["report"]
            g = doc["generator"]
            cmp = []
            for c in doc["comparisons"]:
                if c["metric"] not in ("p50", "p99"):
                    continue
                if c["interval_pct"] is None:
                    cmp.append(f"{c['metric']} {c['diff_pct']:+.1f} % (no interval: {c['reason']})"
                               if c.get("diff_pct") is not None else f"{c['metric']}: {c['reason']}")
                else:
                    lo, hi = c["interval_pct"]
                    cmp.append(f"{c['metric']} {c['diff_pct']:+.1f} % [{lo:+.1f}, {hi:+.1f}]")
            arms = doc["cluster"].get("arms", {})
            wrong = sum(a.get("wrong_answers", 0) for a in arms.values())
            missing = sum(a.get("missing_answers", 0) for a in arms.values())
            extra = arms.get("chisel", {}).get("extra_queries")
            idle = r["idle_rtt"]
            blocks = idle["block_p50_us"]
            pooled = "/".join(f"{x:.0f}" for x in idle["pooled_us"])
            lines.append(
                f"* {w}: {r['requests']} requests, {r['keys']} keys; {doc['duration_s']:.0f} s measured, "
                f"{doc['blocks']} blocks; {doc['rate']['achieved_per_s']:.0f}/{doc['rate']['intended_per_s']:.0f} "
                f"requests/s; chisel vs batching {'; '.join(cmp)}; generator lag p50/p99/max "
                f"{g['lag_ms']['p50']:.2f}/{g['lag_ms']['p99']:.2f}/{g['lag_ms']['max']:.2f} ms (in the latencies; "
                f"ok: {g['lag_ok']}), {g['cpu_us_per_request']:.0f} µs CPU per request; chisel's extra queries "
                f"{extra}; idle one-key round trip p50/p95/p99 {pooled} µs (block p50s {min(blocks):.0f}–"
                f"{max(blocks):.0f}); wrong answers {wrong} (missing {missing}), evictions "
                f"{doc['cluster'].get('evictions')}.")
            for note in doc["notes"]:
                if note.startswith(("refused as a comparison", "the servers evicted", "interference")):
                    lines.append(f"  * {note}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=30000)
    ap.add_argument("--gaps-us", default="2000", help="the loads: mean gaps between arrivals (µs), comma-separated")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per repeat (default: the trace)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--block-s", type=float, default=15.0)
    ap.add_argument("--warmup-s", type=float, default=10.0)
    ap.add_argument("--max-lag-ms", type=float, default=50.0)
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--worker-threads", type=int, default=2)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--noise-reps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--json-out", type=Path, default=None, help="write every figure as JSON here")
    a = ap.parse_args(argv)
    gaps = tuple(float(g) for g in a.gaps_us.split(",") if g.strip())
    res = run(tuple(a.workloads.split(",")), requests=a.requests, servers=a.servers,
              worker_threads=a.worker_threads, memory_mb=a.memory_mb, gaps_us=gaps, duration_s=a.duration,
              repeats=a.repeats, block_s=a.block_s, warmup_s=a.warmup_s, max_lag_ms=a.max_lag_ms,
              noise_reps=a.noise_reps, seed=a.seed)
    res["command"] = " ".join(["python -m validation.sharded_memcached", *(argv if argv is not None else sys.argv[1:])])
    text = to_markdown(res)
    print(text)
    if a.out is not None:
        a.out.write_text(text)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
