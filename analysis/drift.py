"""Has the workload moved? Two characterizations of traces compared quantity by quantity.

A characterization is what `jobs.characterize` writes: summary.json and, beside it, `tables/*.parquet`. Each
quantity below is one statistic of the two with a threshold (`Thresholds`, from the settings `drift_*`); it has
moved when the statistic passes its threshold. The statistics, the thresholds and why: docs/drift.md.

| quantity | statistic | from |
|---|---|---|
| `multiget_size` | Kolmogorov–Smirnov distance of the request-size distributions | tables/multiget_size_histogram |
| `multiget_size_p99` | relative change of the p99 request size | multiget_size.p99 |
| `zipf_alpha` | absolute change of the Zipf exponent (maximum likelihood) | key_popularity.zipf_alpha_mle |
| `hot_set` | share of the new trace's accesses to top keys that were not top keys before | key_popularity.top_keys |
| `hot_set_share` | absolute change of the share of accesses to the top keys | key_popularity.top_keys |
| `value_size` | largest relative change of the per-access p50, p90, p99 | value_size.p50/p90/p99 |
| `request_rate` | relative change of the mean request rate | arrivals.rate_mean |
| `fanout` | relative change of the mean servers per request (and the topology it was computed on) | fanout |

A quantity the old characterization lacks (or that the new one lacks while the old had it) cannot be compared: it
counts as moved and says why. One that neither has (a trace format without value sizes, traces without
timestamps) has not moved: the tuner saw the same absence.

Everything here is exact numpy on small tables (no Spark), tested in tests/analysis/test_drift.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from base.settings import Settings

__all__ = [
    "QUANTITIES",
    "Characterization",
    "Thresholds",
    "compare",
    "ks_critical",
    "ks_distance",
]

#: The quantities compared, in the order they are reported.
QUANTITIES = (
    "multiget_size",
    "multiget_size_p99",
    "zipf_alpha",
    "hot_set",
    "hot_set_share",
    "value_size",
    "request_rate",
    "fanout",
)

SIZE_TABLE = "tables/multiget_size_histogram.parquet"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The threshold of each quantity (the defaults are the settings' defaults; docs/drift.md says why)."""

    multiget_ks: float = 0.05
    multiget_ks_alpha: float = 0.001
    multiget_p99: float = 0.25
    zipf_alpha: float = 0.10
    hot_set: float = 0.05
    hot_set_share: float = 0.05
    value_size: float = 0.25
    request_rate: float = 0.10
    fanout: float = 0.10

    @classmethod
    def of(cls, settings: Settings) -> Thresholds:
        return cls(
            multiget_ks=settings.drift_multiget_ks,
            multiget_ks_alpha=settings.drift_multiget_ks_alpha,
            multiget_p99=settings.drift_multiget_p99,
            zipf_alpha=settings.drift_zipf_alpha,
            hot_set=settings.drift_hot_set,
            hot_set_share=settings.drift_hot_set_share,
            value_size=settings.drift_value_size,
            request_rate=settings.drift_request_rate,
            fanout=settings.drift_fanout,
        )


IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Characterization:
    """One analysis's output as the comparison reads it: the summary and the request-size histogram (None when
    the directory has no such table)."""

    summary: dict[str, Any]
    size_hist: tuple[IntArray, IntArray] | None = None  # sizes, requests

    @classmethod
    def load(cls, out_dir: Path) -> Characterization:
        """Read an analysis directory. OSError / ValueError when its summary.json is missing or not a JSON
        object (the caller says which characterization could not be read)."""
        doc = json.loads((out_dir / "summary.json").read_text())
        if not isinstance(doc, dict):
            raise ValueError("summary.json is not a JSON object")
        table = out_dir / SIZE_TABLE
        hist = None
        if table.is_file():
            import pyarrow.parquet as pq

            t = pq.read_table(table, columns=["size", "requests"])
            hist = (
                np.asarray(t.column("size").to_numpy(zero_copy_only=False), dtype=np.int64),
                np.asarray(t.column("requests").to_numpy(zero_copy_only=False), dtype=np.int64),
            )
        return cls(doc, hist)


# --- statistics -----------------------------------------------------------------------------------------------
def _cdf(values: IntArray, weights: IntArray, grid: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    order = np.argsort(values, kind="stable")
    v = values[order].astype(np.float64)
    cum = np.cumsum(weights[order].astype(np.float64))
    cum /= cum[-1]
    idx = np.searchsorted(v, grid, side="right")  # how many values are <= each grid point
    return np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0)


def ks_distance(a: tuple[IntArray, IntArray], b: tuple[IntArray, IntArray]) -> float:
    """Two-sample Kolmogorov–Smirnov distance of two weighted histograms: the largest difference of their
    cumulative shares at any value (exact: both CDFs are step functions that change only at their values)."""
    grid = np.union1d(a[0], b[0]).astype(np.float64)
    return float(np.max(np.abs(_cdf(a[0], a[1], grid) - _cdf(b[0], b[1], grid))))


