"""Stock Cassandra: coordinator `speculative_retry` under a stalled replica, on a real three-node cluster and in the
simulator (`tailtune simulate --policy stock`), side by side.

Real side, through the live replay engine (`control.replay.run_replay`, docs/replay.md;
`validation.engine_harness`). Three Cassandra 5.0 nodes on 127.0.0.1, .2, .3 (`tests.servers.cassandra_cluster`,
balanced tokens), the user's keyspace RF 3 (so every node holds every partition), registered as a deployment that
allows the replay, with the deployment's egress rules (`TAILTUNE_CONNECT_NETWORKS`) admitting nodes 1 and 2 only:
the generator's node filter never makes the stalled node 3 a coordinator (a stalled coordinator cannot speculate;
only driver-side hedging would help then), as the old whitelist did — its counters are not read either. The trace:
Poisson multigets of `--keys` partitions (uniform over `--partitions`, value `--value-size` B) at `--rate`/s for
`--measure-s`, ingested as a dataset; the engine sends its first `--warmup-s` unmeasured before measuring. Each
variant of `--variants` is an arm, `stock:speculative_retry=V,multiget.shape=in`: a twin scratch table per arm,
created with its `speculative_retry` in `CREATE TABLE`, loaded at CL ALL; the requests dealt to the arms at random in
one stream (`--repeats` repeats, blocks of `--block-s`), each latency from its intended start, LOCAL_ONE, the
deployment's driver (`--driver`: the Java driver 4 generator, or the Python driver). The engine sends each multiget as
the arm's `multiget.shape=in` says (one `IN` query of its keys); a report whose engine flattened multigets into
one-partition reads (an older engine's, `--from-json`) is said so and simulated as replayed.
Before the stalled replay a calibration replay without
stalls, two `NEVER` arms (an A/A pair: their difference is the engine's own noise), measures the JVMs' CPU per read
for the model side. Node 3's JVM is stopped (SIGSTOP) for `--stall-ms` every `--stall-period-s`, continued with
SIGCONT, from the engine's first send (warm-up) to its last; each stall's (stopped, continued) times are recorded, as
offsets from the warm-up's start (within the progress relay's 0.25 s): the model side replays what the engine
sent (`as_sent`: the warm-up, then the measured run), its warm-up cut.

What the engine changes, and why it is sounder: the variants used to run one after another on one table, switched
by `ALTER TABLE` between runs (interleaved, rotated); now they run at the same moment on twin tables, each with its
own threshold from its own histogram, so every variant meets the same stalls, the same JIT and GC state, the same
load of the box — this box's p99 spread 31–75 % between sequential runs, more than the effects — and the difference
to `NEVER` gets a paired block-bootstrap interval (with 20 blocks of 15 s or more; shorter runs say why not). The
price: the arms share the cluster, so `ALWAYS`-like variants' extra reads load every arm (the report's
`interference`), and a fresh twin's threshold starts from the replay's own reads, not from a production table's
history. Latency counts from each request's intended start (the old loop timed from the `execute_async` call, lag
apart), and the generator is the deployment's driver, not a Python loop measuring itself.

Replica order: with `--dynamic-snitch off` (the default here) the coordinator reads the first replica in ring order
(SimpleSnitch), so node 3 is the first replica of a third of the partitions. With Cassandra's default dynamic
snitch on, a coordinator that is itself a replica has no latency samples of itself (its local reads send no
message), so its score is missing = 0, and it reads locally as soon as a remote replica's score is above 0 (its
whole-millisecond median ≥ 1 ms): with RF = 3 on 3 nodes a non-stalled coordinator then never reads the stalled
node (`--dynamic-snitch on` measures that).

Simulated side (the derivation is printed with the figures): the same trace (request ids, arrival times, keys)
written as CSV, replayed at its own times (`--use-timestamps --trace-rate`: the simulated clock's 0 is the first
arrival, as the recorded stalls' offsets); `--servers 3 --replication 3 --vnodes 1 --clients 2` (two coordinators),
`--slots 1`,
`--service-rate` = 1 / (CPU seconds of the three JVMs per partition read, measured in a no-stall run),
`--net-latency-us 50` (the model's network is the coordinator → replica hop, loopback here; the driver →
coordinator round trip, measured as the median of `SELECT release_version FROM system.local` and printed, is
outside the coordinator's speculation timer and not added: compare effects, the ratios to NEVER; CPU per read
less the JVMs' idle CPU), `--warmup` = the warm-up's share of the requests, replica order `round-robin` for the
SimpleSnitch ring order (each server first for a third of the reads) or, for the dynamic snitch, the faithful
`dynamic-snitch` selector with `local=1`: client c is the coordinator on server c (nodes 1 and 2 = servers 0 and 1,
the mapping below), which reads itself without sampling it, as a Cassandra coordinator does (the local read still
takes the model's two 50 µs hops).
Stalls: each real run's recorded schedule, replayed (`--stall-schedule`, one simulation per real run and seed) on
the simulated server at node 3's ring position. The mapping is by token: node 127.0.0.k has the balanced token
MIN + ⌊2⁶⁴/3⌋ · (k − 1) (`balanced_tokens`), kvsim's `--vnodes 1` ring gives server s the token
MIN + ⌊(2⁶⁴ − 1)/3⌋ · s (the same numbers), and both place a key's replicas from its token's owner on in ring order,
so node k is server k − 1 (`sim_server`, checked against the stalled node's token). `--random-stalls` instead
stalls every simulated server at random (`--stall-rate (1 / period) / 3 --stall-ms STALL`, the cluster's stall count
per second that of node 3's schedule, `--load` = the offered reads/s over the time-averaged capacity).

    .venv/bin/python -m validation.stock_cassandra --rate 30 --keys 4 --stall-ms 1000 --stall-period-s 5 \
        --measure-s 300 --json-out stock_cassandra.json   # then --from-json stock_cassandra.json redoes the model side

Not a CI test (minutes; three JVMs of `--heap` each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from validation.cassandra_common import KEYSPACE, TABLE, trivial_round_trips_s

MIN_TOKEN = -(2**63)
STALLED_NODE = 2  # index of the stalled node (127.0.0.3) in the cluster's nodes
QS = (0.50, 0.95, 0.99)
VARIANTS = ("NEVER", "99p", "5ms", "MIN(99p,5ms)")


@dataclass(frozen=True)
class Workload:
    arrivals: npt.NDArray[np.float64]  # s from the run's start
    keys: list[list[str]]
    warmup_s: float

    @property
    def measured(self) -> npt.NDArray[np.bool_]:
        return self.arrivals >= self.warmup_s


def make_workload(rate: float, warmup_s: float, measure_s: float, keys: int, partitions: int,
                  seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    total = warmup_s + measure_s
    gaps = rng.exponential(1.0 / rate, size=int(rate * total * 1.5) + 100)
    arr = np.cumsum(gaps)
    arr = arr[arr < total]
    ks = [[f"k{int(x)}" for x in rng.choice(partitions, size=keys, replace=False)] for _ in range(arr.size)]
    return Workload(arr, ks, warmup_s)


def as_sent(w: Workload, warmup_s: float) -> Workload:
    """What the engine sends of the trace `w`: its first `warmup_s` (unmeasured), then all of it again from
    `warmup_s` on (the measured run) — the workload the model side replays, its warm-up cut."""
    warm = w.arrivals < warmup_s
    keys = [k for k, m in zip(w.keys, warm, strict=True) if m] + list(w.keys)
    return Workload(np.concatenate([w.arrivals[warm], w.arrivals + warmup_s]), keys, warmup_s)


def write_trace(w: Workload, path: Path, value_size: int) -> None:
    with path.open("w") as f:
        f.write("request_id,ts,key,value_size\n")
        for i, (t, ks) in enumerate(zip(w.arrivals, w.keys, strict=True)):
            for k in ks:
                f.write(f"{i},{t:.6f},{k},{value_size}\n")


def write_flat(w: Workload, path: Path, value_size: int) -> None:
    """`w` as a flattening engine replayed it: each key of a multiget a request of its own at its arrival."""
    with path.open("w") as f:
        f.write("request_id,ts,key,value_size\n")
        i = 0
        for t, ks in zip(w.arrivals, w.keys, strict=True):
            for k in ks:
                f.write(f"{i},{t:.6f},{k},{value_size}\n")
                i += 1


def pct(lat: npt.NDArray[np.float64]) -> list[float]:
    """p50/p95/p99 (nearest rank) in ms of the finite latencies (s)."""
    s = np.sort(lat[np.isfinite(lat)])
    if s.size == 0:
        return [float("nan")] * len(QS)
    return [float(s[max(1, int(np.ceil(q * s.size))) - 1]) * 1e3 for q in QS]


def jvm_cpu_s(pids: Sequence[int]) -> float:
    """utime + stime of the processes, seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


