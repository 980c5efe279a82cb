"""Does Cassandra's default `speculative_retry = 99p` storm at high load? The real cluster against the model.

The simulator's stock policy, replaying a long steady trace at 75 % load, can settle into a retry storm under `99p`
(extra reads raise latencies past the threshold, the losers are not cancelled, the doubled load keeps latencies
up): every recommendation then "wins" against Cassandra's default. This script drives the same kind of load at real
nodes, with `99p` and with `NEVER`, and replays the same trace in the model.

Real side. `--nodes` Cassandra 5.0 nodes on 127.0.0.1.. (`tests.servers.cassandra_cluster`, balanced tokens,
`num_tokens: 1`, dynamic snitch as `--dynamic-snitch`), keyspace RF = min(3, nodes), one table of `--partitions`
partitions of `--value-size` B loaded at CL ALL. Every node is a coordinator (the driver's round robin over all of
them), multigets `SELECT k, v FROM kv WHERE k IN ?` of `--keys` partitions at CL ONE.
1. **Capacity**: a closed loop (`--capacity-inflight` requests kept in flight, `NEVER`) for `--capacity-s`: the
   multigets/s this generator and these nodes complete together on this machine, the JVMs' CPU per partition read,
   and the generator's own CPU.
2. **Runs**: open loop, Poisson arrivals at `--load` × capacity (the same seeded arrivals and keys in every run),
   `--warmup-s` + `--measure-s` per run; `NEVER` and `99p` interleaved, `--repeats` each. Per run: p50/p95/p99 of
   the measured part (execute_async → callback), requests that failed (read timeouts), p99 per 10 s window (a storm
   grows from window to window), the JVMs' CPU, and the **extra reads** the coordinators sent: the ReadStage tasks
   completed on every node (`system_views.thread_pools`) less the partition reads asked for. Every partition read —
   local or from another node, original or speculative — runs as one ReadStage task (AbstractReadExecutor:
   `LocalReadRunnable` on `Stage.READ`; a remote read is the READ verb, whose handler runs on the READ stage), so the
   difference counts the speculative reads (plus a handful of system reads).

Model side: the same trace (request ids, arrival times, keys) replayed by `tailtune simulate --policy stock` with
servers = nodes, RF as above, clients = nodes (one coordinator per node), `--slots 1`, `--service-rate` = 1 / (JVM
CPU seconds per partition read in the capacity run), `--load` = the utilisation that rate gives the trace's offered
reads on the machine's CPUs left to the JVMs (2 cores less the generator's measured share, spread over the nodes),
`--use-timestamps`, `--warmup` = the warm-up's share, replica order round-robin (the ring order the coordinators
use with the dynamic snitch off). 3 seeds each for `NEVER` and `99p`. Nothing is tuned to match.

    .venv/bin/python -m validation.storm_cassandra --nodes 3 --load 0.75 --json-out storm3.json

Not a CI test (minutes; `--nodes` JVMs of `--heap` each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from validation.cassandra_common import KEYSPACE, TABLE, create_and_load, table_metric
from validation.stock_cassandra import (
    Workload,
    drive,
    jvm_cpu_s,
    make_workload,
    pct,
    set_speculative_retry,
    write_trace,
)

VARIANTS = ("NEVER", "99p")
WINDOW_S = 10.0


def read_stage_completed(session: Any, hosts: Sequence[Any]) -> int:
    """ReadStage tasks completed, summed over `hosts` (each asked directly)."""
    total = 0
    for h in hosts:
        rows = session.execute("SELECT name, completed_tasks FROM system_views.thread_pools", host=h)
        total += sum(int(r.completed_tasks) for r in rows if r.name == "ReadStage")
    return total


def speculative_retries(nodes: Sequence[Any]) -> int | None:
    """The table's `SpeculativeRetries` counter summed over `nodes` (JMX); None when it cannot be read."""
    got = table_metric(nodes, "SpeculativeRetries", "Count")
    return None if got is None else int(sum(got))


def self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def closed_loop(session: Any, prepared: Any, keys: list[list[str]], seconds: float, inflight: int) -> tuple[int, int]:
    """Keep `inflight` requests in flight (the driver's `execute_concurrent`) for about `seconds`: (completed,
    failed)."""
    from cassandra.concurrent import execute_concurrent_with_args

    ok = bad = 0
    stop_at = time.monotonic() + seconds
    chunk = max(inflight * 20, 500)
    i = 0
    while time.monotonic() < stop_at:
        args = [(keys[(i + j) % len(keys)],) for j in range(chunk)]
        i += chunk
        for r in execute_concurrent_with_args(session, prepared, args, concurrency=inflight,
                                              raise_on_first_error=False):
            ok, bad = (ok + 1, bad) if r.success else (ok, bad + 1)
    return ok, bad


