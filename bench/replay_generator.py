"""The live replay's load generators side by side on a real node: CPU per request, and the highest rate each
sustains with its lag p99 at or under a limit (1 ms).

    flock -x /tmp/tailtune-bench.lock python -m bench.replay_generator [--rates 250,500,...] [--seconds 8 --warmup 5]

One single-node Cassandra from the test kit (`tests.servers.cassandra_server`), two twin tables of 1,000 rows
(two arms, no hedging: each request is one read). The node's JVM is pinned to CPU 0 (`taskset -a -p`, every
thread), this process and the generators it starts (the Java generator's JVM inherits it) to CPU 1
(`os.sched_setaffinity`); on a machine with one CPU nothing is pinned. For each generator, rates are tried in
the order given (after 20 s of reads warming the node up, `--node-warmup`), each run `--warmup` seconds unrecorded
then `--seconds` measured (a constant-rate plan, arms dealt in blocks of 10, scaled by `rate_scale`), until it
no longer keeps up (achieved under 90 % of the rate, or over 1 % of its sends waiting for an in-flight slot) or
aborts. The highest rate whose lag p99 is within `--lag-limit-us` is the figure; the box's load average is
printed with each run (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

__all__ = ["main"]


def _pin(node_pid: int) -> str:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return "not pinned (one CPU or no taskset)"
    subprocess.run(["taskset", "-a", "-p", "-c", str(cpus[0]), str(node_pid)], check=True, capture_output=True)
    os.sched_setaffinity(0, {cpus[1]})
    return f"node on CPU {cpus[0]} (taskset -a -p), generators on CPU {cpus[1]} (sched_setaffinity)"


def _row(driver: str, rate: int, r: Any) -> dict[str, Any]:
    lat = [a.latency for a in r.arms]
    return {
        "driver": driver,
        "rate": rate,
        "achieved": round(r.achieved_rate),
        "cpu_us_per_request": round(r.cpu_us_per_request, 1),
        "scheduler_cpu_us_per_request": round(r.scheduler_cpu_s * 1e6 / max(r.sent, 1), 1),
        "threads_cpu_us_per_request": round(r.threads_cpu_s * 1e6 / max(r.sent, 1), 1),
        "lag_p50_us": r.lag.value_at_percentile(50),
        "lag_p99_us": r.lag.value_at_percentile(99),
        "lag_max_us": r.lag.max,
        "latency_p50_us": max(h.value_at_percentile(50) for h in lat),
        "latency_p99_us": max(h.value_at_percentile(99) for h in lat),
        "throttled": r.throttled,
        "errors": sum(a.errors + a.timeouts for a in r.arms),
        "gc": r.gc_count,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="250,500,1000,2000,4000,6000,8000,12000,16000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=3.0, help="each run's own warm-up (unrecorded), seconds")
    ap.add_argument("--node-warmup", type=float, default=20.0, help="reads at 1,000/s before the first run")
    ap.add_argument("--lag-limit-us", type=int, default=1000)
    ap.add_argument("--drivers", default="java4,python")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--no-pin", action="store_true", help="leave the node and the generators unpinned")
    a = ap.parse_args(argv)
    rates = [int(x) for x in a.rates.split(",")]

    from cassandra.cluster import Cluster

    from control.egress import Egress
    from kinds.cassandra.replay.config import ArmProfile, Endpoint, GeneratorConfig
    from kinds.cassandra.replay.generator import GeneratorAborted, build, run
    from kinds.cassandra.replay.plan import Plan, PlanArm, encode_value
    from tests.servers.cassandra_server import running_cassandra

    build()
    os.environ.pop("JAVA_TOOL_OPTIONS", None)
    rows: list[dict[str, Any]] = []
    with running_cassandra(heap="512M") as node:
        assert node.proc is not None
        pinning = "not pinned (--no-pin)" if a.no_pin else _pin(node.proc.pid)
        print(f"# {pinning}", flush=True)
        cluster = Cluster([node.host], port=node.port)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        for t in ("a", "b"):
            session.execute(f"CREATE TABLE bench.{t} (k bigint PRIMARY KEY, v blob)")
            insert = session.prepare(f"INSERT INTO bench.{t} (k, v) VALUES (?, ?)")
            for i in range(1000):
                session.execute(insert, (i, bytes(100)))
        dc = session.execute("SELECT data_center FROM system.local").one().data_center
        cluster.shutdown()

        base_rate = 1000  # the plan at rate_scale 1: one request per ms
        n = int(max(max(rates) * (a.seconds + 0.5), base_rate * a.node_warmup) + 1)
        arms = (PlanArm("a", "SELECT v FROM bench.a WHERE k = ?"), PlanArm("b", "SELECT v FROM bench.b WHERE k = ?"))
        plan = Plan.of(arms, [(i * 1000, (i // 10) % 2, [encode_value("bigint", (i * 7919) % 1000)])
                              for i in range(n)])
        ep = Endpoint(node.host, node.port)
        egress = Egress()
        # the node's own warm-up (its JIT, its caches): a run of the Java generator, not recorded
        warm = GeneratorConfig((ep,), (ep,), dc, tuple(ArmProfile(x.name) for x in arms), duration_s=a.node_warmup,
                               max_error_fraction=1.0)
        run("java4", plan, warm, egress=egress)
        for driver in a.drivers.split(","):
            sra = None if driver == "java4" else False
            config = GeneratorConfig((ep,), (ep,), dc, tuple(ArmProfile(x.name, slow_replica_avoidance=sra)
                                                             for x in arms),
                                     max_error_fraction=0.05, max_in_flight=1024)
            for rate in rates:
                scale = rate / base_rate
                c = replace(config, rate_scale=scale, duration_s=a.seconds, warmup_s=a.warmup)
                t0 = time.monotonic()
                try:
                    r = run(driver, plan, c, egress=egress)
                except GeneratorAborted as exc:
                    kinds = {a.name: dict(a.error_kinds) for a in exc.result.arms}
                    print(f"{driver} {rate}/s: aborted ({exc.result.reason}; {kinds})", flush=True)
                    break
                row = _row(driver, rate, r)
                row["wall_s"] = round(time.monotonic() - t0, 1)
                row["loadavg_1m"] = round(os.getloadavg()[0], 1)  # the box's, other jobs' included
                rows.append(row)
                print(json.dumps(row), flush=True)
                if row["achieved"] < 0.9 * rate or row["throttled"] > 0.01 * r.sent:
                    break  # it no longer keeps up: a higher rate only queues
    print("\n| generator | rate (req/s) | achieved | CPU µs/req | threads / scheduler µs/req "
          "| lag p50 / p99 / max µs | latency p50 / p99 µs | throttled | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [row["driver"], row["rate"], row["achieved"], row["cpu_us_per_request"],
                 f"{row['threads_cpu_us_per_request']} / {row['scheduler_cpu_us_per_request']}",
                 f"{row['lag_p50_us']} / {row['lag_p99_us']} / {row['lag_max_us']}",
                 f"{row['latency_p50_us']} / {row['latency_p99_us']}", row["throttled"], row["loadavg_1m"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    for driver in a.drivers.split(","):
        ok = [x["rate"] for x in rows if x["driver"] == driver and x["lag_p99_us"] <= a.lag_limit_us]
        print(f"{driver}: highest rate with lag p99 <= {a.lag_limit_us} µs: {max(ok) if ok else 'none'} req/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pinning": pinning, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
