"""Predicted vs observed on real Cassandra: the multiget latency kvsim predicts for a deployment, with the model
tailtune builds with no discovery or calibration ("before": the simulator's defaults) and with the model it builds
after discovering and calibrating the live deployment ("after"), against the latency the client observes.

Systems (`--system`): `single` — one real node (RF 1, `tests.servers.cassandra_server`); `cluster` — three nodes on
127.0.0.1–127.0.0.3 (`tests.servers.cassandra_cluster`), RF 3, reads at CL ONE, `speculative_retry = NEVER` (the
comparison is about service, queueing and network only), dynamic snitch off (SimpleSnitch: every coordinator
reads a partition's first replica in ring order). Table `tailtune_val.kv (k text PRIMARY KEY, v blob)`,
`--partitions` rows of `--value-size` bytes, loaded at CL ALL.

Steps, per system:

1. **Model.** The system is registered as a deployment that allows the live replay (a throw-away TAILTUNE_HOME,
   `validation.engine_harness`; its table the one above, its driver `--driver`) and discovered and calibrated as
   `tailtune deployments discover` / `calibrate` do it (`control.discovery.discover_deployment`,
   `control.calibration.calibrate_deployment`), with `TAILTUNE_CONNECT_NETWORKS` = 127.0.0.0/8 and the settings'
   defaults (`calibrate_reads`, `discover_probe_reads`) — after a JIT warm-up pass (a closed loop as in step 2) and
   `--settle-s` idle seconds (calibration measures an idle system). The model the deployment then holds is "after".
   `build_model` turns the result into the replay's options ("after"); `build_model` of an empty model gives
   "before". Both are printed with their sources; the calibrated inputs with their 95 % intervals.
2. **Load.** The saturation throughput is measured first: `--sat-concurrency` multigets kept in flight for
   `--sat-s` seconds (after an uncounted pass of the same length that also warms the JIT); load = offered
   partition reads/s, and the two loads are `--load-fractions` of that throughput.
3. **Observation**, through the live replay engine (`control.replay.run_replay`, docs/replay.md). A known trace per
   load: Poisson multigets of `--keys` keys drawn uniformly from the partitions (seeded; the same arrivals and keys
   in every run of a load), ingested as a dataset, replayed by the engine (the engine's `--warmup-s` sent
   unmeasured, then `--measure-s` measured in blocks of `--block-s`, each latency from its intended start, the
   generator's lag beside it) at CL LOCAL_ONE on twin tables of two arms, both `NEVER` with `multiget.shape=in`:
   an A/A pair, whose difference (with its interval when the run holds 20 blocks of 15 s) is what this machine
   and the engine alone make of one config; the observed figures are the first arm's. `--repeats` runs per load,
   interleaved (order rotated). Before each run `--noise-reps` trivial round trips (`SELECT release_version FROM
   system.local`, one at a time, nothing else running) measure the machine's own noise; the JVMs' CPU time over
   each replay is reported (utilisation of the box's cores). The engine's own prediction (the deployment's model,
   one seed, at the achieved rate) is kept beside the script's. The engine sends each multiget as one `IN` query
   (`multiget.shape=in`); a report whose multigets were flattened into one-partition reads says so in the output,
   and the predictions then replay the same one-key reads.

   What the engine changes, and why it is sounder: the observation used to be a Python loop timing each
   `execute_async` call to its callback, with the generator's lag reported apart — a generator that fell behind
   hid its delay from the latencies (coordinated omission), and at 106 µs of client CPU per read it measured
   itself. The engine times from the intended start and uses the deployment's own driver.
4. **Prediction.** The trace the engine sent (its warm-up, then the measured run; request ids, arrival times,
   keys) replayed by kvsim through
   `simulation.cassandra` with the model's options and the trace's own arrival times, policy `stock` with
   `speculative_retry=NEVER`, `driver=python`, `replica=round-robin` (the dynamic snitch is off: each server is
   the first replica of a third of the partitions, as round-robin reads it) — the same policy before and after,
   so only the model's inputs differ; warm-up = the warm-up's share of the requests; `--sim-seeds` seeds (mean,
   min–max). **What the predicted latency includes:** the simulator's client is the coordinator; a request's
   latency is one-way network + queueing + service of its ops (in parallel on the slots) + one-way network. With
   the calibrated model the two one-way hops are replaced by a round trip drawn per request from the calibration's
   trivial round trips (client → coordinator, driver and smallest server cost included), and each partition
   beyond the first adds the calibrated per-partition cost (8-partition reads less single-partition reads, over
   7); the service time is the single-partition read less the trivial request (for the cluster: the
   coordinator's forwarding to a non-local first replica included, in the proportion the calibration's reads met
   it). Nothing is added or adjusted here; the default model's network is the simulator's 50 µs one way (no
   client hop).

Output: a markdown table (system, load, percentile, predicted before / after, observed median with min–max,
errors in %, the goal's verdict) and noise lines; `--json-out` keeps every figure.

    .venv/bin/python -m validation.predicted_cassandra --system single --json-out single.json
    .venv/bin/python -m validation.predicted_cassandra --system cluster --json-out cluster.json
    .venv/bin/python -m validation.predicted_cassandra --from-json single.json cluster.json   # the tables again

Not a CI test (minutes; real JVMs); tests/simulator/test_predicted_cassandra.py checks the pure helpers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from validation.cassandra_common import KEYSPACE, TABLE, create_and_load, trivial_round_trips_s
from validation.stock_cassandra import QS, Workload, as_sent, jvm_cpu_s, make_workload, pct, write_flat, write_trace

#: The policy both predictions replay: stock Cassandra with no speculation, the Python driver, first replicas
#: spread as SimpleSnitch's ring order spreads them.
POLICY = "stock"
PARAMS: dict[str, str | float | int] = {"speculative_retry": "NEVER", "driver": "python", "replica": "round-robin"}
#: The fidelity goal: |error| at p50 and p99 (p95 has none).
GOAL_PCT = {0.50: 15.0, 0.99: 25.0}
SYSTEMS = {"single": (1, 1), "cluster": (3, 3)}  # nodes, RF


# --- pure helpers -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    name: str
    fraction: float
    reads_per_s: float  # offered partition reads/s
    rate: float  # multigets/s


def loads_from(saturation_reads_per_s: float, fractions: Sequence[float], keys: int) -> list[Load]:
    """The loads as fractions of the measured saturation (partition reads/s), lightest first."""
    if saturation_reads_per_s <= 0 or keys < 1:
        raise ValueError(f"saturation {saturation_reads_per_s} reads/s, {keys} keys: need > 0")
    out = []
    for f in sorted(fractions):
        if not 0 < f < 1:
            raise ValueError(f"load fraction {f}: need 0 < f < 1")
        reads = f * saturation_reads_per_s
        out.append(Load(f"{f:.0%}", f, reads, reads / keys))
    return out


def err_pct(predicted: float, observed: float) -> float:
    """Signed error of a prediction, % of the observation (NaN when the observation is not positive)."""
    return 100.0 * (predicted - observed) / observed if observed > 0 else float("nan")


def spread(rows: Sequence[Sequence[float]]) -> dict[str, list[float]]:
    """Per column: median, mean, min and max over the rows (runs or seeds)."""
    a = np.asarray(rows, dtype=np.float64)
    return {"median": np.median(a, 0).tolist(), "mean": np.mean(a, 0).tolist(), "min": np.min(a, 0).tolist(),
            "max": np.max(a, 0).tolist()}


def verdict(q: float, err: float, observed_range_pct: float) -> str:
    """`ok` within the goal; `noise` outside it but within the observation's own run-to-run range (the machine
    cannot resolve the difference); `miss` otherwise; `—` where there is no goal (p95)."""
    goal = GOAL_PCT.get(q)
    if goal is None or not np.isfinite(err):
        return "—"
    if abs(err) <= goal:
        return "ok"
    return "noise" if abs(err) <= observed_range_pct else "miss"


def _fmt(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def table_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per (system, load, percentile): predicted before / after (seed means), observed (median of runs,
    min–max), errors, the observation's range in % of its median and the verdict."""
    rows = []
    for system in doc["systems"]:
        for load in system["loads"]:
            obs = spread([r["pct_ms"] for r in system["runs"] if r["load"] == load["name"]])
            before = spread(load["predicted"]["before"])
            after = spread(load["predicted"]["after"])
            for i, q in enumerate(QS):
                o = obs["median"][i]
                rng = 100.0 * (obs["max"][i] - obs["min"][i]) / o if o > 0 else float("nan")
                e_after = err_pct(after["mean"][i], o)
                rows.append({
                    "system": system["system"], "load": load["name"], "reads_per_s": load["reads_per_s"],
                    "q": q, "before": before["mean"][i], "before_range": [before["min"][i], before["max"][i]],
                    "after": after["mean"][i], "after_range": [after["min"][i], after["max"][i]],
                    "observed": o, "observed_range": [obs["min"][i], obs["max"][i]],
                    "err_before": err_pct(before["mean"][i], o), "err_after": e_after, "observed_range_pct": rng,
                    "verdict": verdict(q, e_after, rng),
                })
    return rows


