"""Rein Fig 8 sensitivity: the p99 surface of `rein` over K (queues) × R (range factor) — the landscape the tuner
searches — for the soundcloud and facebook profiles, in the Fig 14 setup (128 servers × 8 slots, RF 3,
3750 ops/s, 50 µs, 75% load).

Rates (choice, the paper fixes r_q1 = 5 and steps of 1 for K = 4): r_q1 = max(5, K), rate_step = 1, so the
queues' rates are r_q1, r_q1 − 1, … and stay > 0 for every K; τ_1 = 1. K = 1 is FIFO whatever R. Placement:
soundcloud hashed (its hottest server is within ~8% of the mean); facebook balanced (hashed, its Zipf(0.99)
head overloads a server at 75%: server_load_max ≈ 1.35, no steady state to compare).

Output: a table of p99 (mean ± sample sd over seeds, and the degradation vs the best cell), the optimum, fifo's p99 for
reference, and a PNG heatmap per profile under validation/figures/.

Run:  .venv/bin/python -m validation.sim_validate_sensitivity [--requests 50000] [--seeds 1,2,3]
          [--ks 1,2,3,4,5,6,8] [--rs 1,1.5,2,3,4,6] [--profiles soundcloud,facebook] [--figures DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from validation.sim_validate_common import ProfileTrace, load_profile, make_workload

__all__ = ["PLACEMENT", "main", "rein_params", "sweep"]

PLACEMENT = {"soundcloud": "hash", "facebook": "balanced"}
FIGURES = Path(__file__).resolve().parent / "figures"


def rein_params(k: int, r: float) -> dict[str, float]:
    return {"k": float(k), "range_factor": r, "r_q1": float(max(5, k)), "rate_step": 1.0, "tau_1": 1.0}


def sweep(
    profile: str, requests: int, seeds: list[int], ks: list[int], rs: list[float], load: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], dict[str, float], list[bool]]:
    """p99 (ms) per (K, R): mean and sample sd over seeds; the fifo/default references; the steady flags."""
    import kvsim

    cluster = kvsim.Cluster()
    grid = np.zeros((len(ks), len(rs), len(seeds)))
    refs: dict[str, list[float]] = {"fifo_p99": [], "default_p99": [], "fifo_p50": []}
    steady: list[bool] = []
    for si, seed in enumerate(seeds):
        trace: ProfileTrace = load_profile(profile, requests, seed)
        wl = make_workload(cluster, trace, placement=PLACEMENT.get(profile, "hash"), load=load, seed=seed)
        fifo = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo"))
        refs["fifo_p99"].append(fifo.p99_ms)
        refs["fifo_p50"].append(fifo.p50_ms)
        refs["default_p99"].append(kvsim.replay(wl, kvsim.ReplayConfig(policy="rein")).p99_ms)
        steady.append(fifo.steady_state)
        for i, k in enumerate(ks):
            for j, r in enumerate(rs):
                if k == 1 and j > 0:
                    grid[i, j, si] = grid[i, 0, si]  # one queue: R changes nothing (= FIFO)
                    continue
                res = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params=rein_params(k, r)))
                grid[i, j, si] = res.p99_ms
                steady.append(res.steady_state)
    sd = grid.std(axis=2, ddof=1) if len(seeds) > 1 else np.zeros(grid.shape[:2])
    return grid.mean(axis=2), sd, {k: statistics.fmean(v) for k, v in refs.items()}, steady


def heatmap(path: Path, p99: npt.NDArray[np.float64], ks: list[int], rs: list[float], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    best = p99.min()
    deg = 100.0 * (p99 / best - 1.0)
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    im = ax.imshow(deg, origin="lower", cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(rs)), [f"{r:g}" for r in rs])
    ax.set_yticks(range(len(ks)), [str(k) for k in ks])
    ax.set_xlabel("range factor R")
    ax.set_ylabel("queues K")
    for i in range(len(ks)):
        for j in range(len(rs)):
            ax.text(
                j,
                i,
                f"{p99[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if deg[i, j] > deg.max() / 2 else "black",
            )
    fig.colorbar(im, ax=ax, label="p99 degradation vs best cell (%)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(
    p99: npt.NDArray[np.float64],
    sd: npt.NDArray[np.float64],
    ks: list[int],
    rs: list[float],
    refs: dict[str, float],
) -> str:
    best = float(p99.min())
    bi, bj = np.unravel_index(int(np.argmin(p99)), p99.shape)
    lines = ["| K \\ R | " + " | ".join(f"{r:g}" for r in rs) + " |", "|---" * (len(rs) + 1) + "|"]
    for i, k in enumerate(ks):
        cells = [f"{p99[i, j]:.3f} ± {sd[i, j]:.3f} ({100 * (p99[i, j] / best - 1):+.0f}%)" for j in range(len(rs))]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"optimum K={ks[bi]}, R={rs[bj]:g}: p99 {best:.3f} ms; paper default K=4, R=3: {refs['default_p99']:.3f} ms; "
        f"fifo: {refs['fifo_p99']:.3f} ms (p50 {refs['fifo_p50']:.3f} ms)"
    )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--ks", default="1,2,3,4,5,6,8")
    ap.add_argument("--rs", default="1,1.5,2,3,4,6")
    ap.add_argument("--profiles", default="soundcloud,facebook")
    ap.add_argument("--load", type=float, default=0.75)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--figures", type=Path, default=FIGURES, help="where the PNG heatmaps go")
    args = ap.parse_args()
    ks = [int(x) for x in args.ks.split(",")]
    rs = [float(x) for x in args.rs.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    out: dict[str, Any] = {}
    for profile in args.profiles.split(","):
        t = time.perf_counter()
        p99, sd, refs, steady = sweep(profile, args.requests, seeds, ks, rs, args.load)
        png = args.figures / f"sim_sensitivity_{profile}.png"
        heatmap(
            png,
            p99,
            ks,
            rs,
            f"rein p99 (ms) over K × R — {profile}, {PLACEMENT.get(profile, 'hash')}, "
            f"{args.load:.0%} load, {len(seeds)} seeds",
        )
        print(
            f"**{profile}** ({PLACEMENT.get(profile, 'hash')} placement, {args.requests} requests × "
            f"{len(seeds)} seeds, steady {sum(steady)}/{len(steady)}, {time.perf_counter() - t:.1f} s) → {png.name}"
        )
        print()
        print(markdown(p99, sd, ks, rs, refs))
        print(flush=True)
        out[profile] = {"ks": ks, "rs": rs, "p99_ms": p99.tolist(), "p99_sd_ms": sd.tolist(), **refs}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