class Staller:
    """Stops `pid` for `stall_s` every `period_s` from `start` (monotonic) until `stop()`; always continues it."""

    def __init__(self, pid: int, period_s: float, stall_s: float, start: float) -> None:
        self.pid, self.period_s, self.stall_s, self.start = pid, period_s, stall_s, start
        self._done = threading.Event()
        self.stalls: list[tuple[float, float]] = []  # (stopped, continued) monotonic
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        k = 0
        try:
            while not self._done.is_set():
                due = self.start + (k + 0.5) * self.period_s
                if self._done.wait(max(0.0, due - time.monotonic())):
                    return
                os.kill(self.pid, signal.SIGSTOP)
                t0 = time.monotonic()
                try:
                    self._done.wait(self.stall_s)
                finally:
                    os.kill(self.pid, signal.SIGCONT)
                self.stalls.append((t0, time.monotonic()))
                k += 1
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)

    def __enter__(self) -> Staller:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._t.join(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)


def rtt_median_s(session: Any, reps: int = 300) -> float:
    return float(np.median(trivial_round_trips_s(session, reps)))


def _arm_runs(doc: dict[str, Any], variants: Sequence[str], cpu_s: float, stalled: bool) -> list[dict[str, Any]]:
    """Each arm of a replay report as a run of the table (the generator's lag is the run's, shared by its arms)."""
    from validation.engine_harness import arm_name

    g = doc["generator"]["lag_ms"]
    out = []
    for v in variants:
        name = arm_name(v)
        o, c = doc["observed"].get(name, {}), doc["cluster"].get("arms", {}).get(name, {})
        out.append({"variant": _norm(v), "arm": name, "stalled": stalled,
                    "pct_ms": [o.get("p50_ms"), o.get("p95_ms"), o.get("p99_ms")], "errors": o.get("errors", 0),
                    "unanswered": o.get("timeouts", 0), "requests": o.get("requests", 0),
                    "lag_ms": [g.get("p50"), g.get("p99"), g.get("max")], "cpu_s": cpu_s,
                    "speculative_retries": c.get("speculative_retries"), "extra_reads": c.get("extra_reads"),
                    "predicted_ms": [doc["predicted"].get(name, {}).get(k) for k in ("p50_ms", "p95_ms", "p99_ms")]})
    return out


