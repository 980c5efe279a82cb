"""The label table: every summary.json field the report shows, in words, with its unit.

`LABELS["section.field"]` (nested fields with more dots: `value_size.per_key.p50`) → `Label(text, fmt)`; `fmt`
turns the value into text with its unit. The report and the console show labels, never the keys;
tests/analysis/test_report.py fails for a summary field without a label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analysis.report import units as u

__all__ = ["LABELS", "SECTIONS", "Label", "label", "value_text"]


@dataclass(frozen=True, slots=True)
class Label:
    text: str
    fmt: Callable[[Any], str]


def _yes(x: Any) -> str:
    return "—" if x is None else ("yes" if x else "no")


def _text(x: Any) -> str:
    return "—" if x is None else str(x)


def _num(x: Any) -> str:
    return u.number(x)


def _exponent(x: Any) -> str:
    return "—" if x is None else f"{float(x):.2f}"


def _ms(x: Any) -> str:
    return "—" if x is None else f"{u.number(x)} ms"


def _t(x: Any) -> str:
    return "—" if x is None else f"{u.number(x)} s"


def _model(x: Any) -> str:
    return {"power_law": "power law", "lognormal": "lognormal"}.get(x, _text(x))


def _size_range(x: Any) -> str:
    return "—" if not x else f"{u.count(x['min_size'])} to {u.keys(x['max_size'])}"


def _rank_range(x: Any) -> str:
    return "—" if not x else f"ranks {u.count(x['rank_min'])} to {u.count(x['rank_max'])}"


_L = Label
LABELS: dict[str, Label] = {
    # the trace
    "dataset.source": _L("dataset or file", _text),
    "dataset.rows": _L("key accesses (rows)", u.count),
    "dataset.requests": _L("requests", u.count),
    "dataset.t_start": _L("first arrival", _t),
    "dataset.t_end": _L("last arrival", _t),
    "dataset.has_value_size": _L("value sizes recorded", _yes),
    "dataset.has_latency": _L("latencies recorded", _yes),
    # multiget sizes
    "multiget_size.requests": _L("requests", u.count),
    "multiget_size.mean": _L("keys per request, mean", u.keys),
    "multiget_size.p50": _L("keys per request, median", u.keys),
    "multiget_size.p95": _L("keys per request, 95th percentile", u.keys),
    "multiget_size.p99": _L("keys per request, 99th percentile", u.keys),
    "multiget_size.max": _L("largest request", u.keys),
    "multiget_size.frac_multi": _L("requests with more than one key", u.share),
    "multiget_size.skewness": _L("skewness of request sizes", _num),
    "multiget_size.size_model": _L("model of multi-key sizes", _model),
    "multiget_size.power_law_alpha": _L("power law: exponent α of P(k) ∝ k^−α", _exponent),
    "multiget_size.power_law_ks": _L("power law: largest gap to the data's CDF", u.share),
    "multiget_size.power_law_loglik": _L("power law: log-likelihood", _num),
    "multiget_size.lognormal_mu": _L("lognormal: mean μ of ln(size)", _num),
    "multiget_size.lognormal_sigma": _L("lognormal: spread σ of ln(size)", _num),
    "multiget_size.lognormal_ks": _L("lognormal: largest gap to the data's CDF", u.share),
    "multiget_size.lognormal_loglik": _L("lognormal: log-likelihood", _num),
    "multiget_size.lognormal_n": _L("multi-key requests fitted", u.count),
    "multiget_size.lognormal_fit_range": _L("sizes fitted", _size_range),
    # key popularity
    "key_popularity.distinct_keys": _L("distinct keys", u.count),
    "key_popularity.accesses": _L("accesses", u.count),
    "key_popularity.one_hit_wonder_share": _L("keys accessed only once", u.share),
    "key_popularity.one_hit_access_share": _L("accesses to keys accessed only once", u.share),
    "key_popularity.max_count": _L("accesses to the most popular key", u.count),
    "key_popularity.zipf_alpha_mle": _L("Zipf α, maximum likelihood", _exponent),
    "key_popularity.zipf_alpha_ols": _L("Zipf α, least squares on the rank-frequency line", _exponent),
    "key_popularity.zipf_ols_r2": _L("R² of that line", _num),
    "key_popularity.zipf_fit_range": _L("keys fitted", _rank_range),
    "key_popularity.top_keys": _L("most accessed keys", _text),
    "key_popularity.hot_set_drift.windows": _L("time windows", u.count),
    "key_popularity.hot_set_drift.window_s": _L("window length", u.duration),
    "key_popularity.hot_set_drift.top_n": _L("hot-set size (most accessed keys per window)", u.keys),
    "key_popularity.hot_set_drift.nonempty_windows": _L("windows with requests", u.count),
    "key_popularity.hot_set_drift.jaccard_consecutive": _L("overlap between consecutive windows", _text),
    "key_popularity.hot_set_drift.jaccard_consecutive_mean": _L("overlap between consecutive windows, mean "
                                                                "(Jaccard)", u.share),
    "key_popularity.hot_set_drift.jaccard_consecutive_min": _L("overlap between consecutive windows, least",
                                                               u.share),
    # value sizes
    "value_size.p50": _L("value size per access, median", u.bytes_),
    "value_size.p90": _L("value size per access, 90th percentile", u.bytes_),
    "value_size.p99": _L("value size per access, 99th percentile", u.bytes_),
    "value_size.max": _L("largest value", u.bytes_),
    "value_size.mean": _L("value size per access, mean", u.bytes_),
    "value_size.skewness": _L("skewness of value sizes per access", _num),
    "value_size.per_key.keys": _L("keys with a known size", u.count),
    "value_size.per_key.p50": _L("value size per key, median", u.bytes_),
    "value_size.per_key.p90": _L("value size per key, 90th percentile", u.bytes_),
    "value_size.per_key.p99": _L("value size per key, 99th percentile", u.bytes_),
    "value_size.per_key.mean": _L("value size per key, mean", u.bytes_),
    "value_size.per_key.skewness": _L("skewness of value sizes per key", _num),
    "value_size.top1pct_bytes_share": _L("stored bytes in the largest 1% of keys", u.share),
    "value_size.top1pct_access_bytes_share": _L("bytes read from the largest 1% of keys", u.share),
    "value_size.gpd_xi": _L("tail shape ξ (generalized Pareto)", _num),
    "value_size.gpd_sigma": _L("tail scale σ (generalized Pareto)", u.bytes_),
    "value_size.gpd_threshold": _L("tail starts above", u.bytes_),
    "value_size.gpd_n": _L("keys in the tail fit", u.count),
    "value_size.gpd_ks": _L("tail fit: largest gap to the data's CDF", u.share),
    "value_size.thr_l_candidates": _L("large-value thresholds (THR_L candidates)", _text),
    # arrivals
    "arrivals.duration_s": _L("span of the trace", u.duration),
    "arrivals.window_s": _L("rate window", u.duration),
    "arrivals.windows": _L("rate windows", u.count),
    "arrivals.rate_mean": _L("arrival rate, mean", u.rate),
    "arrivals.rate_max": _L("arrival rate, busiest window", u.rate),
    "arrivals.peak_to_mean": _L("busiest window / mean", u.ratio),
    "arrivals.fano_factor": _L("Fano factor of requests per window (1 for Poisson)", _num),
    "arrivals.interarrival": _L("gaps between arrivals", _text),
    "arrivals.interarrival.gaps": _L("gaps between arrivals measured", u.count),
    "arrivals.interarrival.mean_s": _L("gap between arrivals, mean", u.duration),
    "arrivals.interarrival.cv": _L("gap coefficient of variation (1 for Poisson)", _num),
    "arrivals.interarrival.p50_s": _L("gap between arrivals, median", u.duration),
    "arrivals.interarrival.p99_s": _L("gap between arrivals, 99th percentile", u.duration),
    "arrivals.interarrival.burstiness": _L("burstiness (−1 regular, 0 Poisson, 1 bursty)", _num),
    # fan-out
    "fanout.servers": _L("servers on the ring", u.count),
    "fanout.replication": _L("replication factor", u.count),
    "fanout.ring": _L("ring", _text),
    "fanout.opset_server": _L("each key is read from its", _text),
    "fanout.requests_counted": _L("requests counted", u.count),
    "fanout.requests_fraction": _L("share of requests counted", u.share),
    "fanout.opsets_mean": _L("servers per request, mean", _num),
    "fanout.opsets_p99": _L("servers per request, 99th percentile", _num),
    "fanout.opsets_max": _L("servers per request, most", _num),
    "fanout.bottleneck_mean": _L("keys on a request's busiest server, mean", u.keys),
    "fanout.bottleneck_p99": _L("keys on a request's busiest server, 99th percentile", u.keys),
    "fanout.bottleneck_max": _L("keys on a request's busiest server, most", u.keys),
    "fanout.hottest_partition_ratio": _L("busiest server's load / mean load", u.ratio),
    "fanout.hottest_server": _L("busiest server", _text),
    # latency
    "latency.size_latency_pearson": _L("size–latency correlation (Pearson r)", _num),
    "latency.deciles": _L("mean size per latency decile", _text),
    # slack
    "slack_bounds": _L("slack bounds (simulated FIFO replay)", _text),
    "slack_observed": _L("slack observed in the trace", _text),
    "slack_observed.ops": _L("ops with a latency", u.count),
    "slack_observed.upper_ms": _L("slack per op, upper bound", _ms),
    "slack_observed.lower_ms": _L("slack per op, lower bound", _ms),
}

#: The summary's sections as the report titles them, in reading order.
SECTIONS: dict[str, str] = {
    "dataset": "The trace",
    "multiget_size": "Multiget sizes",
    "key_popularity": "Key popularity",
    "key_popularity.hot_set_drift": "Hot-set drift",
    "value_size": "Value sizes",
    "arrivals": "Arrivals",
    "fanout": "Fan-out",
    "latency": "Latency",
    "slack_observed": "Slack observed in the trace",
}


def label(path: str) -> str:
    """The words for a summary field (its dotted path); an unknown path gets its last part, spaces for '_'."""
    known = LABELS.get(path)
    return known.text if known is not None else path.rsplit(".", 1)[-1].replace("_", " ")


def value_text(path: str, value: Any) -> str:
    """The value of a summary field as text with its unit."""
    known = LABELS.get(path)
    if known is None:
        return u.number(value) if isinstance(value, int | float) and not isinstance(value, bool) else _text(value)
    return known.fmt(value)