def ks_critical(n: int, m: int, alpha: float) -> float:
    """The asymptotic critical value of the two-sample KS distance at level `alpha` for samples of n and m:
    c(α)·√((n+m)/(n·m)), c(α) = √(−ln(α/2)/2). Conservative for discrete data (the true level is smaller)."""
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


# --- reading the summaries ------------------------------------------------------------------------------------
def _get(doc: Mapping[str, Any], path: str) -> Any:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _num(doc: Mapping[str, Any], path: str) -> float | None:
    v = _get(doc, path)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _why_null(doc: Mapping[str, Any], path: str) -> str:
    reasons = doc.get("null_reasons")
    reason = reasons.get(path) if isinstance(reasons, Mapping) else None
    return str(reason) if reason else "not in the summary"


def _top(doc: Mapping[str, Any]) -> dict[str, float] | None:
    """key → share of accesses of the summary's top keys; None when the summary does not list them."""
    rows = _get(doc, "key_popularity.top_keys")
    if not isinstance(rows, list):
        return None
    out: dict[str, float] = {}
    for r in rows:
        if isinstance(r, Mapping) and isinstance(r.get("key"), str):
            share = r.get("share")
            if isinstance(share, int | float) and not isinstance(share, bool) and math.isfinite(share):
                out[r["key"]] = float(share)
    return out


# --- one quantity ---------------------------------------------------------------------------------------------
def _entry(statistic: str, value: float | None, threshold: float, moved: bool, old: Any, new: Any,
           reason: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"statistic": statistic, "value": value, "threshold": threshold, "moved": moved, "old": old,
            "new": new, "reason": reason, **extra}


def _missing(statistic: str, threshold: float, old: Any, new: Any, old_why: str | None, new_why: str | None
             ) -> dict[str, Any] | None:
    """The entry of a quantity one side lacks (moved, with why), of one neither has (not moved), else None."""
    if old_why is None and new_why is None:
        return None
    if old_why is not None and new_why is not None:
        return _entry(statistic, None, threshold, False, old, new,
                      f"neither trace has it (old: {old_why}; new: {new_why})")
    if old_why is not None:
        return _entry(statistic, None, threshold, True, old, new,
                      f"cannot be compared: the earlier characterization lacks it ({old_why})")
    return _entry(statistic, None, threshold, True, old, new,
                  f"cannot be compared: the new trace lacks it ({new_why})")


def _relative(statistic: str, path: str, threshold: float, old: Mapping[str, Any], new: Mapping[str, Any],
              floor: float = 1e-9) -> dict[str, Any]:
    """|new − old| / old of one number of the summaries (the denominator at least `floor`)."""
    a, b = _num(old, path), _num(new, path)
    gone = _missing(statistic, threshold, a, b, None if a is not None else _why_null(old, path),
                    None if b is not None else _why_null(new, path))
    if gone is not None:
        return gone
    assert a is not None and b is not None
    value = abs(b - a) / max(abs(a), floor)
    return _entry(statistic, value, threshold, value > threshold, a, b)


def _multiget_size(old: Characterization, new: Characterization, t: Thresholds) -> dict[str, Any]:
    stat = "ks_distance"
    figures = [{"requests": int(h[1].sum()), "mean": _num(c.summary, "multiget_size.mean")} if h is not None
               else None for c, h in ((old, old.size_hist), (new, new.size_hist))]
    empty = "the analysis wrote no request-size histogram (tables/multiget_size_histogram.parquet)"
    gone = _missing(stat, t.multiget_ks, figures[0], figures[1],
                    None if old.size_hist is not None and old.size_hist[1].sum() > 0 else empty,
                    None if new.size_hist is not None and new.size_hist[1].sum() > 0 else empty)
    if gone is not None:
        return gone
    assert old.size_hist is not None and new.size_hist is not None
    n, m = int(old.size_hist[1].sum()), int(new.size_hist[1].sum())
    d = ks_distance(old.size_hist, new.size_hist)
    critical = ks_critical(n, m, t.multiget_ks_alpha)
    threshold, reason = t.multiget_ks, None
    if critical > threshold:
        threshold = critical
        reason = (f"the threshold is the KS critical value at level {t.multiget_ks_alpha:g} for {n:,} and {m:,} "
                  f"requests ({critical:.4f}), above the setting {t.multiget_ks:g}: a smaller distance is not told "
                  "apart from sampling noise")
    return _entry(stat, d, threshold, d > threshold, figures[0], figures[1], reason)


def _zipf_alpha(old: Characterization, new: Characterization, t: Thresholds) -> dict[str, Any]:
    path, stat = "key_popularity.zipf_alpha_mle", "absolute_change"
    a, b = _num(old.summary, path), _num(new.summary, path)
    gone = _missing(stat, t.zipf_alpha, a, b, None if a is not None else _why_null(old.summary, path),
                    None if b is not None else _why_null(new.summary, path))
    if gone is not None:
        return gone
    assert a is not None and b is not None
    value = abs(b - a)
    return _entry(stat, value, t.zipf_alpha, value > t.zipf_alpha, a, b)


