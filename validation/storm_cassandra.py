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
2. **Runs**, through the live replay engine (`control.replay.run_replay`, docs/replay.md;
   `validation.engine_harness`): the nodes registered as a deployment that allows the replay (its table the one
   above, its driver `--driver`), a trace of Poisson multigets at `--load` × capacity for `--measure-s` ingested as
   a dataset, and one replay of every variant at once: each an arm `stock:speculative_retry=V,multiget.shape=in`
   on a twin table of its own, the requests dealt to the arms in one stream, the engine's `--warmup-s` sent
   unmeasured, `--repeats` repeats, blocks of `--block-s`, LOCAL_ONE, each latency from its intended start. Per
   arm: p50/p95/p99, failed and timed-out requests, and the **extra reads** the coordinators sent for it: the
   replica reads of its twin (`system_views.local_read_latency` on every node) beyond its requests — speculative
   retries, original or not, each run as one replica read — and the paired interval of its p99 against `NEVER`;
   the JVMs' CPU over the replay, the generator's lag and CPU. The engine sends each multiget as one `IN` query
   (`multiget.shape=in`); a report whose multigets were flattened into one-partition reads says so in the output.

   What the engine changes, and why it is sounder: `NEVER` and `99p` used to run one after another on one table
   (`ALTER TABLE` between runs), so a storm in one run and its absence in the next could be the box's drift (run
   p99s spread 31–75 % between sequential runs here); now they share every moment, and a storm shows as `99p`'s
   extra reads and its p99 against `NEVER`'s in the same blocks, with an interval. The price: one arm's storm loads
   the other arm too (the report's `interference` says how much), so a storm in `99p` raises `NEVER`'s latency as
   well — the comparison is of configs sharing that load. The p99 per 10 s window of each run (how a storm grows)
   is not in the engine's report; its blocks are, pooled.

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
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from validation.cassandra_common import KEYSPACE, TABLE, create_and_load
from validation.stock_cassandra import as_sent, jvm_cpu_s, make_workload, write_flat, write_trace

VARIANTS = ("NEVER", "99p")


def read_stage_completed(session: Any, hosts: Sequence[Any]) -> int:
    """ReadStage tasks completed, summed over `hosts` (each asked directly)."""
    total = 0
    for h in hosts:
        rows = session.execute("SELECT name, completed_tasks FROM system_views.thread_pools", host=h)
        total += sum(int(r.completed_tasks) for r in rows if r.name == "ReadStage")
    return total


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


def run_real(a: argparse.Namespace) -> dict[str, Any]:
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    from tests.servers.cassandra_cluster import running_cluster
    from validation import engine_harness as h

    rf = min(3, a.nodes)
    out: dict[str, Any] = {"runs": [], "rf": rf, "engine": True}
    env = {"TAILTUNE_REPLAY_WARMUP_S": str(a.warmup_s), "TAILTUNE_REPLAY_MAX_LAG_MS": str(a.max_lag_ms)}
    with h.engine_home("storm-cassandra", env) as settings, \
            running_cluster(a.nodes, heap=a.heap, dynamic_snitch=a.dynamic_snitch == "on") as nodes:
        coords = [n.host for n in nodes]
        pids = [n.proc.pid for n in nodes if n.proc is not None]
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(coords),
                                   consistency_level=ConsistencyLevel.ONE, request_timeout=30.0)
        cluster = Cluster(coords, port=nodes[0].port, protocol_version=5,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            s = cluster.connect()
            create_and_load(s, replication=rf, partitions=a.partitions, value_size=a.value_size)
            s.execute(f"ALTER TABLE {KEYSPACE}.{TABLE} WITH speculative_retry = 'NEVER'")
            sel = s.prepare(f"SELECT k, v FROM {KEYSPACE}.{TABLE} WHERE k IN ?")
            sel.consistency_level = ConsistencyLevel.ONE
            hosts = list(cluster.metadata.all_hosts())
            cap_w = make_workload(100.0, 0.0, 100.0, a.keys, a.partitions, a.seed + 1)
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
        finally:
            cluster.shutdown()
        cap = {"multigets_per_s": ok / el, "failed": bad, "jvm_cpu_per_s": jvm / el, "idle_jvm_cpu_per_s": idle,
               "gen_cpu_per_s": gen / el, "read_stage_tasks": reads, "partition_reads": ok * a.keys,
               "jvm_cpu_per_read_s": max(1e-9, jvm - idle * el) / max(1, ok * a.keys)}
        out["capacity"] = cap
        print(f"capacity: {cap['multigets_per_s']:.0f} multigets/s ({cap['multigets_per_s'] * a.keys:.0f} "
              f"partition reads/s), JVM CPU {cap['jvm_cpu_per_s']:.2f} s/s, generator CPU "
              f"{cap['gen_cpu_per_s']:.2f} s/s, {cap['jvm_cpu_per_read_s'] * 1e6:.0f} µs JVM CPU per read, "
              f"failed {bad}", flush=True)

        rate = a.load * cap["multigets_per_s"]
        w = make_workload(rate, 0.0, a.measure_s + 1.0, a.keys, a.partitions, a.seed)
        out["rate"] = rate
        out["requests"] = int(w.arrivals.size)
        path = settings.home_dir / "trace.csv"
        write_trace(w, path, a.value_size)
        dataset = h.ingest(settings, path)
        h.cassandra_deployment(settings, nodes, name="storm", keyspace=KEYSPACE, table=TABLE, replication=rf,
                               driver=a.driver)
        print(f"replay: {', '.join(a.variants)} at once at {rate:.0f} multigets/s, {a.repeats} repeat(s)", flush=True)
        with h.Phases(sample=lambda: jvm_cpu_s(pids)) as phases:
            doc = h.replay("storm", dataset, h.stock_arms(a.variants), settings=settings, duration_s=a.measure_s,
                           repeats=a.repeats, block_s=a.block_s, seed=a.seed, on_progress=phases)
        h.print_report(doc)
        out["flattened"] = h.flattened(doc)
        if out["flattened"]:
            print(f"note: {h.MULTIGET_NOTE}", flush=True)
        out["report"] = doc
        jvm_s = phases.sampled
        lag = doc["generator"]["lag_ms"]
        for v in a.variants:
            name = h.arm_name(v)
            o, c = doc["observed"].get(name, {}), doc["cluster"].get("arms", {}).get(name, {})
            asked = max(1, int(c.get("requests_sent") or o.get("requests") or 1))
            spec, extra = c.get("speculative_retries"), c.get("extra_reads")
            out["runs"].append({
                "variant": v, "pct_ms": [o.get("p50_ms"), o.get("p95_ms"), o.get("p99_ms")],
                "errors": int(o.get("errors", 0)) + int(o.get("timeouts", 0)), "unanswered": o.get("timeouts", 0),
                "lag_ms": [lag.get("p50"), lag.get("p99"), lag.get("max")], "jvm_cpu_s": jvm_s,
                "elapsed_s": phases.span_s, "partition_reads": asked,
                "extra_reads_pct": None if extra is None else extra / asked * 100, "load_avg": os.getloadavg()[0],
                "speculative_retries": spec, "speculative_pct": None if spec is None else spec / asked * 100,
                "window_p99_ms": []})
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
    warm = float(np.mean(~as_sent(make_workload(float(real["rate"]), 0.0, a.measure_s + 1.0, a.keys, a.partitions,
                                                a.seed), a.warmup_s).measured))
    cmd = [sys.executable, "-m", "tailtune", "simulate", "--policy", "stock", "--trace", str(trace), "--use-timestamps",
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
            "command": " ".join(["tailtune", *(x if x != str(trace) else "TRACE.csv" for x in cmd[3:])])}


def _spec(r: Mapping[str, Any]) -> str:
    sp, extra = r.get("speculative_pct"), r.get("extra_reads_pct")
    return ("n/a" if sp is None else f"{sp:.2f} %") + ("" if extra is None else f" ({extra:+.2f} %)")


def to_markdown(a: argparse.Namespace, real: dict[str, Any], sim: list[dict[str, Any]]) -> str:
    from validation.engine_harness import MULTIGET_NOTE, print_report

    cap = real["capacity"]
    lines = [
        f"{a.nodes} node(s), RF {real['rf']}, dynamic snitch {a.dynamic_snitch}; multigets of {a.keys} keys at CL "
        f"ONE over {a.partitions} partitions; capacity (closed loop, {a.capacity_inflight} in flight): "
        f"{cap['multigets_per_s']:.0f} multigets/s, JVM CPU {cap['jvm_cpu_per_read_s'] * 1e6:.0f} µs per partition "
        f"read, generator CPU {cap['gen_cpu_per_s']:.2f} s/s; runs at {a.load:g} × capacity = {real['rate']:.0f} "
        f"multigets/s, {a.warmup_s:g} s warm-up + {a.measure_s:g} s measured, {a.repeats} repeat(s), every "
        "variant at once through the live replay engine."
        + (f" Note: {MULTIGET_NOTE}." if real.get("flattened") else ""),
        "",
        "| speculative_retry | real p50 / p95 / p99 (ms) | real p99 | real failed | real speculative retries "
        "(replica reads beyond the arm's requests) "
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
    lines += ["", f"Generator lag p50/p99/max (ms, in the latencies): {j(real['runs'][0]['lag_ms'], '{:.2f}', ' / ')}; "
              f"JVM CPU over the replay {real['runs'][0]['jvm_cpu_s']:.0f} s; load average at its end "
              f"{real['runs'][0]['load_avg']:.1f}."]
    if real.get("report"):
        lines.append("The engine's own figures:")
        print_report(real["report"], out=lines.append)
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
    ap.add_argument("--driver", choices=("java4", "python"), default="java4",
                    help="the deployment's driver: the engine's generator (Java driver 4, or the Python driver)")
    ap.add_argument("--block-s", type=float, default=15.0, help="the engine's blocks (the interval needs 20 of 15 s)")
    ap.add_argument("--max-lag-ms", type=float, default=50.0, help="TAILTUNE_REPLAY_MAX_LAG_MS for the replay")
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
    w = as_sent(make_workload(float(real["rate"]), 0.0, a.measure_s + 1.0, a.keys, a.partitions, a.seed), a.warmup_s)
    with tempfile.TemporaryDirectory(prefix="tailtune-storm-") as tmp:
        trace = Path(tmp) / "trace.csv"
        (write_flat if real.get("flattened") else write_trace)(w, trace, a.value_size)  # what the engine replayed
        sim = [simulate(a, real, trace, v, s) for v in a.variants for s in range(a.sim_seeds)]
    text = to_markdown(a, real, sim)
    print(text)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps({"args": vars(a) | {"json_out": None, "from_json": None}, "real": real,
                                          "sim": sim}, indent=1, default=str))


if __name__ == "__main__":
    main()
