"""Current / best stock / best patched, side by side: `tailtune tune --server stock` on generator profiles with and
without transient server stalls, and at a load where `ALWAYS` would overload the cluster.

`python -m validation.stock_tune [--requests N] [--trials T] [--seeds S] [--profiles a,b] [--json-out F]`

For each (profile, stalls, load) row one `run_tune` (in-memory study, no MLflow) searches the stock knobs of the
Java driver 4 deployment and, as the alternative, the patched schedulers, on the same seeds; the table gives the
current config's p99 (Cassandra's and the driver's defaults), the best stock and the best patched p99 with their
95% half-widths and their verdicts against the current config. Markdown on stdout (RESULTS.md § "Stock Cassandra:
current, best stock, best patched").
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from simulation.source import WorkloadSource
from tuner.tune import TuneRequest, run_tune

#: Stalls as in the quickstart: 0.5 per second per server, 20 ms each (1% of each server's time stalled).
STALLS = {"stall_rate": 0.5, "stall_ms": 20.0}


def _row(profile: str, requests: int, trials: int, seeds: int, stalls: bool, load: float) -> dict[str, Any]:
    opts: dict[str, Any] = {"load": load, **(STALLS if stalls else {})}
    started = time.perf_counter()
    rec = run_tune(TuneRequest(source=WorkloadSource(profile=profile, requests=requests), deployment="cassandra",
                               trials=trials, seeds=seeds, storage="memory", mlflow=False, plots=False,
                               evaluator_options=opts, server="stock"))
    alts = rec.alternatives or {}
    return {"profile": profile, "stalls": stalls, "load": load, "requests": requests, "trials": trials,
            "seeds": seeds, "current": rec.baseline, "stock": alts.get("stock"), "patched": alts.get("patched"),
            "verdict": rec.verdict, "reason": rec.reason, "wall_s": time.perf_counter() - started}


def _fmt(block: dict[str, Any] | None) -> str:
    if not block or block.get("policy") is None:
        return "–"
    ci = (block.get("ci") or {}).get("p99")
    ci_s = f" ± {ci:.2f}" if isinstance(ci, int | float) else ""
    params = block.get("params") or {}
    what = (params.get("speculative_retry") if block["policy"] == "stock" else block["policy"]) or block["policy"]
    return f"{block['p99_ms']:.2f}{ci_s} ({what}; {block['verdict']})"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--profiles", default="soundcloud,facebook")
    ap.add_argument("--high-load", type=float, default=0.85, help="the extra row's load (stalls on)")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    rows = []
    for profile in a.profiles.split(","):
        for stalls in (False, True):
            rows.append(_row(profile, a.requests, a.trials, a.seeds, stalls, 0.75))
        rows.append(_row(profile, a.requests, a.trials, a.seeds, True, a.high_load))
    print("| profile | stalls | load | current p99 ms | best stock p99 ms (retry; verdict) | "
          "best patched p99 ms (policy; verdict) | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        st = f"{STALLS['stall_rate']:g}/s × {STALLS['stall_ms']:g} ms" if r["stalls"] else "none"
        print(f"| {r['profile']} | {st} | {r['load']:g} | {r['current']['p99_ms']:.2f} | {_fmt(r['stock'])} | "
              f"{_fmt(r['patched'])} | {r['wall_s']:.0f} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
