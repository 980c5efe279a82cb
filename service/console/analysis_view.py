"""The analysis page's content, from summary.json alone: findings (plain sentences), figures (plotly.js specs) and
tables. A thin adapter with the three functions of `analysis.report.components` (`findings(summary)`,
`figures(summary)`, `tables(summary)`), which the report helper builds on the `report` branch: once that is on
main, these three bodies become calls to it and the page stays as it is.

Figures (each zooms, shows values on hover and switches between linear and log axes):
multi-key sizes (the fitted discretized lognormal, with the measured percentiles), key popularity (the top keys
by rank, log–log, with the two Zipf fits), hot-set drift between windows, value sizes (percentiles and the THR_L
candidates), slack bounds against utilization, latency by size decile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from service.console.charts import COLORS, axis_menu, base_layout, log_axis, spec

__all__ = ["Figure", "Table", "figures", "findings", "tables"]

Figure = dict[str, Any]  # {"id", "title", "caption", "spec"}
Table = dict[str, Any]  # {"title", "columns", "rows"}


def findings(summary: Mapping[str, Any]) -> list[str]:
    """What the analysis found, in plain sentences (summary.json's `findings`), then what it could not compute."""
    out = [str(f) for f in summary.get("findings") or []]
    reasons = summary.get("null_reasons") or {}
    if reasons:
        out.append(f"{len(reasons)} figure(s) could not be computed from this trace; the last table says why.")
    return out


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _sizes(ms: Mapping[str, Any]) -> Figure | None:
    mu, sigma = ms.get("lognormal_mu"), ms.get("lognormal_sigma")
    if mu is None or sigma is None or not sigma > 0:
        return None
    top = int(max(ms.get("max") or 2, 2))
    ks = list(range(2, min(top, 2000) + 1))
    norm = 1.0 - _phi((math.log(1.5) - mu) / sigma)
    share = float(ms.get("frac_multi") or 0.0)

    def fitted(k: float) -> float:
        """The fitted share of requests with k keys (k ≥ 2), or the single-key share at k = 1."""
        if k < 1.5:
            return 1.0 - share
        p = _phi((math.log(k + 0.5) - mu) / sigma) - _phi((math.log(k - 0.5) - mu) / sigma)
        return share * p / norm

    data: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines", "name": "fitted lognormal (multi-key part)", "x": ks,
        "y": [fitted(k) for k in ks], "line": {"color": COLORS[0], "width": 2},
        "hovertemplate": "%{x} keys: %{y:.3g} of requests<extra></extra>"}]
    marks = [(q, float(ms[q])) for q in ("p50", "p95", "p99", "max") if ms.get(q) is not None]
    data.append({"type": "scatter", "mode": "markers+text", "name": "measured percentiles",
                 "x": [v for _, v in marks], "y": [max(fitted(round(v)), 1e-12) for _, v in marks],
                 "text": [q for q, _ in marks], "textposition": "top center",
                 "marker": {"color": COLORS[1], "size": 9, "symbol": "diamond"},
                 "hovertemplate": "%{text}: %{x} keys<extra></extra>"})
    layout = base_layout("Multiget sizes", x="keys per request", y="share of requests")
    log_axis(layout, "x")
    log_axis(layout, "y")
    layout["updatemenus"] = [axis_menu("y", "log")]
    caption = (f"μ = {mu:.3g}, σ = {sigma:.3g} (KS distance {ms.get('lognormal_ks') or 0:.3g} on "
               f"{ms.get('lognormal_n') or 0:,} multi-key requests); {share:.0%} of requests are multi-key.")
    return {"id": "sizes", "title": "Multiget sizes", "caption": caption,
            "spec": spec(data, layout)}


def _popularity(kp: Mapping[str, Any]) -> Figure | None:
    top = kp.get("top_keys") or []
    if not top:
        return None
    ranks = list(range(1, len(top) + 1))
    counts = [int(k["count"]) for k in top]
    data: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "markers", "name": "top keys", "x": ranks, "y": counts,
        "text": [str(k["key"])[:60] for k in top], "marker": {"color": COLORS[0], "size": 8},
        "hovertemplate": "rank %{x}: %{y:,} accesses<br>key %{text}<extra></extra>"}]
    for i, (name, alpha) in enumerate((("Zipf MLE", kp.get("zipf_alpha_mle")), ("Zipf OLS", kp.get("zipf_alpha_ols")))):
        if alpha is None:
            continue
        data.append({"type": "scatter", "mode": "lines", "name": f"{name} α = {alpha:.2f}", "x": ranks,
                     "y": [counts[0] * r ** -float(alpha) for r in ranks],
                     "line": {"color": COLORS[1 + i], "dash": ("dash", "dot")[i]},
                     "hovertemplate": "rank %{x}: %{y:,.0f}<extra>%{fullData.name}</extra>"})
    layout = base_layout("Key popularity (top keys)", x="rank", y="accesses")
    log_axis(layout, "x", decades=False)
    log_axis(layout, "y", decades=False)
    layout["updatemenus"] = [axis_menu("y", "log", decades=False)]
    caption = (f"{kp.get('distinct_keys') or 0:,} distinct keys, {kp.get('accesses') or 0:,} accesses; "
               f"the fitted lines start at the most accessed key.")
    return {"id": "popularity", "title": "Key popularity", "caption": caption,
            "spec": spec(data, layout)}