def _hot_sets(old: Characterization, new: Characterization, t: Thresholds
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    a, b = _top(old.summary), _top(new.summary)
    why = "the summary lists no top keys (key_popularity.top_keys)"
    olds = None if a is None else {"keys": len(a), "share": sum(a.values())}
    news = None if b is None else {"keys": len(b), "share": sum(b.values())}
    stat_new, stat_share = "new_hot_keys_access_share", "absolute_change"
    gone_new = _missing(stat_new, t.hot_set, olds, news, None if a else why, None if b else why)
    gone_share = _missing(stat_share, t.hot_set_share, olds, news, None if a else why, None if b else why)
    if gone_new is not None and gone_share is not None:
        return gone_new, gone_share
    assert a and b and olds is not None and news is not None
    k = min(len(a), len(b))  # the summaries may list different numbers of keys: compare the top k of each
    top_a = dict(sorted(a.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
    top_b = dict(sorted(b.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
    fresh = sum(share for key, share in top_b.items() if key not in top_a)
    jaccard = len(top_a.keys() & top_b.keys()) / len(top_a.keys() | top_b.keys())
    olds, news = {"keys": k, "share": sum(top_a.values())}, {"keys": k, "share": sum(top_b.values())}
    change = abs(news["share"] - olds["share"])
    return (
        _entry(stat_new, fresh, t.hot_set, fresh > t.hot_set, olds, news, jaccard=jaccard),
        _entry(stat_share, change, t.hot_set_share, change > t.hot_set_share, olds, news),
    )


VALUE_QUANTILES = ("p50", "p90", "p99")


def _value_size(old: Characterization, new: Characterization, t: Thresholds) -> dict[str, Any]:
    stat = "max_relative_change"

    def figures(doc: Mapping[str, Any]) -> tuple[dict[str, float] | None, str | None]:
        got = {q: _num(doc, f"value_size.{q}") for q in VALUE_QUANTILES}
        if any(v is None for v in got.values()):
            q = next(q for q, v in got.items() if v is None)
            return None, _why_null(doc, f"value_size.{q}")
        return {q: float(v) for q, v in got.items() if v is not None}, None

    (a, why_a), (b, why_b) = figures(old.summary), figures(new.summary)
    gone = _missing(stat, t.value_size, a, b, why_a, why_b)
    if gone is not None:
        return gone
    assert a is not None and b is not None
    # bytes: a value of 0 bytes is possible, so the denominator is at least one byte
    changes = {q: abs(b[q] - a[q]) / max(abs(a[q]), 1.0) for q in VALUE_QUANTILES}
    value = max(changes.values())
    return _entry(stat, value, t.value_size, value > t.value_size, a, b, changes=changes)


def _fanout(old: Characterization, new: Characterization, t: Thresholds) -> dict[str, Any]:
    entry = _relative("relative_change", "fanout.opsets_mean", t.fanout, old.summary, new.summary, floor=1.0)
    shape = [(_get(c.summary, "fanout.servers"), _get(c.summary, "fanout.replication")) for c in (old, new)]
    entry["old"] = {"opsets_mean": entry["old"], "servers": shape[0][0], "replication": shape[0][1]}
    entry["new"] = {"opsets_mean": entry["new"], "servers": shape[1][0], "replication": shape[1][1]}
    if shape[0] != shape[1] and None not in (shape[0][0], shape[1][0]):
        entry["moved"] = True
        entry["reason"] = (f"the topology it is computed on changed: {shape[0][0]} servers RF {shape[0][1]} → "
                           f"{shape[1][0]} servers RF {shape[1][1]}")
    return entry


def compare(old: Characterization, new: Characterization, thresholds: Thresholds = Thresholds()
            ) -> dict[str, dict[str, Any]]:
    """Each quantity of `QUANTITIES` → {statistic, value, threshold, moved, old, new, reason} (+ a few figures of
    its own: `jaccard` for hot_set, `changes` for value_size). `value` is null when the quantity could not be
    compared; `reason` says why, or what else decided `moved`, and is null otherwise."""
    t = thresholds
    hot, hot_share = _hot_sets(old, new, t)
    out = {
        "multiget_size": _multiget_size(old, new, t),
        "multiget_size_p99": _relative("relative_change", "multiget_size.p99", t.multiget_p99,
                                       old.summary, new.summary, floor=1.0),
        "zipf_alpha": _zipf_alpha(old, new, t),
        "hot_set": hot,
        "hot_set_share": hot_share,
        "value_size": _value_size(old, new, t),
        "request_rate": _relative("relative_change", "arrivals.rate_mean", t.request_rate, old.summary,
                                  new.summary),
        "fanout": _fanout(old, new, t),
    }
    return {name: out[name] for name in QUANTITIES}
