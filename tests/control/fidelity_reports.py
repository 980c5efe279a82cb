"""Hand-made live replay reports (`ReplayReport.as_dict()`'s shape, docs/replay.md § The report) for the tests of
the fidelity records, the API and the console: each arm's observed and predicted p99 given (p50 = p99/4, p95 =
p99/2), comparisons given as (baseline, candidate, metric, diff %, interval or None for a refused one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Cmp = tuple[str, str, str, float | None, tuple[float, float] | None]


def quantiles(p99: float | None) -> dict[str, float | None]:
    if p99 is None:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    return {"p50_ms": p99 / 4, "p95_ms": p99 / 2, "p99_ms": p99}


def comparison(baseline: str, candidate: str, metric: str, diff: float | None,
               interval: tuple[float, float] | None) -> dict[str, Any]:
    resolved = interval is not None and (interval[0] > 0 or interval[1] < 0)
    return {"baseline": baseline, "candidate": candidate, "metric": metric, "design": "concurrent",
            "method": "paired block bootstrap, percentile interval", "blocks": 20, "pairs": None,
            "duration_s": 300.0, "level": 0.95, "baseline_ms": 10.0 if interval else None,
            "candidate_ms": 10.0 if interval else None, "diff_pct": diff if interval else None,
            "interval_pct": list(interval) if interval else None, "resolved": resolved, "resamples": 2000,
            "seed": 0, "reason": None if interval else "blocks of 0.5 s are shorter than 15 s"}


def report(at: float, observed: Mapping[str, float | None], predicted: Mapping[str, float | None],
           comparisons: Sequence[Cmp] = (), *, lag_ok: bool = True, notes: Sequence[str] = (),
           deployment: str = "cache") -> dict[str, Any]:
    arms = list(observed)
    return {
        "deployment": deployment, "kind": "memcached", "dataset": "ds0001", "at": at,
        "arms": [{"name": a, "spec": "batching" if i == 0 else "chisel", "mode": "concurrent",
                  "config": {"policy": "batching" if i == 0 else "chisel", "params": {}}}
                 for i, a in enumerate(arms)],
        "rate": {"scale": 1.0, "intended_per_s": 250.0, "achieved_per_s": 249.0},
        "duration_s": 300.0, "blocks": 20, "block_s": 15.0,
        "generator": {"driver": "tailtune-client 1", "cpu_us_per_request": 80.0,
                      "lag_ms": {"p50": 0.1, "p99": 0.5 if lag_ok else 90.0, "max": 2.0}, "lag_ok": lag_ok},
        "observed": {a: {**quantiles(v), "requests": 1000, "errors": 0, "timeouts": 0} for a, v in observed.items()},
        "predicted": {a: quantiles(v) for a, v in predicted.items()},
        "comparisons": [comparison(*c) for c in comparisons],
        "fidelity": {"metric": "p99", "replays": 1, "agreement": {"k": 0, "m": 0, "rate": None, "interval": None,
                                                                   "method": "wilson", "level": 0.95},
                     "mean_regret_pct": None, "max_regret_pct": None, "mean_abs_log_ratio_error": None,
                     "regret": [], "pairs": [], "configs": []},
        "interference": {"arms": [], "reads": 0, "extra_share_pct": 0.0, "max_extra_share_pct": 5.0,
                         "flagged": False, "reason": None},
        "cluster": {"arms": {}},
        "notes": list(notes),
    }