def run_real(a: argparse.Namespace, w: Workload) -> dict[str, Any]:
    """The real side of the module doc: a calibration replay (A/A, no stalls), then the stalled replay of every
    variant at once."""
    from cassandra.cluster import Cluster

    from tests.servers.cassandra_cluster import running_cluster
    from validation import engine_harness as h

    out: dict[str, Any] = {"runs": [], "engine": True}
    env = {"TAILTUNE_REPLAY_WARMUP_S": str(a.warmup_s), "TAILTUNE_REPLAY_MAX_LAG_MS": str(a.max_lag_ms),
           "TAILTUNE_CONNECT_NETWORKS": "127.0.0.1/32,127.0.0.2/32"}
    with h.engine_home("stock-cassandra", env) as settings, \
            running_cluster(3, heap=a.heap, dynamic_snitch=a.dynamic_snitch == "on") as nodes:
        victim = nodes[2]
        assert victim.proc is not None
        pids = [n.proc.pid for n in nodes if n.proc is not None]
        path = settings.home_dir / "trace.csv"
        write_trace(w, path, a.value_size)
        dataset = h.ingest(settings, path)
        h.cassandra_deployment(settings, nodes, name="stock", keyspace=KEYSPACE, table=TABLE, replication=3,
                               driver=a.driver)
        out["stalled_node"] = {"address": victim.host, "token": victim.token}
        cluster = Cluster([nodes[0].host], port=nodes[0].port, protocol_version=5)
        try:
            out["rtt_median_ms"] = rtt_median_s(cluster.connect()) * 1e3
        finally:
            cluster.shutdown()
        idle_s = 10.0
        cpu0 = jvm_cpu_s(pids)
        time.sleep(idle_s)
        out["idle_cpu_per_s"] = (jvm_cpu_s(pids) - cpu0) / idle_s
        print(f"idle JVM CPU {out['idle_cpu_per_s']:.3f} s/s", flush=True)

        def replay(arms: list[tuple[str, str]], repeats: int, stalls: bool) -> tuple[dict[str, Any], float, Any]:
            staller = Staller(victim.proc.pid if victim.proc else -1, a.stall_period_s, a.stall_ms / 1e3, 0.0)

            def measure() -> None:
                if stalls:
                    staller.start = time.monotonic()
                    staller.__enter__()

            def end() -> None:
                if stalls:
                    staller.__exit__()

            with h.Phases(on_measure=measure, on_end=end, sample=lambda: jvm_cpu_s(pids)) as phases:
                doc = h.replay("stock", dataset, arms, settings=settings, duration_s=a.measure_s, repeats=repeats,
                               block_s=a.block_s, seed=a.seed, on_progress=phases)
            h.print_report(doc)
            if h.flattened(doc):
                print(f"note: {h.MULTIGET_NOTE}", flush=True)
            busy = phases.sampled - out["idle_cpu_per_s"] * phases.span_s
            return doc, busy, (staller, phases)

        print("calibration (no stalls, NEVER against NEVER):", flush=True)
        aa = h.stock_arms(["NEVER"])
        aa.append(("NEVER_AA", aa[0][1]))
        calib, busy, _ = replay(aa, 1, stalls=False)
        sent = sum(int(c.get("requests_sent", c.get("requests", 0))) for c in calib["cluster"].get("arms", {}).values())
        out["calibration"] = {**_arm_runs(calib, ["NEVER"], busy, False)[0], "report": calib, "cpu_s": busy,
                              "reads": sent, "cpu_per_read_s": max(1e-9, busy) / max(1, sent)}
        print(f"calibration: {out['calibration']['cpu_per_read_s'] * 1e6:.0f} µs JVM CPU per read "
              f"({sent} reads, warm-up included)", flush=True)
        print(f"stalled: {', '.join(a.variants)} at once, {a.repeats} repeat(s)", flush=True)
        doc, busy, (staller, phases) = replay(h.stock_arms(a.variants), a.repeats, stalls=True)
        out["report"] = doc
        runs = _arm_runs(doc, a.variants, busy, True)
        origin = phases.started or 0.0  # the warm-up's first send: 0 of the sent workload (`as_sent`)
        schedule = trace_schedule(staller.stalls, origin) if a.repeats == 1 else []
        for r in runs:
            r.update({"stalls": len(staller.stalls),
                      "stall_ms_real": float(np.mean([e - s for s, e in staller.stalls]) * 1e3)
                      if staller.stalls else 0.0,
                      "stall_schedule_ms": [list(x) for x in schedule]})
        out["runs"] = runs
        out["flattened"] = h.flattened(doc)
    return out


