"""summary.json assembly (schema documented in docs/analysis.md; bump SCHEMA_VERSION on any breaking change).

Input: the small tables the Spark pipeline collected (`Collected`, pandas DataFrames). Everything here is
exact numpy/scipy on those tables, so it is tested without Spark. Missing data never raises: the field is
null and `null_reasons["<section>.<field>"]` says why.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from analysis import fits, histstats
from analysis.report.findings import findings

__all__ = ["MIN_LOGNORMAL_N", "SCHEMA_VERSION", "Collected", "build_summary", "findings"]

SCHEMA_VERSION: Final = 1
#: Fewer multi-key requests than this leave the lognormal fit null.
MIN_LOGNORMAL_N: Final = 10


@dataclass
class Collected:
    """What the pipeline hands over (column names in brackets)."""

    rows: int
    requests: int
    t_start: float
    t_end: float
    size_hist: pd.DataFrame  # [size, requests]
    count_of_counts: pd.DataFrame  # [count, keys]
    top_keys: pd.DataFrame  # [key, count, share]
    value_size_hist: pd.DataFrame  # [value_size, keys, accesses]
    hot_sets: pd.DataFrame  # [window, rank, key, count]
    windows: int
    window_s: float
    hot_n: int
    rate: pd.DataFrame  # [window, start, requests, rate]
    rate_window_s: float
    gaps: dict[str, float | None]  # n, mean, std, p50, p99
    latency_corr: float | None = None
    latency_deciles: pd.DataFrame | None = None  # [decile, requests, mean_size, mean_latency_us]
    fanout_hist: pd.DataFrame | None = None  # [opsets, bottleneck, requests]
    server_load: pd.DataFrame | None = None  # [server, load]
    servers: int | None = None
    replication: int | None = None
    slack: pd.DataFrame | None = None  # [utilization, ops, upper_ms, lower_ms]
    slack_reason: str | None = None
    slack_observed: dict[str, float | None] | None = None  # ops, upper_ms
    source: str | None = None
    extra_reasons: dict[str, str] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables written as Parquet next to summary.json (`tables/<name>.parquet`), which the report's figures
        read (`analysis.report.components.figures`)."""
        out: dict[str, pd.DataFrame] = {
            "multiget_size_histogram": self.size_hist,
            "key_count_of_counts": self.count_of_counts,
            "top_keys": self.top_keys,
            "value_size_histogram": self.value_size_hist,
            "hot_sets": self.hot_sets,
            "arrival_rate": self.rate,
        }
        optional = {"fanout_histogram": self.fanout_hist, "server_load": self.server_load,
                    "latency_deciles": self.latency_deciles, "slack_bounds": self.slack}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def _f(x: Any) -> float | None:
    """A JSON-safe float (NaN/inf → None)."""
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in df.to_dict("records")]


class _Nulls:
    def __init__(self, reasons: dict[str, str]) -> None:
        self.reasons = reasons

    def note(self, section: dict[str, Any], section_name: str, reason: str, *names: str) -> None:
        for name in names:
            if section.get(name) is None:
                section[name] = None
                self.reasons[f"{section_name}.{name}"] = reason


