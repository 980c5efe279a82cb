"""Rein §5.3 / Fig 14 validation, and the conditions under which multiget scheduling pays off.

Part 1 (Fig 14 setup): 128 clients, 128 servers × 8 slots, RF 3, 3750 ops/s per slot, 50 µs one-way, soundcloud
profile, Poisson arrivals; hashed placement at 75% load and balanced placement at 50/75/90%. Policies fifo,
rein-sbf, rein-sds, rein (paper defaults K=4, R=3, r_q1=5, step 1) and oracle; several seeds, one workload per
seed shared by all policies (common random numbers); mean ± sample sd over seeds, and the paired gain
1 − policy/fifo per seed.

Part 2 (--conditions): one factor at a time from a base (soundcloud, balanced, 75%, 8 slots, exponential
service): load, slots per server, service-time variance (deterministic / lognormal σ), size skew (facebook
profile) and hot servers (facebook with hashed placement).

Run:  .venv/bin/python -m validation.sim_validate_rein [--requests 100000] [--seeds 1,2,3]
      .venv/bin/python -m validation.sim_validate_rein --conditions [--cond-requests 50000] [--cond-seeds 1,2]
      .venv/bin/python -m validation.sim_validate_rein --starvation  (rein-sbf with boost_after_ms 1/2/4)
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from validation.sim_validate_common import (
    PERCENTILES,
    Case,
    CaseResult,
    ProfileTrace,
    fmt_gain,
    fmt_ms,
    paired_gains,
    run_case,
    summary_stats,
)

__all__ = ["FIG14_POLICIES", "conditions_cases", "fig14_cases", "main", "starvation_cases"]

FIG14_POLICIES: list[tuple[str, dict[str, float]]] = [
    ("fifo", {}),
    ("rein-sbf", {}),
    ("rein-sds", {}),
    ("rein", {}),
    ("oracle", {}),
]


def fig14_cases() -> list[Case]:
    base = Case(name="", profile="soundcloud", policies=FIG14_POLICIES)
    return [
        replace(base, name="soundcloud, hashed, 75%", placement="hash", load=0.75),
        replace(base, name="soundcloud, balanced, 50%", placement="balanced", load=0.50),
        replace(base, name="soundcloud, balanced, 75%", placement="balanced", load=0.75),
        replace(base, name="soundcloud, balanced, 90%", placement="balanced", load=0.90),
    ]


def conditions_cases() -> list[Case]:
    base = Case(
        name="base: soundcloud, balanced, 75%, 8 slots, exp",
        profile="soundcloud",
        placement="balanced",
        policies=FIG14_POLICIES,
    )
    return [
        base,
        replace(base, name="load 90%", load=0.90),
        replace(base, name="load 95%", load=0.95),
        replace(base, name="1 slot per server", slots=1),
        replace(base, name="1 slot, load 90%", slots=1, load=0.90),
        replace(base, name="deterministic service", demand_dist="deterministic"),
        replace(base, name="lognormal service σ=1.5 (cv 2.9)", demand_dist="lognormal", demand_sigma=1.5),
        replace(base, name="facebook sizes (lognormal 2.5/1.25), balanced", profile="facebook"),
        replace(base, name="facebook, balanced, 1 slot, 90%", profile="facebook", slots=1, load=0.90),
        replace(base, name="facebook, hashed (hot servers), 50%", profile="facebook", placement="hash", load=0.50),
    ]


def starvation_cases() -> list[Case]:
    """The single-priority-queue variants with Rein §3.2's starvation boost (boost_after_ms) at 75 and 90%."""
    pols: list[tuple[str, dict[str, float]]] = [("fifo", {}), ("rein-sbf", {})]
    pols += [("rein-sbf", {"boost_after_ms": b}) for b in (1.0, 2.0, 4.0)]
    base = Case(name="", profile="soundcloud", placement="balanced", policies=pols)
    return [
        replace(base, name="starvation boost, soundcloud, balanced, 75%", load=0.75),
        replace(base, name="starvation boost, soundcloud, balanced, 90%", load=0.90),
    ]


def table(res: CaseResult, *, oracle_gap: bool = True) -> str:
    """Markdown rows: per policy, each percentile as mean ± sd ms, then the paired gain vs fifo."""
    lines = [
        f"**{res.case.name}** — {len(res.runs['fifo'])} seeds",
        "",
        "| policy | p50 ms | p95 ms | p99 ms | p99.9 ms | mean ms | gain p50 | gain p95 | gain p99 | gain p99.9 "
        "| gain mean | server_load_max | steady |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, runs in res.runs.items():
        cells = [fmt_ms([r[m] for r in runs]) for m in PERCENTILES]
        gains = (
            ["–"] * len(PERCENTILES)
            if label == "fifo"
            else [fmt_gain(paired_gains(res, label, "fifo", m)) for m in PERCENTILES]
        )
        slm, _ = summary_stats([r["server_load_max"] for r in runs])
        steady = sum(bool(r["steady_state"]) for r in runs)
        lines.append(f"| {label} | " + " | ".join(cells + gains) + f" | {slm:.3f} | {steady}/{len(runs)} |")
    if oracle_gap and "rein" in res.runs and "oracle" in res.runs:
        gaps = [fmt_gain([-g for g in paired_gains(res, "rein", "oracle", m)]) for m in PERCENTILES]
        lines.append("")
        lines.append(
            "rein vs oracle (rein/oracle − 1; positive = rein slower): "
            + ", ".join(f"{m[:-3].replace('p999', 'p99.9')} {g}" for m, g in zip(PERCENTILES, gaps, strict=True))
        )
    return "\n".join(lines)


def to_json(res: CaseResult) -> dict[str, Any]:
    return {"case": {k: v for k, v in vars(res.case).items() if k != "policies"}, "runs": res.runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--conditions", action="store_true", help="run part 2 (the condition sweep) instead")
    ap.add_argument("--starvation", action="store_true", help="run rein-sbf with starvation boosts instead")
    ap.add_argument("--cond-requests", type=int, default=50_000)
    ap.add_argument("--cond-seeds", default="1,2")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args()
    traces: dict[tuple[str, int], ProfileTrace] = {}
    if args.conditions or args.starvation:
        cases = conditions_cases() if args.conditions else starvation_cases()
        n, seeds = args.cond_requests, [int(s) for s in args.cond_seeds.split(",")]
    else:
        cases, n, seeds = fig14_cases(), args.requests, [int(s) for s in args.seeds.split(",")]
    results = []
    t0 = time.perf_counter()
    for case in cases:
        t = time.perf_counter()
        res = run_case(case, traces, n, seeds)
        results.append(res)
        print(table(res))
        print(f"\n({n} requests per seed, {time.perf_counter() - t:.1f} s)\n", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.json:
        args.json.write_text(json.dumps([to_json(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
