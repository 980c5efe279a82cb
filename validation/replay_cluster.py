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
(set by an admin principal). The throw-away home, the deployment and the dataset are `validation.engine_harness`'s,
as the other scripts that measure through the engine. The engine's defaults otherwise: warm-up 10 s, blocks of
`--block-s` (15 s), the Java driver 4 generator, LOCAL_ONE. `--max-lag-ms` relaxes `TAILTUNE_REPLAY_MAX_LAG_MS`
(the recorded run's lag is printed beside its figures).

    .venv/bin/python -m validation.replay_cluster --rate 300 --duration 300 --json-out replay_cluster.json

Not a CI test (minutes; three JVMs of `--heap` each and the generator's).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from validation import engine_harness as h


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

    from tests.servers.cassandra_cluster import running_cluster

    with h.engine_home("replay-cluster", {"TAILTUNE_REPLAY_MAX_LAG_MS": str(a.max_lag_ms)}) as settings:
        path = settings.home_dir / "reads.csv"
        h.write_trace(path, rate=a.rate, seconds=a.duration + 15.0, partitions=a.keys, seed=a.seed)
        dataset = h.ingest(settings, path)
        with running_cluster(3, heap=a.heap, dynamic_snitch=False) as nodes:
            h.cassandra_deployment(settings, nodes, name="shop", keyspace="shop", table="items", replication=3)
            stop, log = threading.Event(), list[tuple[float, float]]()

            def stalls() -> None:  # from the warm-up on
                threading.Thread(target=_stalls, args=(nodes[2], a.stall_ms, a.stall_period_s, stop, log),
                                 daemon=True).start()

            arms = [("NEVER", "stock:speculative_retry=NEVER"), ("ALWAYS", "stock:speculative_retry=ALWAYS"),
                    ("P99", "stock:speculative_retry=99p")]
            t0 = time.time()
            try:
                with h.Phases(on_measure=stalls, on_end=stop.set) as phases:
                    doc = h.replay("shop", dataset, arms, settings=settings, duration_s=a.duration,
                                   block_s=a.block_s, seed=a.seed, on_progress=phases)
            finally:
                stop.set()
                nodes[2].resume()
    doc["validation"] = {"command": " ".join(["python -m validation.replay_cluster", *(argv or sys.argv[1:])]),
                         "stalls": len(log), "stall_ms": a.stall_ms, "stall_period_s": a.stall_period_s,
                         "wall_s": time.time() - t0}
    print(f"{doc['validation']['stalls']} stalls of node 3 ({a.stall_ms:g} ms every {a.stall_period_s:g} s)")
    h.print_report(doc)
    if a.json_out is not None:
        a.json_out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
