"""Figures of a study (matplotlib, Agg backend): optimization history, parameter importance, K×R heatmap,
before/after latency CDFs. Each function returns a Figure, or None when the study has too little to show."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: Points drawn per latency CDF (`cdf_points`).
CDF_POINTS = 4000

__all__ = ["CDF_POINTS", "cdf_figure", "cdf_points", "history_figure", "importance_figure", "kr_heatmap_figure"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _complete(trials: Sequence[Any]) -> list[Any]:
    return [t for t in trials if t.state.name == "COMPLETE" and t.values]


def history_figure(trials: Sequence[Any], label: str) -> Any | None:
    """Objective (first term) of every complete trial and the best so far, by trial number."""
    done = sorted(_complete(trials), key=lambda t: t.number)
    if not done:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [t.number for t in done]
    ys = [float(t.values[0]) for t in done]
    ax.scatter(xs, ys, s=12, label="trial", color="tab:blue")
    ax.step(xs, np.minimum.accumulate(ys), where="post", color="tab:red", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(f"{label} (ms)")
    ax.set_title("Optimization history")
    ax.legend()
    fig.tight_layout()
    return fig


def importance_figure(importances: Mapping[str, float]) -> Any | None:
    """Horizontal bars of parameter importances (fANOVA / Optuna default evaluator)."""
    if not importances:
        return None
    plt = _plt()
    names = list(importances)[::-1]
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.4 * len(names)))
    ax.barh(names, [importances[n] for n in names], color="tab:green")
    ax.set_xlabel("importance")
    ax.set_title("Parameter importance")
    fig.tight_layout()
    return fig


def kr_heatmap_figure(trials: Sequence[Any], label: str) -> Any | None:
    """Best objective per (K, R) cell over the complete rein trials; None without ≥ 2 distinct cells."""
    cells: dict[tuple[float, float], float] = {}
    for t in _complete(trials):
        cand = t.user_attrs.get("candidate") or {}
        if cand.get("policy") != "rein":
            continue
        p = cand.get("params") or {}
        if "k" not in p or "range_factor" not in p:
            continue
        key = (float(p["k"]), float(p["range_factor"]))
        cells[key] = min(cells.get(key, np.inf), float(t.values[0]))
    if len(cells) < 2:
        return None
    ks = sorted({k for k, _ in cells})
    rs = sorted({r for _, r in cells})
    grid = np.full((len(ks), len(rs)), np.nan)
    for (k, r), v in cells.items():
        grid[ks.index(k), rs.index(r)] = v
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(rs), 1.2 + 0.5 * len(ks)))
    im = ax.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto", cmap="viridis_r")
    ax.set_xticks(range(len(rs)), [f"{r:g}" for r in rs])
    ax.set_yticks(range(len(ks)), [f"{k:g}" for k in ks])
    ax.set_xlabel("R (range_factor)")
    ax.set_ylabel("K (queues)")
    ax.set_title(f"rein: best {label} (ms) per K×R")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def cdf_points(
    latencies: npt.NDArray[np.float64], points: int = CDF_POINTS
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The empirical CDF (sorted latency, rank / n) at about `points` ranks: evenly spaced over the body, and
    geometrically closer towards the largest so that the tail (p99, p99.9, the maximum) is drawn exactly.
    A whole trace has millions of requests; a figure needs no more points than it has pixels."""
    x = np.sort(np.asarray(latencies, dtype=np.float64))
    n = x.size
    if n <= points:
        return x, np.arange(1, n + 1) / n
    body = np.linspace(0, n - 1, points // 2).astype(np.int64)
    tail = n - np.unique(np.geomspace(1, n, points // 2).astype(np.int64))
    idx = np.unique(np.concatenate([body, tail, [0, n - 1]]))
    return x[idx], (idx + 1) / n


def cdf_figure(curves: Mapping[str, npt.NDArray[np.float64]]) -> Any | None:
    """Empirical latency CDFs (ms, log x) of several configurations on the same seed."""
    curves = {k: v for k, v in curves.items() if len(v)}
    if not curves:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, lat in curves.items():
        x, y = cdf_points(lat)
        ax.plot(np.maximum(x, 1e-6), y, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("request latency (ms)")
    ax.set_ylabel("CDF")
    ax.set_title("Latency before/after")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")  # "best" tests every vertex of every curve: seconds per million points
    fig.tight_layout()
    return fig