def windows_p99(w: Workload, lat: npt.NDArray[np.float64]) -> list[float]:
    """p99 (ms) of the finite latencies per WINDOW_S window of arrival time, measured part only."""
    out = []
    t = w.warmup_s
    end = float(w.arrivals.max()) if w.arrivals.size else t
    while t < end:
        m = (w.arrivals >= t) & (w.arrivals < t + WINDOW_S)
        out.append(pct(lat[m])[2] if m.any() else float("nan"))
        t += WINDOW_S
    return out


def run_real(a: argparse.Namespace) -> dict[str, Any]:
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    from tests.servers.cassandra_cluster import running_cluster

    rf = min(3, a.nodes)
    out: dict[str, Any] = {"runs": [], "rf": rf}
    with running_cluster(a.nodes, heap=a.heap, dynamic_snitch=a.dynamic_snitch == "on") as nodes:
        coords = [n.host for n in nodes]
        pids = [n.proc.pid for n in nodes if n.proc is not None]
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(coords),
                                   consistency_level=ConsistencyLevel.ONE, request_timeout=30.0)
        cluster = Cluster(coords, port=nodes[0].port, protocol_version=5,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            s = cluster.connect()
            create_and_load(s, replication=rf, partitions=a.partitions, value_size=a.value_size)
            sel = s.prepare(f"SELECT k, v FROM {KEYSPACE}.{TABLE} WHERE k IN ?")
            sel.consistency_level = ConsistencyLevel.ONE
            hosts = list(cluster.metadata.all_hosts())
            cap_w = make_workload(100.0, 0.0, 100.0, a.keys, a.partitions, a.seed + 1)

            set_speculative_retry(s, "NEVER")
            print("JIT warm-up (closed loop, not recorded)", flush=True)
            closed_loop(s, sel, cap_w.keys, min(20.0, a.capacity_s), a.capacity_inflight)
            idle_s = 5.0
            c0 = jvm_cpu_s(pids)
            time.sleep(idle_s)
            idle = (jvm_cpu_s(pids) - c0) / idle_s
            c0, g0, r0, t0 = jvm_cpu_s(pids), self_cpu_s(), read_stage_completed(s, hosts), time.monotonic()
            ok, bad = closed_loop(s, sel, cap_w.keys, a.capacity_s, a.capacity_inflight)
            el = time.monotonic() - t0
            jvm, gen, reads = jvm_cpu_s(pids) - c0, self_cpu_s() - g0, read_stage_completed(s, hosts) - r0
            cap = {"multigets_per_s": ok / el, "failed": bad, "jvm_cpu_per_s": jvm / el, "idle_jvm_cpu_per_s": idle,
                   "gen_cpu_per_s": gen / el, "read_stage_tasks": reads, "partition_reads": ok * a.keys,
                   "jvm_cpu_per_read_s": max(1e-9, jvm - idle * el) / max(1, ok * a.keys)}
            out["capacity"] = cap
            print(f"capacity: {cap['multigets_per_s']:.0f} multigets/s ({cap['multigets_per_s'] * a.keys:.0f} "
                  f"partition reads/s), JVM CPU {cap['jvm_cpu_per_s']:.2f} s/s, generator CPU "
                  f"{cap['gen_cpu_per_s']:.2f} s/s, {cap['jvm_cpu_per_read_s'] * 1e6:.0f} µs JVM CPU per read, "
                  f"failed {bad}", flush=True)

            rate = a.load * cap["multigets_per_s"]
            w = make_workload(rate, a.warmup_s, a.measure_s, a.keys, a.partitions, a.seed)
            out["rate"] = rate
            out["requests"] = int(w.arrivals.size)

            def one(variant: str) -> dict[str, Any]:
                shown = set_speculative_retry(s, variant)
                time.sleep(2.0)
                sr0 = speculative_retries(nodes)
                c0, g0, r0 = jvm_cpu_s(pids), self_cpu_s(), read_stage_completed(s, hosts)
                t0 = time.monotonic()
                lat, lag, err, _ = drive(s, sel, w, senders=a.senders)
                el = time.monotonic() - t0
                jvm, gen = jvm_cpu_s(pids) - c0, self_cpu_s() - g0
                tasks = read_stage_completed(s, hosts) - r0
                sr1 = speculative_retries(nodes)
                spec = None if sr0 is None or sr1 is None else sr1 - sr0
                m = w.measured
                asked = int(w.arrivals.size) * a.keys
                r = {"variant": shown, "pct_ms": pct(lat[m]), "errors": err,
                     "unanswered": int(np.isnan(lat[m]).sum()), "lag_ms": pct(lag[m]),
                     "window_p99_ms": windows_p99(w, lat), "jvm_cpu_s": jvm, "gen_cpu_s": gen, "elapsed_s": el,
                     "read_stage_tasks": tasks, "partition_reads": asked,
                     "extra_reads_pct": (tasks - asked) / asked * 100, "load_avg": os.getloadavg()[0],
                     "speculative_retries": spec,
                     "speculative_pct": None if spec is None else spec / asked * 100}
                print(f"  {shown:>6}: p50/p95/p99 " + " / ".join(f"{x:.2f}" for x in r["pct_ms"])
                      + f" ms, failed {err}, ReadStage tasks − reads asked {r['extra_reads_pct']:.2f} %, "
                      + f"speculative retries {spec} of {asked}, p99 per {WINDOW_S:g} s "
                      + "/".join(f"{x:.0f}" for x in r["window_p99_ms"])
                      + f" ms, lag p99 {r['lag_ms'][2]:.1f} ms, JVM CPU {jvm:.0f} s, load avg {r['load_avg']:.1f}",
                      flush=True)
                return r

            for rep in range(a.repeats):
                order = list(a.variants) if rep % 2 == 0 else list(reversed(a.variants))
                print(f"repetition {rep + 1}/{a.repeats}: {order} at {rate:.0f} multigets/s", flush=True)
                for v in order:
                    out["runs"].append(one(v))
        finally:
            cluster.shutdown()
    return out


def simulate(a: argparse.Namespace, real: dict[str, Any], trace: Path, variant: str, seed: int) -> dict[str, Any]:
    cap = real["capacity"]
    per_read = float(cap["jvm_cpu_per_read_s"])
    offered = float(real["rate"]) * a.keys
    cpus = max(0.1, a.cpus - float(cap["gen_cpu_per_s"]))
    servers = a.nodes
    # The nodes share the machine's CPUs: each server's capacity is its share of what the generator leaves.
    service_rate = cpus / servers / per_read
    load = offered / (servers * service_rate)
    warm = a.warmup_s / (a.warmup_s + a.measure_s)
    cmd = [".venv/bin/tailtune", "simulate", "--policy", "stock", "--trace", str(trace), "--use-timestamps",
           "--servers", str(servers), "--replication", str(real["rf"]), "--vnodes", "1", "--clients", str(servers),
           "--slots", "1", "--service-rate", f"{service_rate:.1f}", "--net-latency-us", "50", "--load",
           f"{load:.4f}", "--warmup", f"{warm:.4f}", "--param", "replica=round-robin",
           "--param", f"speculative_retry={variant}", "--seed", str(seed), "--json"]
    for extra in a.sim_param:
        cmd[-3:-3] = ["--param", extra]
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    j = json.loads(p.stdout)
    ops = float(j.get("workload_ops") or 1)
    return {"variant": variant, "seed": seed, "pct_ms": [j["p50_ms"], j["p95_ms"], j["p99_ms"]],
            "extra_reads_pct": float(j.get("extra_reads", 0)) / ops * 100,
            "timeouts": j.get("timeouts", {}).get("requests", 0), "service_rate": service_rate, "load": load,
            "command": " ".join(x if x != str(trace) else "TRACE.csv" for x in cmd)}


def _spec(r: Mapping[str, Any]) -> str:
    sp = r.get("speculative_pct")
    return ("n/a" if sp is None else f"{sp:.2f} %") + f" ({r['extra_reads_pct']:+.2f} %)"


def to_markdown(a: argparse.Namespace, real: dict[str, Any], sim: list[dict[str, Any]]) -> str:
    cap = real["capacity"]
    lines = [
        f"{a.nodes} node(s), RF {real['rf']}, dynamic snitch {a.dynamic_snitch}; multigets of {a.keys} keys at CL "
        f"ONE over {a.partitions} partitions; capacity (closed loop, {a.capacity_inflight} in flight): "
        f"{cap['multigets_per_s']:.0f} multigets/s, JVM CPU {cap['jvm_cpu_per_read_s'] * 1e6:.0f} µs per partition "
        f"read, generator CPU {cap['gen_cpu_per_s']:.2f} s/s; runs at {a.load:g} × capacity = {real['rate']:.0f} "
        f"multigets/s, {a.warmup_s:g} s warm-up + {a.measure_s:g} s measured, {a.repeats} per variant.",
        "",
        "| speculative_retry | real p50 / p95 / p99 (ms), median of runs | real p99 per run | real failed | real "
        "speculative retries per run (ReadStage tasks − reads asked) "
        "| sim p50 / p95 / p99 (ms), mean of seeds | sim p99 per seed | sim timed out | sim extra reads |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    def j(xs: Sequence[float], fmt: str = "{:.1f}", sep: str = ", ") -> str:
        return sep.join(fmt.format(x) for x in xs)

    for v in a.variants:
        rr = [r for r in real["runs"] if str(r["variant"]).upper() == v.upper()]
        ss = [x for x in sim if x["variant"] == v]
        if not rr or not ss:
            continue
        med = np.median(np.asarray([r["pct_ms"] for r in rr]), axis=0)
        sm = np.mean(np.asarray([x["pct_ms"] for x in ss], dtype=float), axis=0)
        lines.append(
            f"| {v} | {j(med, '{:.2f}', ' / ')} | {j([r['pct_ms'][2] for r in rr])} "
            f"| {sum(r['errors'] for r in rr)} | {', '.join(_spec(r) for r in rr)} "
            f"| {j(sm, '{:.2f}', ' / ')} | {j([x['pct_ms'][2] for x in ss])} "
            f"| {sum(int(x['timeouts']) for x in ss)} | {np.mean([x['extra_reads_pct'] for x in ss]):.2f} % |")
    windows = "; ".join(f"{r['variant']} " + j(r["window_p99_ms"], "{:.0f}", "/") for r in real["runs"])
    lines += ["", f"p99 per {WINDOW_S:g} s window of each real run (ms): {windows}.",
              f"Generator lag p99 per run (ms): {j([r['lag_ms'][2] for r in real['runs']])}; load average at the "
              f"end of each run: {j([r['load_avg'] for r in real['runs']])}."]
    if sim:
        cmd = sim[0]["command"].replace("--seed 0", "--seed S").replace(
            "speculative_retry=" + str(sim[0]["variant"]), "speculative_retry=VARIANT")
        lines.append(f"Simulator: `{cmd}`.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--load", type=float, default=0.75, help="fraction of the measured closed-loop capacity")
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--warmup-s", type=float, default=20.0)
    ap.add_argument("--measure-s", type=float, default=60.0)
    ap.add_argument("--capacity-s", type=float, default=20.0)
    ap.add_argument("--capacity-inflight", type=int, default=64)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dynamic-snitch", choices=("on", "off"), default="off")
    ap.add_argument("--heap", default="768M")
    ap.add_argument("--cpus", type=float, default=float(os.cpu_count() or 2))
    ap.add_argument("--sim-seeds", type=int, default=3)
    ap.add_argument("--sim-param", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra `simulate --param` for the model side (e.g. spec_histogram=0, the sample window)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--from-json", type=Path, default=None, help="redo the model side from an earlier --json-out")
    a = ap.parse_args(argv)
    a.variants = a.variants.split(",")
    if a.from_json is not None:
        real = json.loads(a.from_json.read_text())["real"]
    else:
        real = run_real(a)
        if a.json_out is not None:
            a.json_out.write_text(json.dumps({"real": real}, indent=1, default=str))
    w = make_workload(float(real["rate"]), a.warmup_s, a.measure_s, a.keys, a.partitions, a.seed)
    with tempfile.TemporaryDirectory(prefix="tailtune-storm-") as tmp:
        trace = Path(tmp) / "trace.csv"
        write_trace(w, trace, a.value_size)
        sim = [simulate(a, real, trace, v, s) for v in a.variants for s in range(a.sim_seeds)]
    text = to_markdown(a, real, sim)
    print(text)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps({"args": vars(a) | {"json_out": None, "from_json": None}, "real": real,
                                          "sim": sim}, indent=1, default=str))


if __name__ == "__main__":
    main()