def _drift(kp: Mapping[str, Any]) -> Figure | None:
    drift = kp.get("hot_set_drift") or {}
    values = drift.get("jaccard_consecutive") or []
    if not values:
        return None
    xs = list(range(2, len(values) + 2))
    data = [{"type": "scatter", "mode": "lines+markers", "name": "Jaccard", "x": xs, "y": values,
             "line": {"color": COLORS[2], "width": 2},
             "hovertemplate": "window %{x} vs the one before: %{y:.2f}<extra></extra>"}]
    layout = base_layout(f"Hot-set drift (top {drift.get('top_n')} keys)", x="time window", y="Jaccard similarity")
    layout["yaxis"]["range"] = [0, 1.05]
    caption = (f"{drift.get('windows')} windows of {drift.get('window_s') or 0:.3g} s; 1 = the same hot keys as the "
               "window before.")
    return {"id": "drift", "title": "Hot-set drift", "caption": caption,
            "spec": spec(data, layout)}


def _values(vs: Mapping[str, Any]) -> Figure | None:
    marks = [(q, vs.get(q)) for q in ("p50", "p90", "p99", "max") if vs.get(q) is not None]
    if not marks:
        return None
    data: list[dict[str, Any]] = [{"type": "bar", "name": "per access", "x": [q for q, _ in marks],
                                   "y": [v for _, v in marks], "marker": {"color": COLORS[0]},
                                   "hovertemplate": "%{x}: %{y:,} bytes<extra>per access</extra>"}]
    per_key = vs.get("per_key") or {}
    keyed = [(q, per_key.get(q)) for q, _ in marks if per_key.get(q) is not None]
    if keyed:
        data.append({"type": "bar", "name": "per key", "x": [q for q, _ in keyed], "y": [v for _, v in keyed],
                     "marker": {"color": COLORS[4]}, "hovertemplate": "%{x}: %{y:,} bytes<extra>per key</extra>"})
    layout = base_layout("Value sizes", x="percentile", y="bytes")
    log_axis(layout, "y")
    layout["barmode"] = "group"
    layout["updatemenus"] = [axis_menu("y", "log")]
    return {"id": "values", "title": "Value sizes", "caption": "Percentiles of the value size, per access and per key.",
            "spec": spec(data, layout)}


def _slack(bounds: list[Mapping[str, Any]]) -> Figure | None:
    if not bounds:
        return None
    xs = [b["utilization"] for b in bounds]
    data = [{"type": "scatter", "mode": "lines+markers", "name": name, "x": xs, "y": [b.get(key) for b in bounds],
             "line": {"color": COLORS[i], "width": 2},
             "hovertemplate": "utilization %{x:.0%}: %{y:.3g} ms<extra>%{fullData.name}</extra>"}
            for i, (name, key) in enumerate((("upper bound", "upper_ms"), ("lower bound", "lower_ms")))]
    layout = base_layout("Slack bounds (fifo replay)", x="utilization", y="mean per-op reduction (ms)")
    layout["xaxis"]["tickformat"] = ".0%"
    layout["updatemenus"] = [axis_menu("y", "linear")]
    return {"id": "slack", "title": "Slack bounds", "caption": "How much a scheduler could cut per op, at most "
            "(upper) and surely (lower), by the load of the simulated cluster.",
            "spec": spec(data, layout)}


def _latency(lat: Mapping[str, Any]) -> Figure | None:
    deciles = lat.get("deciles") or []
    if not deciles:
        return None
    data = [{"type": "scatter", "mode": "lines+markers", "name": "mean size", "x": [d["decile"] for d in deciles],
             "y": [d.get("mean_size") for d in deciles], "text": [f"{d.get('mean_latency_us') or 0:.4g} µs"
                                                                 for d in deciles],
             "line": {"color": COLORS[3], "width": 2},
             "hovertemplate": "latency decile %{x}: mean size %{y:.3g} keys (mean latency %{text})<extra></extra>"}]
    layout = base_layout("Request size by latency decile", x="latency decile", y="mean keys per request")
    return {"id": "latency", "title": "Latency and size", "caption": "Rein's Fig. 4: are the slow requests the big "
            "ones?", "spec": spec(data, layout)}