def _thr(t: Sequence[Sequence[float]] | None) -> str:
    """Thresholds before → after a run, per coordinator: `a/b → c/d` (ms)."""
    if not t:
        return "—"
    return " → ".join("/".join(_ms(x) for x in side) for side in t)


def _ms(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def trace_schedule(stalls: Sequence[tuple[float, float]], origin: float) -> list[tuple[float, float]]:
    """The stalls (monotonic s) as (start, end) ms from `origin` (the first scheduled arrival, monotonic s): the
    simulated clock, whose 0 is the trace's first arrival. A stall before the origin is cut at 0."""
    out = []
    for a, b in stalls:
        start, end = max(0.0, (a - origin) * 1e3), (b - origin) * 1e3
        if end > start:
            out.append((round(start, 3), round(end, 3)))
    return out


def sim_server(token: int, servers: int = 3) -> int:
    """The simulated server at the ring position of the real node of `token`: kvsim's evenly spaced ring
    (`--vnodes 1`) gives server s the token MIN + ⌊(2⁶⁴ − 1)/servers⌋ · s."""
    step = (2**64 - 1) // servers
    for s in range(servers):
        if MIN_TOKEN + step * s == token:
            return s
    raise SystemExit(f"token {token} is not one of kvsim's evenly spaced tokens for {servers} servers")


def schedule_csv(server: int, schedule_ms: Sequence[Sequence[float]]) -> str:
    """The `--stall-schedule` CSV of one run: its stalls on `server`."""
    return "server,start_ms,end_ms\n" + "".join(f"{server},{a:.3f},{b:.3f}\n" for a, b in schedule_ms)


def sim_commands(a: argparse.Namespace, w: Workload, real: dict[str, Any], trace: Path) -> dict[str, Any]:
    """The simulator's settings derived from the real run: `base` (the stalled runs' command; STALLS.csv stands for
    a run's schedule) and `calibration` (the same without stalls)."""
    import kvsim

    from simulation.cassandra import CassandraDeployment

    calib = real["calibration"]
    if "cpu_per_read_s" in calib:  # measured over the calibration replay, the JVMs' idle CPU less
        cpu_per_read = max(1e-6, float(calib["cpu_per_read_s"]))
    else:
        reads = int(w.arrivals.size) * a.keys
        busy_s = a.warmup_s + a.measure_s + 0.5
        cpu_per_read = max(1e-6, calib["cpu_s"] - real.get("idle_cpu_per_s", 0.0) * busy_s) / reads
    service_rate = 1.0 / cpu_per_read
    # The model's network is the coordinator → replica hop (its coordinator is the client): loopback messaging,
    # the simulator's default 50 µs. The driver → coordinator round trip (rtt_median_ms) is outside the
    # coordinator's speculation timer and is not added: the comparison is of effects (ratios to NEVER).
    net_us = 50.0
    rate_s = 1.0 / a.stall_period_s / 3
    offered = a.rate * a.keys
    warm = float(np.mean(~w.measured))
    # The dynamic snitch: Cassandra's (`dynamic-snitch`), coordinator c being the node of server c (`local=1`).
    replica = "round-robin" if a.dynamic_snitch == "off" else "dynamic-snitch"
    local = [] if a.dynamic_snitch == "off" else ["--param", "local=1"]
    common = [
        "tailtune", "simulate", "--policy", "stock", "--trace", str(trace), "--use-timestamps",
        "--servers", "3", "--replication", "3", "--vnodes", "1", "--clients", "2", "--slots", "1",
        "--service-rate", f"{service_rate:.0f}", "--net-latency-us", f"{net_us:.0f}",
        "--warmup", f"{warm:.4f}", "--param", f"replica={replica}", *local,
    ]
    out: dict[str, Any] = {"cpu_per_read_us": cpu_per_read * 1e6, "service_rate": service_rate,
                           "net_latency_us": net_us, "offered_reads_per_s": offered, "warmup": warm,
                           "replica": replica, "stalls": "random" if a.random_stalls else "replayed"}
    if a.random_stalls:
        dep = CassandraDeployment(servers=3, slots=1, replication=3, service_rate=service_rate, stall_rate=rate_s,
                                  stall_ms=a.stall_ms)
        smodel = dep.server_model()
        factor = 1.0 if smodel is None else float(smodel.capacity_factor(3))
        load = offered / (3 * service_rate * factor)
        out |= {"stall_rate": rate_s, "capacity_factor": factor, "load": load,
                "base": [*common, "--load", f"{load:.4f}", "--stall-rate", f"{rate_s:.4f}", "--stall-ms",
                         f"{a.stall_ms:g}"],
                "calibration": [*common, "--load", f"{load * factor:.4f}"]}
        return out
    stalled = real.get("stalled_node")
    if stalled is None:
        raise SystemExit("the real figures carry no stalled node (recorded before schedules were kept): "
                         "use --random-stalls")
    server = sim_server(int(stalled["token"]))
    span_ms = float(w.arrivals[-1] - w.arrivals[0]) * 1e3
    factors = []
    for r in real["runs"]:
        if "stall_schedule_ms" not in r:
            raise SystemExit("a real run carries no stall schedule (recorded before schedules were kept): "
                             "use --random-stalls")
        model = kvsim.ServerModel(stall_schedule=tuple((server, x[0], x[1]) for x in r["stall_schedule_ms"]))
        factors.append(model.capacity_factor(3, span_ms=(0.0, span_ms)))
    # What the trace offers the capacity the schedules leave over its span (reported; the times are replayed).
    factor = float(np.mean(factors))
    out |= {"stalled_server": server, "capacity_factor": factor,
            "load": offered / (3 * service_rate * factor),
            "base": [*common, "--trace-rate", "--stall-schedule", "STALLS.csv"],
            "calibration": [*common, "--trace-rate"]}
    return out


def run_sim(base: list[str], variant: str, seeds: int, *, stalls: Path | None = None) -> list[list[float]]:
    """`seeds` replays of `base` with `speculative_retry=variant`: [p50, p95, p99, extra reads, workload ops] each;
    `stalls`: the schedule file standing for STALLS.csv. Run as `python -m tailtune` of this interpreter."""
    cmd = [sys.executable, "-m", "tailtune", *base[1:]]
    if stalls is not None:
        cmd[cmd.index("STALLS.csv")] = str(stalls)
    out = []
    for seed in range(seeds):
        p = subprocess.run([*cmd, "--param", f"speculative_retry={variant}", "--seed", str(seed), "--json"],
                           check=True, capture_output=True, text=True)
        j = json.loads(p.stdout)
        out.append([float(j["p50_ms"]), float(j["p95_ms"]), float(j["p99_ms"]), float(j.get("extra_reads", 0)),
                    float(j.get("workload_ops", j.get("ops", 0)))])
    return out


def simulate_all(a: argparse.Namespace, real: dict[str, Any], sim: dict[str, Any],
                 tmp: Path) -> dict[str, list[list[list[float]]]]:
    """Per variant, per simulated run (each real run's replayed schedule; one run of `--sim-seeds` seeds with
    random stalls), per seed: [p50, p95, p99, extra reads, workload ops]."""
    out: dict[str, list[list[list[float]]]] = {}
    for v in a.variants:
        if a.random_stalls:
            out[v] = [run_sim(sim["base"], v, a.sim_seeds)]
            continue
        runs = [r for r in real["runs"] if r["variant"] == _norm(v)]
        out[v] = []
        for i, r in enumerate(runs):
            f = tmp / f"stalls-{len(out)}-{i}.csv"
            f.write_text(schedule_csv(sim["stalled_server"], r["stall_schedule_ms"]))
            out[v].append(run_sim(sim["base"], v, a.sim_seeds, stalls=f))
    return out


def to_markdown(a: argparse.Namespace, real: dict[str, Any], sim: dict[str, Any],
                simres: dict[str, list[list[list[float]]]], calib_sim: list[list[float]]) -> str:
    from validation import engine_harness as h
    from validation.engine_harness import MULTIGET_NOTE

    c = real["calibration"]
    engine = real.get("report")
    how = (f"the live replay engine (every variant at once on twin tables, {engine['generator']['driver']}, "
           f"{engine['duration_s']:.0f} s measured in {engine['blocks']} blocks of {engine['block_s']:g} s, "
           f"{a.repeats} repeat(s))" if engine else f"{a.repeats} repetitions per variant, interleaved")
    lines = [
        f"Real: 3 nodes (Cassandra 5.0, heap {a.heap}, dynamic snitch {a.dynamic_snitch}), RF 3, "
        f"{a.partitions} partitions of {a.value_size} B; multigets of {a.keys} keys at CL ONE, {a.rate:g}/s "
        f"Poisson, {a.warmup_s:g} s warm-up + {a.measure_s:g} s measured; coordinators 127.0.0.1 and "
        f"127.0.0.2, node 127.0.0.3 stopped {a.stall_ms:g} ms every {a.stall_period_s:g} s; through {how}."
        + (f" Note: {MULTIGET_NOTE}." if real.get("flattened") else ""),
        f"Calibration (no stalls, NEVER): p50/p95/p99 {' / '.join(f'{x:.2f}' for x in c['pct_ms'])} ms; "
        f"JVM CPU {c['cpu_s']:.1f} s less idle {real.get('idle_cpu_per_s', 0.0):.3f} s/s → "
        f"{sim['cpu_per_read_us']:.0f} µs per partition read; driver round trip of a trivial query "
        f"(not in the model) median {real['rtt_median_ms']:.2f} ms. Simulated without stalls (same settings): "
        f"{' / '.join(f'{x:.2f}' for x in np.mean(np.asarray(calib_sim)[:, :3], axis=0))} ms.",
        f"Simulator: `{' '.join(sim['base'])} --param speculative_retry=VARIANT --seed S --json` "
        f"(S = 0..{a.sim_seeds - 1}); "
        + (f"mean over seeds shown; service rate = 1 / CPU per read, load = {sim['offered_reads_per_s']:.0f} reads/s "
           f"/ (3 × {sim['service_rate']:.0f} × {sim['capacity_factor']:.4f})." if a.random_stalls else
           f"STALLS.csv = a real run's recorded stalls of node 3 on server {sim['stalled_server']}, one per real run "
           f"of the variant; per run the mean over seeds, shown the median over runs (as the real side); service "
           f"rate = 1 / CPU per read; the trace offers {sim['offered_reads_per_s']:.0f} reads/s = load "
           f"{sim['load']:.4f} of 3 × {sim['service_rate']:.0f} × {sim['capacity_factor']:.4f} (the capacity the "
           f"schedules leave over the trace's span, mean over runs)."),
        "",
        "| speculative_retry | real p50 (ms) | real p95 | real p99 | real p99 spread | real JVM CPU (s) | sim p50 "
        "| sim p95 | sim p99 | sim p99 spread | sim extra reads | p95 / NEVER's real : sim "
        "| p99 / NEVER's real : sim |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    variants = list(dict.fromkeys(r["variant"] for r in real["runs"]))

    def real_med(v: str) -> npt.NDArray[np.float64]:
        return np.asarray(np.median(np.asarray([r["pct_ms"] for r in real["runs"] if r["variant"] == v]), axis=0))

    def sim_runs(v: str) -> npt.NDArray[np.float64]:
        """Per simulated run, the mean over its seeds."""
        runs = next(x for k, x in simres.items() if _norm(k) == v)
        return np.asarray([np.mean(np.asarray(seeds), axis=0) for seeds in runs])

    def sim_med(v: str) -> npt.NDArray[np.float64]:
        return np.asarray(np.median(sim_runs(v), axis=0))

    r0, s0 = real_med("NEVER"), sim_med("NEVER")
    for v in variants:
        rs = np.asarray([r["pct_ms"] for r in real["runs"] if r["variant"] == v])
        med = np.median(rs, axis=0)
        ss = sim_runs(v)
        sm = np.median(ss, axis=0)
        spec = "/".join(f"{r['cpu_s']:.0f}" for r in real["runs"] if r["variant"] == v)
        lines.append(
            f"| {v} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {rs[:, 2].min():.1f}–{rs[:, 2].max():.1f} "
            f"| {spec} | {sm[0]:.2f} | {sm[1]:.2f} | {sm[2]:.2f} | {ss[:, 2].min():.1f}–{ss[:, 2].max():.1f} "
            f"| {sm[3] / max(sm[4], 1) * 100:.1f}% "
            f"| {med[1] / r0[1]:.2f} : {sm[1] / s0[1]:.2f} | {med[2] / r0[2]:.2f} : {sm[2] / s0[2]:.2f} |")
    lines += ["", "Every real run (measured part; order as run): " + "; ".join(
        f"{r['variant']} {'/'.join(f'{x:.1f}' for x in r['pct_ms'])}" for r in real["runs"]) + " ms (p50/p95/p99).",
        ""]
    if any(r.get("threshold_ms") for r in real["runs"]):
        lines += ["Each coordinator's speculation threshold (`SpeculativeSampleLatencyNanos`, ms, 127.0.0.1/127.0.0.2) "
                  "before → after each run, and the speculative retries the two sent in it (order as run): "
                  + "; ".join(f"{r['variant']} {_thr(r.get('threshold_ms'))} ({r.get('speculative_retries')})"
                              for r in real["runs"]) + ".", ""]
    if any(r.get("coordinator_p99_ms") for r in real["runs"]):
        lines += ["Each coordinator's read-latency histogram p99 after each run "
                  "(`system_views.coordinator_read_latency`, 1 ms resolution; the histogram the percentile threshold "
                  "is read from): "
                  + "; ".join(f"{r['variant']} {_thr([r.get('coordinator_p99_ms') or []])} ms" for r in real["runs"])
                  + ".", ""]
    lag = np.asarray([r["lag_ms"] for r in real["runs"]])
    errs = sum(r["errors"] for r in real["runs"])
    una = sum(r["unanswered"] for r in real["runs"])
    stl = [r["stall_ms_real"] for r in real["runs"] if r["stalls"]]
    lag_what = ("p50/p99/max (in the latencies, which count from each request's intended start)" if engine else
                "p50/p95/p99 (median over runs; not in the latencies)")
    lines.append(f"* generator lag {lag_what} {' / '.join(f'{x:.2f}' for x in np.median(lag, 0))} ms; errors {errs}, "
                 f"unanswered {una}; stall length as applied "
                 f"{min(stl, default=0.0):.1f}–{max(stl, default=0.0):.1f} ms (mean per run).")
    if engine:
        lines.append("* the engine's own figures (the paired interval against NEVER, the deployment's model, the "
                     "interference of the arms' extra reads):")
        h.print_report(engine, out=lambda line: lines.append("  " + line if line else ""))
        aa = c.get("report")
        if aa:
            def shown(x: dict[str, Any]) -> str:
                iv = x["interval_pct"]
                if x.get("diff_pct") is None:
                    return f"{x['metric']} not estimated ({x.get('reason')})"
                return f"{x['metric']} {x['diff_pct']:+.1f} %" + (f" [{iv[0]:+.1f}, {iv[1]:+.1f}]" if iv else "")

            o = aa["observed"]
            lines.append("* the calibration replay's A/A pair (NEVER against NEVER, no stalls): p99 "
                         + " vs ".join(f"{o.get(n, {}).get('p99_ms') or 0:.2f}" for n in ("NEVER", "NEVER_AA"))
                         + " ms; " + "; ".join(shown(x) for x in aa["comparisons"]))
    return "\n".join(lines) + "\n"


def _norm(v: str) -> str:
    from simulation.stock import parse_speculative_retry

    return parse_speculative_retry(v).render()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="multigets per second")
    ap.add_argument("--keys", type=int, default=8, help="partitions per multiget")
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--warmup-s", type=float, default=10.0)
    ap.add_argument("--measure-s", type=float, default=20.0)
    ap.add_argument("--stall-period-s", type=float, default=2.0)
    ap.add_argument("--stall-ms", type=float, default=150.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dynamic-snitch", choices=("on", "off"), default="off")
    ap.add_argument("--heap", default="768M")
    ap.add_argument("--sim-seeds", type=int, default=5, help="simulator seeds per real run (replayed stalls) or "
                    "in all (--random-stalls)")
    ap.add_argument("--random-stalls", action="store_true",
                    help="the model stalls every server at random at a third of node 3's rate instead of replaying "
                    "each run's recorded stalls on node 3's server")
    ap.add_argument("--driver", choices=("java4", "python"), default="java4",
                    help="the deployment's driver: the engine's generator (Java driver 4, or the Python driver)")
    ap.add_argument("--block-s", type=float, default=15.0, help="the engine's blocks (the interval needs 20 of 15 s)")
    ap.add_argument("--max-lag-ms", type=float, default=50.0, help="TAILTUNE_REPLAY_MAX_LAG_MS for the replays")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown here")
    ap.add_argument("--json-out", type=Path, default=None, help="write every figure here")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="skip the cluster: take the real figures from an earlier --json-out and redo the simulation")
    ap.add_argument("--write-trace", type=Path, default=None,
                    help="only write the workload as the simulator's CSV trace (TRACE.csv of the printed command)")
    a = ap.parse_args(argv)
    a.variants = re.split(r",(?![^(]*\))", a.variants)  # commas outside MIN(...)/MAX(...)
    if "NEVER" not in (_norm(v) for v in a.variants):
        ap.error("--variants must include NEVER: the table's ratios are to NEVER's figures")
    # the engine sends the trace's first --warmup-s unmeasured, then measures it from its start
    w = make_workload(a.rate, 0.0, a.measure_s + 1.0, a.keys, a.partitions, a.seed)
    if a.write_trace is not None:
        write_trace(as_sent(w, a.warmup_s), a.write_trace, a.value_size)
        return
    if a.from_json is not None:
        real = json.loads(a.from_json.read_text())["real"]
    else:
        real = run_real(a, w)
        if a.json_out is not None:  # the real figures first: the simulation can be redone from them
            a.json_out.write_text(json.dumps({"real": real}, indent=1, default=str))
    if not a.random_stalls and not all(r.get("stall_schedule_ms") for r in real["runs"]):
        print("note: the stalls' schedule is recorded for one repeat only: the model side stalls at random "
              "(--random-stalls)", flush=True)
        a.random_stalls = True
    w = as_sent(w, a.warmup_s)
    with tempfile.TemporaryDirectory(prefix="tailtune-stock-val-") as tmp:
        trace = Path(tmp) / "trace.csv"
        (write_flat if real.get("flattened") else write_trace)(w, trace, a.value_size)  # what the engine replayed
        sim = sim_commands(a, w, real, trace)
        simres = simulate_all(a, real, sim, Path(tmp))
        calib_sim = run_sim(sim["calibration"], "NEVER", a.sim_seeds)
    for k in ("base", "calibration"):
        sim[k] = [x if x != str(trace) else "TRACE.csv" for x in sim[k]]
    text = to_markdown(a, real, sim, simres, calib_sim)
    print(text)
    if a.out is not None:
        a.out.write_text(text)
    if a.json_out is not None:
        args = {k: v for k, v in vars(a).items() if k not in ("out", "json_out", "from_json")}
        a.json_out.write_text(json.dumps({"args": args, "real": real, "sim": sim, "sim_results": simres,
                                          "sim_calibration": calib_sim}, indent=1, default=str))


if __name__ == "__main__":
    main()
