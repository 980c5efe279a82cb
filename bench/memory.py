"""Where a Cassandra replay's bytes go: per op, per request, per seed and per process.

Builds what one tuner process builds for a generator profile — the canonical table, the prepared trace, every
seed's workload and the pruning prefix — and one replay, reading after each step the process's memory from
/proc/self/smaps_rollup (RSS, PSS, USS = private pages) and the size of each array. With `--shared DIR` the trace
and the workloads come from (or go to) the host-wide store of memory-mapped files in DIR, as the tuner's
evaluator does (`simulation.shared`): run it twice to see what a second process pays.

    .venv/bin/python -m bench.memory --profile soundcloud --requests 1000000 --seeds 3 [--shared DIR] [--json]

Figures in bench/RESULTS.md § "Memory per request".
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "smaps_rollup"]

_GIB = 1024**3


def smaps_rollup(pid: int | str = "self") -> dict[str, int]:
    """Rss, Pss, Uss (Private_Clean + Private_Dirty) and Shared of a process, bytes (Linux)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[-1] == "kB":
            out[name.strip()] = int(parts[0]) * 1024
    out["Uss"] = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    out["Shared"] = out.get("Shared_Clean", 0) + out.get("Shared_Dirty", 0)
    return out


_PEAK = [0]


def _peak_reset() -> None:
    """Resets VmHWM (peak RSS) to measure one step's peak; the process's peak so far is kept in `_PEAK` (the reset
    also resets what getrusage and /usr/bin/time -v report, so read the process's peak from this script)."""
    _PEAK[0] = max(_PEAK[0], _peak())
    Path("/proc/self/clear_refs").write_text("5")


def _peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _nbytes(a: Any) -> int:
    if a is None:
        return 0
    arr = np.asarray(a)
    if arr.dtype == object:  # pointers + the Python objects (each distinct object once)
        seen = {id(x): sys.getsizeof(x) for x in arr.tolist()}
        return int(arr.nbytes + sum(seen.values()))
    return int(arr.nbytes)


def _wl_bytes(wl: Any) -> int:
    """A kvsim workload's array bytes (`nbytes`, or its arrays without the replica table on versions without it)."""
    n = getattr(wl, "nbytes", None)
    if n is not None:
        return int(n)
    return sum(int(v.nbytes) for k, v in wl.arrays().items() if k != "replicas")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="soundcloud")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--prefix", type=float, default=0.25, help="the study's pruning prefix (0: none)")
    ap.add_argument("--shared", type=Path, default=None, help="the store's directory (default: no store)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from simulation import cassandra
    from simulation.cassandra import CassandraDeployment
    from simulation.policies import resolve
    from simulation.source import WorkloadSource

    source = WorkloadSource(profile=args.profile, requests=args.requests)
    dep = CassandraDeployment()
    rows: list[dict[str, Any]] = []
    gc.collect()
    base = smaps_rollup()

    def step(name: str, nbytes: int | None, **extra: Any) -> None:
        gc.collect()
        m = smaps_rollup()
        rows.append({"step": name, "bytes": nbytes, "rss": m["Rss"], "pss": m["Pss"], "uss": m["Uss"],
                     "uss_growth": m["Uss"] - base["Uss"], **extra})

    started = time.time()
    _peak_reset()
    trace = None
    store = None
    if args.shared is not None:
        from simulation import shared

        store = shared.WorkloadStore(args.shared)
        trace = cassandra.load_shared(store)
    if trace is None:
        tables = [source.load()]
        cols = {name: int(tables[0].column(name).nbytes) for name in tables[0].column_names}
        step("table (pyarrow)", int(tables[0].nbytes), columns=cols, ops=tables[0].num_rows)
        # as the tuner's evaluator does: the table is not kept here, so `prepare` frees it as it goes
        trace = cassandra.prepare(tables.pop(), dep, source=source.label)
        parts = {name: _nbytes(getattr(trace, name, None)) for name in
                 ("offsets", "timestamps", "tokens", "sizes", "mean_demand_s", "ops")}
        layout = getattr(trace, "layout", None)  # versions that kept the request layout (keys, row order)
        if layout is not None:
            parts |= {f"layout.{k}": _nbytes(getattr(layout, k)) for k in ("offsets", "row_order", "keys",
                                                                            "timestamps")}
        step("prepared trace", sum(parts.values()), parts=parts, transient=_peak() - rows[-1]["rss"])
        if store is not None:
            trace = cassandra.share(trace, store)
            store.keep()
        step("prepared trace (shared)" if store is not None else "prepared trace (again)", sum(parts.values()))
    else:
        step("prepared trace (mapped from the store)", None)
    if store is not None:
        store.keep()
    n_req = trace.requests
    n_ops = int(trace.tokens.size)
    for seed in range(args.seeds):
        _peak_reset()
        wl = cassandra.materialize(trace, dep, seed)
        draws = 8 * (wl.requests + wl.ops)  # arrival_ns + demand_ns
        if seed == 0:
            step("workload layout (once per cluster)", _wl_bytes(wl) - draws)
        step(f"seed {seed} draws (arrivals, demands)", draws, peak=_peak())
    if args.prefix > 0:
        wl = cassandra.materialize(trace, dep, 0, fraction=args.prefix)
        step(f"prefix {args.prefix:g} of seed 0 (own arrivals)", 8 * wl.requests)
    _peak_reset()
    rss_before = smaps_rollup()["Rss"]
    res = cassandra.replay(trace, dep, resolve("fifo", {}), 0, classes=False)
    step("one replay (fifo, seed 0), after", None, transient=_peak() - rss_before,
         bytes_per_op=res.bytes_per_op, latencies=int(res.latency_ms.nbytes))
    if store is not None:
        rows.append({"step": "store files", "bytes": store.nbytes(), "rss": 0, "pss": 0, "uss": 0,
                     "uss_growth": 0})
    _peak_reset()
    out = {"peak_rss": _PEAK[0], "profile": args.profile, "requests": n_req, "ops": n_ops,
           "ops_per_request": n_ops / n_req, "seeds": args.seeds, "shared": str(args.shared) if args.shared else None,
           "wall_s": time.time() - started, "base": base, "steps": rows}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{args.profile}: {n_req} requests, {n_ops} ops ({n_ops / n_req:.2f} ops/request), "
              f"{args.seeds} seeds, store: {args.shared or 'none'}; peak RSS of the process "
              f"{_PEAK[0] / _GIB:.3f} GiB")
        print(f"{'step':42} {'arrays':>10} {'B/req':>7} {'B/op':>6} {'RSS':>7} {'PSS':>7} {'USS+':>7}  (GiB)")
        for r in rows:
            b = r["bytes"]
            print(f"{r['step']:42} {(b or 0) / _GIB:10.3f} {(b or 0) / n_req:7.1f} {(b or 0) / n_ops:6.1f} "
                  f"{r['rss'] / _GIB:7.3f} {r['pss'] / _GIB:7.3f} {r['uss_growth'] / _GIB:7.3f}")
            if r.get("transient") is not None:
                t = r["transient"]
                print(f"    {'transient (peak RSS over the step)':38} {t / _GIB:10.3f} {t / n_req:7.1f} "
                      f"{t / n_ops:6.1f}")
            for k in ("columns", "parts"):
                for name, v in (r.get(k) or {}).items():
                    print(f"    {name:38} {v / _GIB:10.3f} {v / n_req:7.1f} {v / n_ops:6.1f}")
    return out


if __name__ == "__main__":
    main()