def figures(summary: Mapping[str, Any]) -> list[Figure]:
    """The analysis's figures as plotly.js specs, in reading order; those the trace cannot support are left out."""
    kp = summary.get("key_popularity") or {}
    made = [
        _sizes(summary.get("multiget_size") or {}),
        _popularity(kp),
        _drift(kp),
        _values(summary.get("value_size") or {}),
        _slack(list(summary.get("slack_bounds") or [])),
        _latency(summary.get("latency") or {}),
    ]
    return [f for f in made if f is not None]


_LABELS = {
    "requests": "requests", "rows": "rows", "mean": "mean", "p50": "p50", "p95": "p95", "p99": "p99", "max": "max",
    "frac_multi": "multi-key share", "skewness": "skewness", "distinct_keys": "distinct keys",
    "accesses": "accesses", "one_hit_wonder_share": "keys accessed once", "one_hit_access_share":
    "accesses to keys seen once", "zipf_alpha_mle": "Zipf α (MLE)", "zipf_alpha_ols": "Zipf α (OLS)",
    "zipf_ols_r2": "OLS R²", "duration_s": "duration (s)", "rate_mean": "mean rate (req/s)",
    "rate_max": "peak rate (req/s)", "peak_to_mean": "peak / mean", "fano_factor": "Fano factor",
    "servers": "servers", "replication": "replication", "opsets_mean": "servers per request (mean)",
    "opsets_p99": "servers per request (p99)", "opsets_max": "servers per request (max)",
    "bottleneck_mean": "keys on the busiest server (mean)", "bottleneck_p99": "keys on the busiest server (p99)",
    "hottest_partition_ratio": "hottest server / mean load", "p90": "p90", "top1pct_bytes_share":
    "bytes in the largest 1 % of keys", "source": "source", "has_value_size": "value sizes recorded",
    "has_latency": "latencies recorded", "t_start": "first timestamp", "t_end": "last timestamp",
}


def _facts(title: str, section: Mapping[str, Any], keys: tuple[str, ...]) -> Table | None:
    rows = [[_LABELS.get(k, k), section.get(k)] for k in keys if k in section]
    return {"title": title, "columns": ["", "value"], "rows": rows} if rows else None


def tables(summary: Mapping[str, Any]) -> list[Table]:
    """The summary's figures as tables (name, value), the THR_L candidates, and why some figures are missing."""
    out = [
        _facts("Dataset", summary.get("dataset") or {},
               ("source", "rows", "requests", "t_start", "t_end", "has_value_size", "has_latency")),
        _facts("Multiget sizes", summary.get("multiget_size") or {},
               ("requests", "frac_multi", "mean", "p50", "p95", "p99", "max", "skewness")),
        _facts("Key popularity", summary.get("key_popularity") or {},
               ("distinct_keys", "accesses", "one_hit_wonder_share", "one_hit_access_share", "zipf_alpha_mle",
                "zipf_alpha_ols", "zipf_ols_r2")),
        _facts("Value sizes (bytes, per access)", summary.get("value_size") or {},
               ("p50", "p90", "p99", "max", "mean", "top1pct_bytes_share")),
        _facts("Arrivals", summary.get("arrivals") or {},
               ("duration_s", "rate_mean", "rate_max", "peak_to_mean", "fano_factor")),
        _facts("Fan-out", summary.get("fanout") or {},
               ("servers", "replication", "opsets_mean", "opsets_p99", "opsets_max", "bottleneck_mean",
                "bottleneck_p99", "hottest_partition_ratio")),
    ]
    cands = (summary.get("value_size") or {}).get("thr_l_candidates") or []
    if cands:
        out.append({"title": "Large-value thresholds (THR_L candidates)",
                    "columns": ["rule", "bytes", "keys above", "accesses above", "bytes above"],
                    "rows": [[c.get("rule"), c.get("bytes"), c.get("key_share"), c.get("access_share"),
                              c.get("bytes_share")] for c in cands]})
    reasons = summary.get("null_reasons") or {}
    if reasons:
        out.append({"title": "Not computed", "columns": ["figure", "why"],
                    "rows": [[k, v] for k, v in sorted(reasons.items())]})
    return [t for t in out if t is not None]