def to_markdown(doc: Mapping[str, Any]) -> str:
    lines = [
        "| system | load (reads/s) | pct | predicted before (ms) | predicted after (ms) | observed (ms), "
        "median (min–max) | err before | err after | obs range | goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table_rows(doc):
        lines.append(
            f"| {r['system']} | {r['load']} ({r['reads_per_s']:.0f}) | p{round(r['q'] * 100)} | {_fmt(r['before'])} "
            f"| {_fmt(r['after'])} ({_fmt(r['after_range'][0])}–{_fmt(r['after_range'][1])}) "
            f"| {_fmt(r['observed'])} ({_fmt(r['observed_range'][0])}–{_fmt(r['observed_range'][1])}) "
            f"| {r['err_before']:+.0f}% | {r['err_after']:+.0f}% | {r['observed_range_pct']:.0f}% | {r['verdict']} |")
    lines.append("")
    for system in doc["systems"]:
        lines += _notes(system)
    return "\n".join(lines) + "\n"


def _notes(system: Mapping[str, Any]) -> list[str]:
    name = system["system"]
    sat = system["saturation"]
    inp = system["model"]["after"]["inputs"]
    net = inp.get("network", {})
    svc = inp.get("service_time", {})
    key = inp.get("client_key", {})
    engine = bool(system.get("engine"))
    where_lag = "in the latencies, which count from each request's intended start" if engine else "not in the latencies"
    noise = np.asarray([r["noise_ms"] for r in system["runs"]])
    lag = np.asarray([r["lag_ms"] for r in system["runs"]])
    out = [
        f"* **{name}**: saturation {sat['reads_per_s']:.0f} partition reads/s ({sat['multigets_per_s']:.0f} "
        f"multigets/s, {sat['concurrency']} in flight; JVM CPU {sat['jvm_cpu_per_read_us']:.0f} µs and client CPU "
        f"{sat['client_cpu_per_read_us']:.0f} µs per read); loads "
        + ", ".join(f"{ld['name']} = {ld['reads_per_s']:.0f} reads/s" for ld in system["loads"]) + ".",
    ]
    if net:
        v = net["value"]["one_way_ms"]
        lo, hi = net.get("uncertainty", {}).get("one_way_ms", [v, v])
        out.append(f"* {name} calibrated: network one way {v:.3f} ms [{lo:.3f}, {hi:.3f}]"
                   + (f"; service time mean {svc['value']['mean_ms']:.3f} ms "
                      f"[{svc['uncertainty']['mean_ms'][0]:.3f}, {svc['uncertainty']['mean_ms'][1]:.3f}], lognormal "
                      f"σ {svc['value']['sigma']:.2f} (fit p99 error {svc['fit']['error_pct']:+.0f}%)" if svc else "")
                   + (f"; round trip p50/p99 {net['value']['rtt_quantiles_ms'][50]:.3f} / "
                      f"{net['value']['rtt_quantiles_ms'][99]:.3f} ms (replayed as each request's)"
                      if net["value"].get("rtt_quantiles_ms") else "")
                   + (f"; per-partition cost {key['value']['us']:.0f} µs [{key['uncertainty']['us'][0]:.0f}, "
                      f"{key['uncertainty']['us'][1]:.0f}] (from {key.get('keys', '?')}-partition reads)"
                      if key and key.get("value") else "")
                   + f"; discovered {system['model']['after']['options']['servers']} server(s), "
                   f"{system['model']['after']['options']['slots']} slots (concurrent_reads), RF "
                   f"{system['model']['after']['options']['replication']}; offered load to the model "
                   + ", ".join(f"{ld['name']} {ld['model_load']['after']:.3f}" for ld in system["loads"])
                   + " (before: " + ", ".join(f"{ld['model_load']['before']:.4f}" for ld in system["loads"]) + ").")
    out.append(f"* {name} noise: trivial round trip alone, p50 {np.median(noise[:, 0]):.3f} ms "
               f"({noise[:, 0].min():.3f}–{noise[:, 0].max():.3f}), p99 {np.median(noise[:, 2]):.3f} ms "
               f"({noise[:, 2].min():.3f}–{noise[:, 2].max():.3f}) over {len(noise)} batches; generator lag p50/p99 "
               f"(median of runs) {np.median(lag[:, 0]):.3f} / {np.median(lag[:, 1 if engine else 2]):.3f} ms "
               f"({where_lag}); "
               f"errors {sum(r['errors'] for r in system['runs'])}, unanswered "
               f"{sum(r['unanswered'] for r in system['runs'])}; JVM CPU per run "
               + ", ".join(f"{r['load']} {r['cpu_s']:.1f} s" for r in system["runs"]) + ".")
    return out


# --- the real side ------------------------------------------------------------------------------------------
@contextlib.contextmanager
def servers(system: str, heap: str) -> Iterator[tuple[list[str], int, list[int]]]:
    """(hosts, native port, JVM pids) of the system, stopped afterwards."""
    if system == "single":
        from tests.servers.cassandra_server import running_cassandra

        with running_cassandra(heap=heap) as node:
            yield [node.host], node.port, [node.proc.pid] if node.proc else []
    else:
        from tests.servers.cassandra_cluster import running_cluster

        with running_cluster(SYSTEMS[system][0], heap=heap, dynamic_snitch=False) as nodes:
            yield [n.host for n in nodes], nodes[0].port, [n.proc.pid for n in nodes if n.proc is not None]


def saturation(session: Any, sel: Any, *, keys: int, partitions: int, seconds: float, concurrency: int,
               seed: int, pids: Sequence[int]) -> dict[str, Any]:
    """Closed loop: `concurrency` multigets in flight for `seconds`; answered multigets and partition reads per
    second, the JVMs' and this process's CPU per partition read."""
    from cassandra.concurrent import execute_concurrent_with_args

    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + seconds

    def params() -> Iterator[tuple[list[str]]]:
        while time.monotonic() < deadline:
            yield ([f"k{int(x)}" for x in rng.choice(partitions, size=keys, replace=False)],)

    cpu0, me0, t0 = jvm_cpu_s(pids), os.times(), time.monotonic()
    res = execute_concurrent_with_args(session, sel, params(), concurrency=concurrency, raise_on_first_error=False)
    elapsed = time.monotonic() - t0
    me1 = os.times()
    ok = sum(1 for r in res if r.success)
    reads = max(1, ok * keys)
    return {"seconds": elapsed, "concurrency": concurrency, "multigets_per_s": ok / elapsed,
            "reads_per_s": ok * keys / elapsed, "errors": len(res) - ok,
            "jvm_cpu_per_read_us": (jvm_cpu_s(pids) - cpu0) / reads * 1e6,
            "client_cpu_per_read_us": ((me1.user - me0.user) + (me1.system - me0.system)) / reads * 1e6}


def model_of(hosts: Sequence[str], port: int, log: Any = print, driver: str = "python") -> dict[str, Any]:
    """Discover and calibrate the deployment with tailtune's functions; the stored model (as the deployment row
    would hold it) and what each step found."""
    from base.settings import Settings
    from control.calibration import merge_calibration
    from control.discovery import discover, merge_model
    from control.egress import Egress
    from kinds.cassandra.calibration import calibrate_cassandra

    settings = Settings(connect_networks=["127.0.0.0/8"])
    connection = {"contact_points": [hosts[0]], "port": port}
    tables = [f"{KEYSPACE}.{TABLE}"]
    found = discover("cassandra", connection, tables, settings, server="stock", log=log)
    model = merge_model(None, found)
    cal = calibrate_cassandra(connection, tables, driver=driver, egress=Egress.of(settings),
                              timeout_s=settings.discover_timeout_s, reads=settings.calibrate_reads,
                              warmup=settings.calibrate_warmup, log=log)
    model = merge_calibration(model, cal)
    return {"model": model, "discovery_notes": found.notes, "current_config": found.current_config,
            "calibration_notes": cal.notes, "calibration_readings": cal.readings,
            "settings": {"calibrate_reads": settings.calibrate_reads, "calibrate_warmup": settings.calibrate_warmup,
                         "discover_probe_reads": settings.discover_probe_reads}}


def run_real(a: argparse.Namespace) -> dict[str, Any]:
    from cassandra import ConsistencyLevel
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    from validation import engine_harness as h

    nodes, rf = SYSTEMS[a.system]
    out: dict[str, Any] = {"system": a.system, "nodes": nodes, "replication": rf, "runs": [],
                           "loadavg_start": os.getloadavg(), "engine": True}
    env = {"TAILTUNE_REPLAY_WARMUP_S": str(a.warmup_s), "TAILTUNE_REPLAY_MAX_LAG_MS": str(a.max_lag_ms),
           "TAILTUNE_CONNECT_NETWORKS": "127.0.0.0/8"}
    with h.engine_home("predicted-cassandra", env) as settings, servers(a.system, a.heap) as (hosts, port, pids):
        profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), consistency_level=ConsistencyLevel.ONE,
                                   request_timeout=20.0)
        cluster = Cluster(hosts, port=port, protocol_version=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        try:
            s = cluster.connect()
            create_and_load(s, replication=rf, partitions=a.partitions, value_size=a.value_size)
            s.execute(f"ALTER TABLE {KEYSPACE}.{TABLE} WITH speculative_retry = 'NEVER'")
            sel = s.prepare(f"SELECT k, v FROM {KEYSPACE}.{TABLE} WHERE k IN ?")
            sel.consistency_level = ConsistencyLevel.ONE
            dep = h.register(settings, {
                "name": "predicted", "kind": "cassandra", "tables": [f"{KEYSPACE}.{TABLE}"], "replay_allowed": True,
                "driver": a.driver, "topology": {"servers": nodes, "replication": rf},
                "connection": {"contact_points": [hosts[0]], "port": port}})

            def sat_run(seed: int) -> dict[str, Any]:
                return saturation(s, sel, keys=a.keys, partitions=a.partitions, seconds=a.sat_s,
                                  concurrency=a.sat_concurrency, seed=seed, pids=pids)

            warm = sat_run(a.seed + 100)
            print(f"JIT warm-up pass (not counted): {warm['reads_per_s']:.0f} reads/s; {a.settle_s:g} s idle",
                  flush=True)
            time.sleep(a.settle_s)  # calibration measures an idle system (docs/model.md § Calibration)
            print("discovery and calibration (control):", flush=True)
            found, cal = h.discover(settings, dep), h.calibrate(settings, dep)
            stored = h.stored_model(settings, dep)
            out["model_found"] = {
                "model": stored, "discovery_notes": found.get("notes", []),
                "current_config": found.get("current_config"),
                "calibration_notes": cal.get("notes", []), "calibration_readings": stored.get("readings", {}),
                "settings": {"calibrate_reads": settings.calibrate_reads, "calibrate_warmup": settings.calibrate_warmup,
                             "discover_probe_reads": settings.discover_probe_reads}}
            sat = sat_run(a.seed + 101)
            out["saturation"] = sat
            print(f"saturation: {sat['reads_per_s']:.0f} partition reads/s ({sat['multigets_per_s']:.0f} multigets/s,"
                  f" {a.sat_concurrency} in flight), JVM CPU {sat['jvm_cpu_per_read_us']:.0f} µs / client CPU "
                  f"{sat['client_cpu_per_read_us']:.0f} µs per read", flush=True)
            loads = loads_from(sat["reads_per_s"], a.load_fractions, a.keys)
            out["loads"] = [vars(ld) for ld in loads]
            datasets = {}
            for ld in loads:
                path = settings.home_dir / f"trace-{ld.name.rstrip('%')}.csv"
                write_trace(engine_workload(a, ld.rate), path, a.value_size)
                datasets[ld.name] = h.ingest(settings, path)
            arms = h.stock_arms(["NEVER"])
            arms.append(("NEVER_AA", arms[0][1]))
            for rep in range(a.repeats):
                order = loads[rep % len(loads):] + loads[:rep % len(loads)]
                for ld in order:
                    noise = trivial_round_trips_s(s, a.noise_reps)
                    time.sleep(0.5)
                    with h.Phases(sample=lambda: jvm_cpu_s(pids)) as phases:
                        doc = h.replay("predicted", datasets[ld.name], arms, settings=settings,
                                       duration_s=a.measure_s, block_s=a.block_s, seed=a.seed + rep,
                                       on_progress=phases)
                    out["flattened"] = h.flattened(doc)
                    o, g = doc["observed"].get("NEVER", {}), doc["generator"]["lag_ms"]
                    run: dict[str, Any] = {
                        "load": ld.name, "rep": rep, "pct_ms": [o.get("p50_ms"), o.get("p95_ms"), o.get("p99_ms")],
                        "lag_ms": [g.get("p50"), g.get("p99"), g.get("max")], "noise_ms": pct(noise),
                        "errors": o.get("errors", 0), "unanswered": o.get("timeouts", 0),
                        "cpu_s": phases.sampled, "requests": o.get("requests", 0),
                        "loadavg": os.getloadavg()[0],
                        "engine_predicted_ms": [doc["predicted"].get("NEVER", {}).get(k)
                                                for k in ("p50_ms", "p95_ms", "p99_ms")],
                        "aa": [{k: c.get(k) for k in ("metric", "diff_pct", "interval_pct", "reason")}
                               for c in doc["comparisons"]],
                        "generator": doc["generator"], "notes": doc["notes"]}
                    out["runs"].append(run)
                    print(f"  rep {rep + 1} {ld.name:>4} ({ld.reads_per_s:.0f} reads/s): p50/p95/p99 "
                          + " / ".join("-" if x is None else f"{x:.3f}" for x in run["pct_ms"])
                          + f" ms; lag p99 {run['lag_ms'][1]:.2f} ms; trivial p50/p99 {run['noise_ms'][0]:.3f}/"
                          f"{run['noise_ms'][2]:.3f} ms; errors {run['errors']}; JVM CPU {run['cpu_s']:.1f} s; "
                          f"load avg {run['loadavg']:.2f}; A/A "
                          + ", ".join(f"{c['metric']} {c['diff_pct']:+.1f} %" if c.get("diff_pct") is not None
                                      else f"{c['metric']} not estimated ({c.get('reason')})" for c in run["aa"]),
                          flush=True)
                    for note in doc["notes"]:
                        if note.startswith("refused as a comparison"):
                            print(f"  note: {note}", flush=True)
                    if out["flattened"]:
                        print(f"  note: {h.MULTIGET_NOTE}", flush=True)
        finally:
            cluster.shutdown()
    out["loadavg_end"] = os.getloadavg()
    return out


def engine_workload(a: argparse.Namespace, rate: float) -> Workload:
    """The trace the engine is given for a load: `--measure-s` (and a second) of Poisson multigets, no warm-up of
    its own (the engine sends its first `--warmup-s` before measuring)."""
    return make_workload(rate, 0.0, a.measure_s + 1.0, a.keys, a.partitions, a.seed)


# --- the predictions ----------------------------------------------------------------------------------------
def models(found: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The replay options of the model before (no discovery, no calibration) and after, with their sources."""
    from control.model import build_model

    out = {}
    for name, stored in (("before", None), ("after", found["model"])):
        m = build_model("cassandra", {}, {}, stored, timestamps=True)
        out[name] = {"options": m.options, "sources": m.sources, "inputs": m.inputs, "notes": m.notes}
    return out


def predict(trace: Path, options: Mapping[str, Any], warmup: float, seeds: int) -> tuple[list[list[float]], float]:
    """p50/p95/p99 (ms) of each seed's replay of `trace` on the model `options`; the load the trace offers it."""
    from simulation import cassandra
    from simulation.cassandra import CassandraDeployment
    from simulation.policies import resolve
    from simulation.source import WorkloadSource

    dep = CassandraDeployment.from_dict({**options, "warmup": warmup})
    prepared = cassandra.prepare(WorkloadSource(trace=str(trace)).load(), dep, source=str(trace))
    policy = resolve(POLICY, PARAMS)
    res = []
    for seed in range(seeds):
        r = cassandra.replay(prepared, dep, policy, seed)
        res.append([float(r.p50_ms), float(r.p95_ms), float(r.p99_ms)])
    return res, float(cassandra.offered_load(prepared, dep) or float("nan"))


def add_predictions(a: argparse.Namespace, real: dict[str, Any]) -> dict[str, Any]:
    mods = models(real["model_found"])
    real["model"] = mods
    loads = []
    with tempfile.TemporaryDirectory(prefix="tailtune-predicted-cassandra-") as tmp:
        for ld in real["loads"]:
            w = as_sent(engine_workload(a, ld["rate"]), a.warmup_s)
            trace = Path(tmp) / f"trace-{ld['name'].rstrip('%')}.csv"
            (write_flat if real.get("flattened") else write_trace)(w, trace, a.value_size)
            warm = float(np.mean(~w.measured))
            pred, model_load = {}, {}
            for name, m in mods.items():
                pred[name], model_load[name] = predict(trace, m["options"], warm, a.sim_seeds)
            loads.append({**ld, "warmup_fraction": warm, "requests": int(w.arrivals.size), "predicted": pred,
                          "model_load": model_load})
    real["loads"] = loads
    return real


def describe_model(system: Mapping[str, Any]) -> str:
    lines = [f"model of {system['system']}:"]
    for name, m in system["model"].items():
        opts = {k: v for k, v in m["options"].items() if k != "ring"}
        lines.append(f"  {name}: {json.dumps(opts)}; sources {json.dumps(m['sources'])}")
        lines += [f"    note: {n}" for n in m["notes"]]
    found = system["model_found"]
    for k in ("network", "service_time"):
        entry = found["model"]["inputs"].get(k)
        if entry is not None:
            lines.append(f"  calibrated {k}: {json.dumps(entry['value'])} 95% interval "
                         f"{json.dumps(entry.get('uncertainty'))}" + (f" fit {json.dumps(entry['fit'])}"
                                                                      if "fit" in entry else ""))
    lines.append(f"  calibration readings: {json.dumps(found['calibration_readings'])}")
    lines += [f"  note: {n}" for n in (*found["discovery_notes"], *found["calibration_notes"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--system", choices=tuple(SYSTEMS), default="single")
    ap.add_argument("--keys", type=int, default=4, help="partitions per multiget")
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--load-fractions", type=lambda t: [float(x) for x in t.split(",")], default=[0.2, 0.6],
                    help="the loads, as fractions of the measured saturation throughput")
    ap.add_argument("--sat-s", type=float, default=8.0)
    ap.add_argument("--sat-concurrency", type=int, default=64)
    ap.add_argument("--settle-s", type=float, default=5.0, help="idle seconds between the warm-up pass and the "
                    "calibration")
    ap.add_argument("--warmup-s", type=float, default=5.0)
    ap.add_argument("--measure-s", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--noise-reps", type=int, default=300)
    ap.add_argument("--heap", default="768M")
    ap.add_argument("--driver", choices=("python", "java4"), default="python",
                    help="the deployment's driver: the engine's generator (the Python driver the model replays, or "
                    "the Java driver 4)")
    ap.add_argument("--block-s", type=float, default=15.0, help="the engine's blocks (the interval needs 20 of 15 s)")
    ap.add_argument("--max-lag-ms", type=float, default=50.0, help="TAILTUNE_REPLAY_MAX_LAG_MS for the replays")
    ap.add_argument("--sim-seeds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--from-json", type=Path, nargs="+", default=None,
                    help="no servers: print the table of earlier --json-out files (one per system)")
    a = ap.parse_args(argv)
    if a.from_json is not None:
        shown = {"systems": [s for p in a.from_json for s in json.loads(p.read_text())["systems"]]}
        print(to_markdown(shown))
        return
    t0 = time.time()
    system = add_predictions(a, run_real(a))
    print(describe_model(system))
    doc: dict[str, Any] = {"args": {k: v for k, v in vars(a).items() if k not in ("json_out", "from_json")},
                           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t0)),
                           "wall_s": time.time() - t0, "systems": [system]}
    print(to_markdown(doc))
    if a.json_out is not None:
        a.json_out.write_text(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
