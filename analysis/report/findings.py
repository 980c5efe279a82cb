"""The findings: a few plain sentences a person reads first, from summary.json alone.

Each sentence says what the numbers mean for this trace; a degenerate trace (one value size, one request size,
one timestamp, one server, every key accessed alike) gets a sentence that says so instead of a statistic that
reads as nonsense ("0% of keys exceed 1,000 B").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from analysis.report import units as u

__all__ = ["THR_L_RULES", "findings", "one_value_size", "request_sizes", "size_model_reason", "uniform_popularity"]

#: The THR_L candidate rules in words.
THR_L_RULES = {
    "p90_by_key": "the 90th percentile of per-key sizes",
    "largest_jump": "the largest jump between per-key size quantiles",
    "p99_by_key": "the 99th percentile of per-key sizes",
}

#: Above this KS distance (largest gap between the data's CDF and the model's), a size model is not said to fit.
POOR_FIT_KS = 0.1


def request_sizes(doc: dict[str, Any]) -> int | None:
    """The one size every request has, or None when sizes differ (the mean equals the maximum only then)."""
    ms = doc["multiget_size"]
    if ms.get("max") is None or ms.get("mean") is None:
        return None
    return int(ms["max"]) if float(ms["mean"]) == float(ms["max"]) else None


def one_value_size(doc: dict[str, Any]) -> int | None:
    """The one size every value has, or None when sizes differ or are unknown."""
    vs = doc["value_size"]
    top, mean = vs.get("max"), (vs.get("per_key") or {}).get("mean")
    if top is None or mean is None:
        return None
    return int(top) if float(mean) == float(top) else None


def uniform_popularity(doc: dict[str, Any]) -> int | None:
    """The access count every key has, or None when keys differ in popularity."""
    kp = doc["key_popularity"]
    n, acc, top = kp.get("distinct_keys"), kp.get("accesses"), kp.get("max_count")
    if not n or acc is None or top is None:
        return None
    return int(top) if int(acc) == int(n) * int(top) else None


def size_model_reason(ms: dict[str, Any]) -> str | None:
    """Why the multi-key sizes are described by the model summary.json names (one sentence), or None."""
    model = ms.get("size_model")
    ln_ll, pl_ll = ms.get("lognormal_loglik"), ms.get("power_law_loglik")
    if ln_ll is None or pl_ll is None or ms.get("lognormal_mu") is None or ms.get("power_law_alpha") is None:
        return None
    mu, sigma, gain = ms["lognormal_mu"], ms["lognormal_sigma"], ln_ll - pl_ll
    fit = f"A lognormal (μ = {u.number(mu)}, σ = {u.number(sigma)})"
    if model == "power_law":
        better = (f"fits worse, though it has one parameter more (log-likelihood {u.number(-gain)} lower)"
                  if gain <= 0 else
                  f"fits barely better, with one parameter more (log-likelihood only {u.number(gain)} higher)")
        if math.exp(mu) >= 1.5:
            return f"{fit} {better}."
        median = ("its median, e^μ, is far below one key" if math.exp(mu) < 0.1 else
                  f"its median, e^μ = {u.keys(math.exp(mu))}, lies below the smallest multi-key size")
        return (f"{fit} {better}: {median}, so only its tail covers the data, and that tail is straight on log-log "
                "axes: a power law.")
    if model == "lognormal":
        return (f"A power law fits worse (log-likelihood {u.number(gain)} lower than the lognormal's): the sizes bend "
                "on log-log axes, which a lognormal does and a power law does not.")
    return None


def _sizes(doc: dict[str, Any]) -> list[str]:
    ms = doc["multiget_size"]
    if not ms.get("requests"):
        return []
    one = request_sizes(doc)
    if one == 1:
        return [f"Every one of the {u.count(ms['requests'])} requests asks for a single key: there are no "
                "multigets, so a multiget scheduler has nothing to reorder."]
    if one is not None:
        return [f"Every one of the {u.count(ms['requests'])} requests asks for exactly {u.keys(one)}."]
    out = [f"{u.share(ms['frac_multi'])} of {u.count(ms['requests'])} requests ask for more than one key; a request "
           f"asks for {u.keys(ms['mean'])} on average, {u.keys(ms['p99'])} at the 99th percentile and at most "
           f"{u.keys(ms['max'])}."]
    model = ms.get("size_model")
    lo, hi = 2, ms.get("max")
    if model == "power_law" and ms.get("power_law_alpha") is not None:
        ks = ms.get("power_law_ks")
        if ks is not None and ks > POOR_FIT_KS:
            out.append(_no_model(ms))
        else:
            shape = (f"are spread about evenly over {lo} to {u.keys(hi)} (a power law of exponent ≈ 0)"
                     if ms["power_law_alpha"] < 0.05 else
                     f"follow a power law, P(k) ∝ k^−{ms['power_law_alpha']:.2f} for {lo} to {u.keys(hi)}")
            out.append(f"Multi-key sizes {shape}; the model's CDF is within {u.share(ks)} of the data's. "
                       + (size_model_reason(ms) or ""))
    elif model == "lognormal" and ms.get("lognormal_mu") is not None:
        ks = ms.get("lognormal_ks")
        if ks is not None and ks > POOR_FIT_KS:
            out.append(_no_model(ms))
        else:
            out.append(f"Multi-key sizes follow a lognormal: ln(size) has mean μ = {ms['lognormal_mu']:.2f} and "
                       f"spread σ = {ms['lognormal_sigma']:.2f}; the model's CDF is within {u.share(ks)} of the "
                       "data's. " + (size_model_reason(ms) or ""))
    return [s.strip() for s in out]


def _no_model(ms: dict[str, Any]) -> str:
    gaps = [ks for ks in (ms.get("lognormal_ks"), ms.get("power_law_ks")) if ks is not None]
    return (f"Neither a lognormal nor a power law describes the multi-key sizes (their CDFs miss the data's by "
            f"{u.share(min(gaps))} or more): the sizes cluster on a few values, as the figure shows.")


def _popularity(doc: dict[str, Any]) -> list[str]:
    kp = doc["key_popularity"]
    n = kp.get("distinct_keys")
    if not n:
        return []
    if n == 1:
        return [f"Every access goes to the same key ({u.count(kp['accesses'])} accesses)."]
    same = uniform_popularity(doc)
    if same is not None:
        times = "once" if same == 1 else f"{u.count(same)} times"
        return [f"Every one of the {u.count(n)} keys is accessed exactly {times}: no key is more popular than "
                "another, so there is no Zipf skew to measure."]
    if kp.get("zipf_alpha_mle") is None:
        return []
    rng = kp.get("zipf_fit_range") or {}
    fitted = rng.get("rank_max")
    over = (f"the {u.count(fitted)} of {u.count(n)} keys accessed at least 5 times" if fitted is not None
            and fitted < n else f"all {u.count(n)} keys")
    flat = " — close to 0: keys are about equally popular" if kp["zipf_alpha_mle"] < 0.2 else ""
    return [f"Key popularity follows Zipf α ≈ {kp['zipf_alpha_mle']:.2f} (maximum likelihood; "
            f"{kp['zipf_alpha_ols']:.2f} by least squares on the rank-frequency line), fitted over {over}{flat}; "
            f"{u.share(kp['one_hit_wonder_share'])} of keys are accessed only once."]


def _drift(doc: dict[str, Any]) -> list[str]:
    d = doc["key_popularity"].get("hot_set_drift") or {}
    if d.get("jaccard_consecutive_mean") is None:
        return []
    return [f"The {d['top_n']} most accessed keys of one {u.duration(d['window_s'])} window and of the next share "
            f"{u.share(d['jaccard_consecutive_mean'])} of their keys on average (Jaccard), "
            f"{u.share(d['jaccard_consecutive_min'])} at the least."]


def _values(doc: dict[str, Any]) -> list[str]:
    vs = doc["value_size"]
    if not doc["dataset"].get("has_value_size"):
        return ["The trace records no value sizes, so nothing is said about large values."]
    one = one_value_size(doc)
    if one is not None:
        return [f"Every value is {u.bytes_(one)}: no value is larger than another, so there is no large-value "
                "threshold (THR_L) to separate."]
    out = [f"Values are {u.bytes_(vs['p50'])} at the median access, {u.bytes_(vs['p99'])} at the 99th percentile "
           f"and at most {u.bytes_(vs['max'])}."]
    cands = [c for c in vs.get("thr_l_candidates") or [] if c["key_share"] > 0]
    if cands:
        c = cands[0]
        out.append(f"Values above {u.bytes_(c['bytes'])} ({THR_L_RULES.get(c['rule'], c['rule'])}) are "
                   f"{u.share(c['key_share'])} of keys but carry {u.share(c['bytes_share'])} of the bytes read "
                   f"({u.share(c['access_share'])} of accesses).")
    else:
        out.append(f"At least a tenth of the keys have the largest size ({u.bytes_(vs['max'])}): no small set of "
                   "large values stands out.")
    return out


def _arrivals(doc: dict[str, Any]) -> list[str]:
    ar = doc["arrivals"]
    if ar.get("rate_mean") is None:
        if (doc["dataset"].get("requests") or 0) > 1:
            return ["Every request has the same timestamp: the trace carries no timing, so arrival rates and "
                    "bursts are unknown."]
        return []
    out = (f"Requests arrive at {u.rate(ar['rate_mean'])} on average over {u.duration(ar['duration_s'])}; the "
           f"busiest {u.duration(ar['window_s'])} window runs at {u.ratio(ar['peak_to_mean'])} the mean")
    cv = (ar.get("interarrival") or {}).get("cv")
    if cv is not None:
        out += f"; gaps between arrivals vary with a coefficient of variation of {cv:.2f} (1 for Poisson arrivals)"
    return [out + "."]


def _fanout(doc: dict[str, Any]) -> list[str]:
    fo = doc["fanout"]
    if fo.get("servers") == 1:
        return ["With one server, every request is served by that server: there is no fan-out."]
    if fo.get("opsets_mean") is None:
        return []
    sample = (f" (counted on a sample of {u.count(fo['requests_counted'])} requests)"
              if (fo.get("requests_fraction") or 1.0) < 1.0 else "")
    if fo.get("opsets_max") == 1:
        return [f"On {u.count(fo['servers'])} servers with replication {fo['replication']}, every request is served "
                f"by one server{sample}."]
    hot = fo.get("hottest_partition_ratio")
    tail = f"; the busiest server carries {u.ratio(hot)} the mean load" if hot is not None else ""
    return [f"On {u.count(fo['servers'])} servers with replication {fo['replication']}, a request touches "
            f"{fo['opsets_mean']:.2f} servers on average and {u.number(fo['opsets_p99'])} at the 99th "
            f"percentile{sample}{tail}."]


def _slack(doc: dict[str, Any]) -> list[str]:
    sb = doc.get("slack_bounds") or []
    if not sb:
        return []
    if all(r["upper_ms"] == 0 for r in sb):
        return ["In the simulated FIFO replay no op finishes before the last op of its request, so no op has "
                "slack to give away and reordering ops cannot help this workload."]
    if len(sb) < 2:
        return []
    lo, hi = sb[0], sb[-1]
    return [f"Slack in a simulated FIFO replay: reordering ops could cut the average op's latency by "
            f"{hi['lower_ms']:.3g} to {hi['upper_ms']:.3g} ms at {u.share(hi['utilization'])} utilization, and "
            f"{lo['lower_ms']:.3g} to {lo['upper_ms']:.3g} ms at {u.share(lo['utilization'])}."]


def _latency(doc: dict[str, Any]) -> list[str]:
    r = (doc.get("latency") or {}).get("size_latency_pearson")
    if r is None:
        return []
    if abs(r) < 0.1:
        return [f"Multiget size and latency are nearly uncorrelated (Pearson r = {r:.2f})."]
    return [f"Larger multigets {'take longer' if r > 0 else 'finish sooner'}: size and latency correlate with "
            f"Pearson r = {r:.2f}."]


_PARTS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _sizes, _popularity, _drift, _values, _arrivals, _fanout, _slack, _latency,
)


def findings(doc: dict[str, Any]) -> list[str]:
    """The plain sentences for a summary.json document, in reading order."""
    return [s for part in _PARTS for s in part(doc)]
