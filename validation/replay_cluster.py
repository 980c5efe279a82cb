"""The live replay (`control.replay.run_replay`, docs/replay.md) on a real three-node Cassandra 5.0 cluster with one
node stalled in bursts: `NEVER`, `ALWAYS` and `99p` twins in one request stream, their extra reads, and their p99
against `NEVER` with the paired block bootstrap's interval.

Cluster: `tests.servers.cassandra_cluster` (127.0.0.1–.3, balanced tokens, the dynamic snitch off: a coordinator
reads the first replica in ring order, so node 3 is the first replica of a third of the partitions). The user's
keyspace has RF 3 (so the twins do); its table `shop.items`. The deployment declares 3 servers and RF 3 (its model's
other inputs are the simulator's defaults: no discovery or calibration here, and no stalls in the model); it
names node 1 as its contact point; the
generator reaches every node (so the engine reads every node's counters), token-aware, and the Java driver's slow
replica avoidance (on, its default, in every arm) moves a node with many requests in flight — the stalled one — to
the back of a request's coordinators: a stalled coordinator cannot speculate, whatever the arm. Node 3's JVM is
stopped (SIGSTOP) for `--stall-ms` every `--stall-period-s` and continued (SIGCONT) from the start of the replay's
warm-up to its end.

Trace: `--rate` one-key reads per second for `--duration` s (+ the 10 s warm-up), Poisson arrivals, keys Zipf(1.1)
over `--keys`, value sizes 100–2,000 bytes (seeded), ingested as a dataset; the deployment allows the replay
(set by an admin principal). The engine's defaults otherwise: warm-up 10 s, blocks of `--block-s` (15 s), the
Java driver 4 generator, LOCAL_ONE. `--max-lag-ms` relaxes `TAILTUNE_REPLAY_MAX_LAG_MS` (the recorded run's lag is
printed beside its figures).

    .venv/bin/python -m validation.replay_cluster --rate 300 --duration 300 --json-out replay_cluster.json

Not a CI test (minutes; three JVMs of `--heap` each and the generator's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np


def _trace(path: Path, rate: float, seconds: float, keys: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    ts = np.cumsum(rng.exponential(1.0 / rate, size=n))
    ranks = np.arange(1, keys + 1, dtype=np.float64)
    p = ranks ** -1.1
    chosen = rng.choice(keys, size=n, p=p / p.sum())
    sizes = rng.integers(100, 2001, size=keys)
    with path.open("w") as out:
        out.write("request_id,ts,key,value_size\n")
        for i in range(n):
            out.write(f"{i},{ts[i]:.6f},item{chosen[i]},{sizes[chosen[i]]}\n")


def _stalls(node: Any, stall_ms: float, period_s: float, stop: threading.Event, log: list[tuple[float, float]]
            ) -> None:
    while not stop.wait(max(0.0, period_s - stall_ms / 1000.0)):
        t0 = time.time()
        node.pause()
        stop.wait(stall_ms / 1000.0)
        node.resume()
        log.append((t0, time.time()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.replay_cluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=300.0)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--block-s", type=float, default=15.0)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--stall-ms", type=float, default=300.0)
    ap.add_argument("--stall-period-s", type=float, default=3.0)
    ap.add_argument("--heap", default="512M")
    ap.add_argument("--max-lag-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", type=Path, default=None)
    a = ap.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="tailtune-replay-cluster-"))
    os.environ["TAILTUNE_HOME"] = str(home)
    os.environ["TAILTUNE_REPLAY_MAX_LAG_MS"] = str(a.max_lag_ms)
    from base.settings import get_settings

    get_settings.cache_clear()
    settings = get_settings()
    from cassandra.cluster import Cluster

    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.replay import LagTooHigh, run_replay
    from control.tokens import Principal
    from ingest.pipeline import ingest_file
    from tests.servers.cassandra_cluster import running_cluster

    _trace(home / "reads.csv", a.rate, a.duration + 15.0, a.keys, a.seed)
    dataset = ingest_file(home / "reads.csv", settings=settings).id
    with running_cluster(3, heap=a.heap, dynamic_snitch=False) as nodes:
        port = nodes[0].port
        cluster = Cluster([nodes[0].host], port=port)
        session = cluster.connect()
        session.execute("CREATE KEYSPACE shop WITH replication = {'class': 'SimpleStrategy', "
                        "'replication_factor': 3}")
        session.execute("CREATE TABLE shop.items (k text PRIMARY KEY, v blob)")
        cluster.shutdown()
        db = database_for(settings.resolved_database_url)
        with db.session() as s:
            body = DeploymentCreate.model_validate({
                "name": "shop", "kind": "cassandra", "tables": ["shop.items"], "replay_allowed": True,
                "topology": {"servers": 3, "replication": 3},
                "connection": {"contact_points": [nodes[0].host], "port": port}})
            deployments.create(s, settings, body, Principal("validation", "admin"))
        db.dispose()
        stop, log = threading.Event(), list[tuple[float, float]]()
        started = [False]

        def on_progress(stage: str, fraction: float) -> None:
            if stage == "replay" and fraction > 0.26 and not started[0]:  # loading done: stall from the warm-up on
                started[0] = True
                threading.Thread(target=_stalls, args=(nodes[2], a.stall_ms, a.stall_period_s, stop, log),
                                 daemon=True).start()
            print(f"  {stage} {fraction:.0%}", file=sys.stderr, flush=True)

        arms = [("NEVER", "stock:speculative_retry=NEVER"), ("ALWAYS", "stock:speculative_retry=ALWAYS"),
                ("P99", "stock:speculative_retry=99p")]
        t0 = time.time()
        try:
            report = run_replay("shop", dataset, arms, duration_s=a.duration, block_s=a.block_s, seed=a.seed,
                                settings=settings, on_progress=on_progress)
        except LagTooHigh as exc:
            report = exc.report
            print(f"note: {exc}", file=sys.stderr)
        finally:
            stop.set()
            nodes[2].resume()
        doc = report.as_dict()
    doc["validation"] = {"command": " ".join(["python -m validation.replay_cluster", *(argv or sys.argv[1:])]),
                         "stalls": len(log), "stall_ms": a.stall_ms, "stall_period_s": a.stall_period_s,
                         "wall_s": time.time() - t0}
    _print(doc)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps(doc, indent=1))
    shutil.rmtree(home, ignore_errors=True)
    return 0


def _print(doc: dict[str, Any]) -> None:
    g, r = doc["generator"], doc["rate"]
    print(f"{doc['duration_s']:.0f} s measured, {doc['blocks']} blocks of {doc['block_s']:g} s; "
          f"{r['achieved_per_s']:.0f}/{r['intended_per_s']:.0f} req/s; generator {g['driver']}, lag p50/p99/max "
          f"{g['lag_ms']['p50']:.2f}/{g['lag_ms']['p99']:.2f}/{g['lag_ms']['max']:.2f} ms (ok: {g['lag_ok']}); "
          f"{doc['validation']['stalls']} stalls")
    print("| arm | requests | observed p50 / p95 / p99 ms | predicted p50 / p95 / p99 ms | replica reads | "
          "speculative retries | extra reads |")
    print("|---|---|---|---|---|---|---|")
    for arm in doc["arms"]:
        n = arm["name"]
        o, p, c = doc["observed"][n], doc["predicted"].get(n, {}), doc["cluster"]["arms"][n]

        def f(d: dict[str, Any]) -> str:
            return " / ".join("-" if d.get(k) is None else f"{d[k]:.2f}" for k in ("p50_ms", "p95_ms", "p99_ms"))

        print(f"| {n} | {o['requests']} | {f(o)} | {f(p)} | {c['replica_reads']} | {c['speculative_retries']} | "
              f"{c['extra_reads']} |")
    for c in doc["comparisons"]:
        if c["interval_pct"] is None:
            print(f"{c['metric']} {c['candidate']} vs {c['baseline']}: not estimated ({c['reason']})")
        else:
            lo, hi = c["interval_pct"]
            print(f"{c['metric']} {c['candidate']} vs {c['baseline']}: {c['diff_pct']:+.1f} % [{lo:+.1f}, {hi:+.1f}]")
    inter = doc["interference"]
    print(f"interference flagged: {inter['flagged']} ({inter['reason']})")
    print(f"fidelity: agreement {doc['fidelity']['agreement']}, regret {doc['fidelity']['mean_regret_pct']}")
    for note in doc["notes"]:
        print(f"note: {note}")


if __name__ == "__main__":
    sys.exit(main())