def _multiget(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    sizes = c.size_hist["size"].to_numpy(np.int64)
    reqs = c.size_hist["requests"].to_numpy(np.int64)
    total = int(reqs.sum())
    out: dict[str, Any] = {
        "requests": total,
        "mean": histstats.weighted_mean(sizes, reqs),
        "p50": histstats.quantile(sizes, reqs, 0.50),
        "p95": histstats.quantile(sizes, reqs, 0.95),
        "p99": histstats.quantile(sizes, reqs, 0.99),
        "max": int(sizes.max()) if sizes.size else None,
        "frac_multi": float(reqs[sizes >= 2].sum()) / total if total else None,
        "skewness": histstats.skewness(sizes, reqs),
    }
    n_multi = int(reqs[sizes >= 2].sum())
    fit = fits.lognormal_multi(sizes, reqs) if n_multi >= MIN_LOGNORMAL_N else None
    power = fits.power_law_multi(sizes, reqs) if n_multi >= MIN_LOGNORMAL_N else None
    reason = f"fewer than {MIN_LOGNORMAL_N} multi-key requests, or one size only"
    if fit is not None:
        out |= {"lognormal_mu": fit.mu, "lognormal_sigma": fit.sigma, "lognormal_ks": fit.ks,
                "lognormal_n": fit.n, "lognormal_fit_range": {"min_size": 2, "max_size": int(sizes.max())},
                "lognormal_loglik": fit.loglik}
    else:
        out |= {"lognormal_fit_range": None, "lognormal_n": n_multi}
        nulls.note(out, "multiget_size", reason,
                   "lognormal_mu", "lognormal_sigma", "lognormal_ks", "lognormal_loglik")
    if power is not None:
        out |= {"power_law_alpha": power.alpha, "power_law_ks": power.ks, "power_law_loglik": power.loglik}
    else:
        nulls.note(out, "multiget_size", reason, "power_law_alpha", "power_law_ks", "power_law_loglik")
    out["size_model"] = fits.size_model(fit, power)
    if out["size_model"] is None:
        nulls.reasons["multiget_size.size_model"] = reason
    return out


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if (a or b) else 1.0


def _popularity(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    counts = c.count_of_counts["count"].to_numpy(np.int64)
    keys = c.count_of_counts["keys"].to_numpy(np.int64)
    distinct = int(keys.sum())
    accesses = int((counts * keys).sum())
    ones = int(keys[counts == 1].sum())
    out: dict[str, Any] = {
        "distinct_keys": distinct,
        "accesses": accesses,
        "one_hit_wonder_share": ones / distinct if distinct else None,
        "one_hit_access_share": ones / accesses if accesses else None,
        "max_count": int(counts.max()) if counts.size else None,
        "top_keys": [
            {"key": str(r["key"]), "count": int(r["count"]), "share": float(r["share"])}
            for r in _records(c.top_keys)
        ],
    }
    rank_max = fits.fit_rank_max(counts, keys)
    ols, mle = fits.zipf_ols(counts, keys, rank_max), fits.zipf_mle(counts, keys, rank_max)
    if ols is not None and mle is not None:
        out |= {
            "zipf_alpha_ols": ols.alpha,
            "zipf_ols_r2": _f(ols.r2),
            "zipf_alpha_mle": mle.alpha,
            "zipf_fit_range": {"rank_min": ols.rank_min, "rank_max": ols.rank_max},
        }
        if counts.max() < 100:
            nulls.reasons["key_popularity.zipf_alpha_ols"] = (
                "estimate kept, but the most popular key has fewer than 100 accesses "
                "(libCacheSim reports α = 0 in that case)"
            )
    else:
        out["zipf_fit_range"] = None
        nulls.note(out, "key_popularity", "fewer than two distinct keys",
                   "zipf_alpha_ols", "zipf_ols_r2", "zipf_alpha_mle")
    out["hot_set_drift"] = _drift(c, nulls)
    return out


def _drift(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    sets: dict[int, set[str]] = {}
    for r in _records(c.hot_sets):
        sets.setdefault(int(r["window"]), set()).add(str(r["key"]))
    ordered = [sets[w] for w in sorted(sets)]
    consecutive = [_jaccard(a, b) for a, b in itertools.pairwise(ordered)]
    out: dict[str, Any] = {
        "windows": c.windows,
        "window_s": c.window_s,
        "top_n": c.hot_n,
        "nonempty_windows": len(ordered),
        "jaccard_consecutive": consecutive,
        "jaccard_consecutive_mean": float(np.mean(consecutive)) if consecutive else None,
        "jaccard_consecutive_min": float(np.min(consecutive)) if consecutive else None,
    }
    if not consecutive:
        nulls.note(out, "key_popularity.hot_set_drift", "fewer than two non-empty time windows",
                   "jaccard_consecutive_mean", "jaccard_consecutive_min")
    return out


def _thr_candidates(v: np.ndarray[Any, Any], kw: np.ndarray[Any, Any], aw: np.ndarray[Any, Any]
                    ) -> list[dict[str, Any]]:
    rules: list[tuple[str, float | None]] = [
        ("p90_by_key", histstats.quantile(v, kw, 0.90)),
        ("largest_jump", histstats.largest_jump(v, kw)),
        ("p99_by_key", histstats.quantile(v, kw, 0.99)),
    ]
    bytes_w = v.astype(np.float64) * aw
    out: list[dict[str, Any]] = []
    seen: set[float] = set()
    for rule, thr in rules:
        if thr is None or thr in seen:
            continue
        seen.add(thr)
        out.append({
            "bytes": int(thr),
            "rule": rule,
            "key_share": histstats.share_above(v, kw, thr),
            "access_share": histstats.share_above(v, aw, thr),
            "bytes_share": histstats.share_above(v, bytes_w, thr),
        })
    return out


def _value_size(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    h = c.value_size_hist
    v = h["value_size"].to_numpy(np.int64)
    kw = h["keys"].to_numpy(np.int64)
    aw = h["accesses"].to_numpy(np.int64)
    out: dict[str, Any] = {
        "p50": histstats.quantile(v, aw, 0.50),
        "p90": histstats.quantile(v, aw, 0.90),
        "p99": histstats.quantile(v, aw, 0.99),
        "max": int(v.max()) if v.size else None,
        "mean": histstats.weighted_mean(v, aw),
        "skewness": histstats.skewness(v, aw),
        "per_key": {
            "keys": int(kw.sum()),
            "p50": histstats.quantile(v, kw, 0.50),
            "p90": histstats.quantile(v, kw, 0.90),
            "p99": histstats.quantile(v, kw, 0.99),
            "mean": histstats.weighted_mean(v, kw),
            "skewness": histstats.skewness(v, kw),
        },
        "top1pct_bytes_share": histstats.top_share(v, kw, 0.01),
        "top1pct_access_bytes_share": _top_access_bytes(v, kw, aw),
        "thr_l_candidates": _thr_candidates(v, kw, aw) if v.size else [],
    }
    if not v.size:
        reason = "the trace carries no value sizes"
        nulls.note(out, "value_size", reason, "p50", "p90", "p99", "max", "mean", "skewness",
                   "top1pct_bytes_share", "top1pct_access_bytes_share", "gpd_xi", "gpd_sigma")
        nulls.reasons["value_size.thr_l_candidates"] = reason
        return out
    thr = histstats.quantile(v, kw, 0.90)
    sample = _thinned(v, kw, 200_000)
    gpd = fits.gpd_tail(sample, float(thr)) if thr is not None else None
    if gpd is not None:
        out |= {"gpd_xi": gpd.xi, "gpd_sigma": gpd.sigma, "gpd_threshold": gpd.threshold,
                "gpd_n": gpd.n, "gpd_ks": gpd.ks}
    else:
        nulls.note(out, "value_size",
                   "fewer than 50 keys above the 90th percentile of per-key sizes, or one size among them",
                   "gpd_xi", "gpd_sigma", "gpd_threshold", "gpd_ks")
    for name in ("skewness",):
        if out[name] is None:
            nulls.reasons[f"value_size.{name}"] = "all values have the same size"
    return out


def _top_access_bytes(v: np.ndarray[Any, Any], kw: np.ndarray[Any, Any], aw: np.ndarray[Any, Any]
                      ) -> float | None:
    """Share of accessed bytes going to the largest 1% of keys (keys of one size share their accesses)."""
    if not v.size:
        return None
    per_key_access = np.where(kw > 0, aw / np.maximum(kw, 1), 0.0)
    # weight of a size class = its keys; value of one key = size · accesses per key of that size
    return histstats.top_share_by(v, kw, v * per_key_access, 0.01)


def _thinned(v: np.ndarray[Any, Any], w: np.ndarray[Any, Any], cap: int) -> np.ndarray[Any, Any]:
    """The weighted sample as a flat array; above `cap` items, the values at `cap` evenly spaced ranks."""
    order = np.argsort(v, kind="stable")
    v, w = v[order].astype(np.float64), w[order]
    total = int(w.sum())
    if total <= cap:
        return np.repeat(v, w)
    cum = np.cumsum(w)
    ranks = (np.arange(cap) + 0.5) * total / cap
    return np.asarray(v[np.searchsorted(cum, ranks, side="left")], dtype=np.float64)


def _arrivals(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    rates = c.rate["rate"].to_numpy(np.float64)
    counts = c.rate["requests"].to_numpy(np.float64)
    mean_rate = float(rates.mean()) if rates.size else None
    g = c.gaps
    mean, std = g.get("mean"), g.get("std")
    out: dict[str, Any] = {
        "duration_s": c.t_end - c.t_start,
        "window_s": c.rate_window_s,
        "windows": int(rates.size),
        "rate_mean": mean_rate,
        "rate_max": float(rates.max()) if rates.size else None,
        "peak_to_mean": float(rates.max()) / mean_rate if mean_rate else None,
        "fano_factor": float(counts.var() / counts.mean()) if counts.size and counts.mean() > 0 else None,
        "interarrival": {
            "gaps": int(g.get("n") or 0),
            "mean_s": _f(mean),
            "cv": _f(std / mean) if mean and std is not None else None,
            "p50_s": _f(g.get("p50")),
            "p99_s": _f(g.get("p99")),
            "burstiness": _f((std - mean) / (std + mean)) if mean and std is not None else None,
        },
    }
    if c.t_end <= c.t_start:  # one window of a made-up second: its "rate" would be the request count
        reason = "all requests share one timestamp"
        for name in ("rate_mean", "rate_max", "peak_to_mean", "fano_factor"):
            out[name] = None
        nulls.note(out, "arrivals", reason, "rate_mean", "rate_max", "peak_to_mean", "fano_factor")
        for name in ("mean_s", "cv", "p50_s", "p99_s", "burstiness"):
            out["interarrival"][name] = None
        nulls.reasons["arrivals.interarrival"] = reason
        return out
    if out["interarrival"]["cv"] is None:
        nulls.reasons["arrivals.interarrival"] = "fewer than two requests with distinct arrival times"
    return out


def _fanout(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    out: dict[str, Any] = {
        "servers": c.servers,
        "replication": c.replication,
        "ring": "murmur3_x64_128 token, evenly spaced server tokens, replicas = next servers clockwise",
        "opset_server": "primary replica",
    }
    if c.fanout_hist is None or c.server_load is None or c.fanout_hist.empty:
        nulls.note(out, "fanout", c.extra_reasons.get("fanout", "fan-out not computed"), "requests_counted",
                   "requests_fraction", "opsets_mean",
                   "opsets_p99", "bottleneck_mean", "bottleneck_p99", "hottest_partition_ratio")
        return out
    h = c.fanout_hist
    w = h["requests"].to_numpy(np.int64)
    o = h["opsets"].to_numpy(np.int64)
    b = h["bottleneck"].to_numpy(np.int64)
    load = c.server_load["load"].to_numpy(np.float64)
    mean_load = float(load.mean()) if load.size else 0.0
    counted = int(w.sum())
    out |= {
        "requests_counted": counted,
        "requests_fraction": counted / c.requests if c.requests else None,
        "opsets_mean": histstats.weighted_mean(o, w),
        "opsets_p99": histstats.quantile(o, w, 0.99),
        "opsets_max": int(o.max()),
        "bottleneck_mean": histstats.weighted_mean(b, w),
        "bottleneck_p99": histstats.quantile(b, w, 0.99),
        "bottleneck_max": int(b.max()),
        "hottest_partition_ratio": float(load.max()) / mean_load if mean_load > 0 else None,
        "hottest_server": int(c.server_load["server"].to_numpy(np.int64)[int(np.argmax(load))]),
    }
    return out


def _latency(c: Collected, nulls: _Nulls) -> dict[str, Any]:
    out: dict[str, Any] = {"size_latency_pearson": _f(c.latency_corr), "deciles": []}
    if c.latency_deciles is not None:
        out["deciles"] = [
            {"decile": int(r["decile"]), "requests": int(r["requests"]), "mean_size": float(r["mean_size"]),
             "mean_latency_us": float(r["mean_latency_us"])}
            for r in _records(c.latency_deciles)
        ]
    if out["size_latency_pearson"] is None:
        reason = ("the trace carries no latencies" if c.latency_deciles is None
                  else "correlation undefined (constant size or latency)")
        nulls.note(out, "latency", reason, "size_latency_pearson")
    return out


def _slack(c: Collected, nulls: _Nulls) -> list[dict[str, Any]]:
    if c.slack is None:
        nulls.reasons["slack_bounds"] = c.slack_reason or "no simulator replay available"
        return []
    return [
        {"utilization": float(r["utilization"]), "ops": int(r["ops"]), "upper_ms": float(r["upper_ms"]),
         "lower_ms": float(r["lower_ms"])}
        for r in _records(c.slack)
    ]


def _slack_observed(c: Collected, nulls: _Nulls) -> dict[str, Any] | None:
    if c.slack_observed is None:
        nulls.reasons["slack_observed"] = "the trace carries no latencies"
        return None
    out: dict[str, Any] = {"ops": int(c.slack_observed.get("ops") or 0),
                           "upper_ms": _f(c.slack_observed.get("upper_ms")), "lower_ms": None}
    nulls.reasons["slack_observed.lower_ms"] = "needs per-server queues, which a trace does not record"
    return out


def build_summary(c: Collected) -> dict[str, Any]:
    """The summary.json document (JSON-ready: plain dicts, lists, str, int, float, None)."""
    reasons: dict[str, str] = dict(c.extra_reasons)
    reasons.pop("fanout", None)
    nulls = _Nulls(reasons)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "dataset": {
            "source": c.source,
            "rows": c.rows,
            "requests": c.requests,
            "t_start": c.t_start,
            "t_end": c.t_end,
            "has_value_size": not c.value_size_hist.empty,
            "has_latency": c.latency_deciles is not None,
        },
        "multiget_size": _multiget(c, nulls),
        "key_popularity": _popularity(c, nulls),
        "value_size": _value_size(c, nulls),
        "arrivals": _arrivals(c, nulls),
        "fanout": _fanout(c, nulls),
        "latency": _latency(c, nulls),
        "slack_bounds": _slack(c, nulls),
        "slack_observed": _slack_observed(c, nulls),
    }
    doc["null_reasons"] = reasons
    doc["findings"] = findings(doc)
    return doc
