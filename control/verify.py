"""Verify after publish: does the real system now do what it did before, and what the model expected?

A published version is judged on what its clients report (`control.observations`: latency histograms per
config version) and, for stock Cassandra, on the coordinator read latency of the deployment's tables
(`system_views.coordinator_read_latency`, read by the publisher before it changed anything and again by the
verify job). The outcome is the version's `verification` (its row in the config history):

* `pending` — too little data (fewer than `verify_min_requests` requests of this version, or of the version
  before it): checked again after `verify_recheck_s` (a `verify` job, up to `verify_max_checks` times) and by
  the next nightly job;
* `rolled_back` — worse than the version before it: the one-sided test says so (below); a new version with the
  earlier config is added (`control.configs.rollback`) and published, the reason recorded on both;
* `verified` — not worse, and its p99 within the expected band (or no expectation stored: a manual version);
* `unexpected` — not worse, but its p99 outside the expected band (the model is off; nothing is rolled back);
* `no_reference` — nothing to compare with: no earlier version's figures and no expectation;
* `superseded` — a newer version was added before a verdict (only the latest version is ever rolled back);
* `unchecked` — an expectation is stored (a tuning version) but no check ran yet.

**The test (clients' reports).** One-sided, on the p99 — the figure the tuner optimised and states its expectation
in: H0 "p99 after <= p99 before × (1 + verify_min_regression_pct/100)". A percentile bootstrap of the ratio of the
two p99s: each version's merged histogram is resampled (multinomial on its bucket counts, which is a histogram's
sampling distribution for the same number of requests), the nearest-rank p99 of each resample taken, and
p = (1 + #{ratio <= 1 + margin}) / (1 + resamples). Rolled back when p < `verify_alpha`. When each side has at least
`MIN_WINDOWS` report windows the resampling is over whole windows instead (a cluster bootstrap: each resample draws
as many windows as there are, with replacement, and merges them): the requests of one window share its moment's
load, so the windows' own spread belongs in the interval — resampling requests as if independent rolled back 27 %
of A/A pairs of non-concurrent windows on this project's shared machine (docs/operations.md § Verify).
Why not Mann-Whitney: it tests a shift of the whole distribution, and the configs tailtune tunes trade the median
against the tail (split/merge, speculative retry), so a worse p99 under a better median would pass it. The
resampling is seeded, so the same reports always give the same verdict; the histograms' buckets are ~12% wide, so a
regression smaller than one bucket is not resolvable. Reports of the earlier version from the windows that overlap
the checked version's (a canary's concurrent requests) are preferred when there are enough of them.

**The expected band.** The recommendation's expected p99 E with its 95% half-width h (`expected.ci.p99`) and, for a
sampled tune, its calibration bound s% (`sampling.error_bound.p99_pct`) and, for a deployment whose service time
was calibrated, the p99 replayed at each end of that calibration's interval [C_lo, C_hi] (`expected.calibration`;
tuner/error_bound.py), widened by the model's error m% = `verify_model_error_pct` (validation/: the sharded-pool
p99 resolvable to ~2× on real memcached, hence 100):
[min(E − h, C_lo) / (1 + (m + s)/100), max(E + h, C_hi) × (1 + (m + s)/100)].

**Server side (stock Cassandra).** The coordinator's p99 comes from a decaying reservoir as one figure (per node
and table, 1 ms resolution, see `kinds/cassandra/publisher.py` for its unit), so no sampling distribution exists and no
significance level applies. The figures are recorded beside the clients' for every check; when no client reports
the version they decide alone, by a stated threshold: pending below `verify_min_requests` reads since the
publish; worse when the worst p99 after exceeds max(p99 before, 1 ms) × (1 + verify_min_regression_pct/100) and
by at least 2 ms (twice the resolution). They are per read of one partition, not per request, so they are not
compared with the expected (per multiget request) figures: the verdict is `verified` when not worse.

**Canary.** A version whose config has `canary_fraction` < 1 runs on that fraction of the clients' requests
while the version before it keeps the rest; when it is judged not worse (`verified` or `unexpected`) a new
version with the same config and no `canary_fraction` is added and published (source `promotion`), so every
request runs it; when worse it is rolled back like any version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from tailtune_client.histogram import BUCKETS, LogHistogram, bucket_mid_us

from base.settings import Settings
from control.common import now
from control.configs import add_version, get_version, latest, rollback, same_config, schedule_publish
from control.configs_cache import latest_cache
from control.db import ConfigVersionRow, DeploymentRow, JobRow, ObservationRow
from control.errors import Missing
from control.observations import (
    BOOTSTRAP_VERSION,
    Reported,
    by_version,
    figures,
    merged,
    percentile_ms,
    readable,
    skipped_note,
)
from control.queue import enqueue, stop_job

__all__ = [
    "FINAL",
    "MEANINGS",
    "MIN_WINDOWS",
    "SERVER_TEST",
    "STATUSES",
    "TEST",
    "expectation",
    "expected_band",
    "horizon_s",
    "is_canary",
    "p99_ratio_test",
    "reference_comparison",
    "schedule_after_publish",
    "schedule_verify",
    "server_comparison",
    "verify_version",
]

#: The one vocabulary of a version's `verification.status`: the API's schema, the console and docs/operations.md
#: list these, in this order.
STATUSES = ("unchecked", "pending", "verified", "unexpected", "rolled_back", "no_reference", "superseded",
            "identical", "environment_changed")
#: What each status means, one line each (the console's badges show it; docs/operations.md has the full table).
MEANINGS: dict[str, str] = {
    "unchecked": "an expectation is stored, no check ran yet",
    "pending": "not judged yet: before the horizon (verify_after_windows report windows) or too few requests",
    "verified": "not worse than the version before it, and within the expected band (or no expectation)",
    "unexpected": "not worse, but outside the expected band: the model is off; nothing rolled back",
    "rolled_back": "worse than the version before it: the earlier config was added again and published",
    "no_reference": "nothing to compare with: no earlier version reported and no expectation",
    "superseded": "a newer version was published before a verdict",
    "identical": "the same config as the version it is compared with (canonical form): nothing to judge",
    "environment_changed": "looked worse, but the environment's reference slowed as much: not judged, kept",
}
assert tuple(MEANINGS) == STATUSES
#: Statuses a check does not revisit unless asked to (`force`: the API's on-demand verify).
FINAL = ("verified", "unexpected", "rolled_back", "no_reference", "superseded", "identical", "environment_changed")
TEST = "bootstrap-p99-ratio"
#: The fewest report windows on each side for the test to resample whole windows (fewer: requests).
MIN_WINDOWS = 3
SERVER_TEST = "server-p99-threshold"
#: The seed of the bootstrap: the same reports always give the same verdict.
SEED = 0
#: The resolution of `system_views.coordinator_read_latency` (it rounds seconds to 3 decimals).
SERVER_RESOLUTION_MS = 1.0
#: How many earlier checks a version's verification keeps (`log`).
LOG_MAX = 20


# --- expectation ----------------------------------------------------------------------------------------------
def expectation(rec: Mapping[str, Any], *, job_id: int | None = None) -> dict[str, Any] | None:
    """What a recommendation (its `tune --json` form) expects of its config, as stored with the version:
    p50/p95/p99/mean (ms), the p99's 95% half-width and how it was estimated, the sampling calibration's p99
    bound (a sampled tune), and where it came from. None when it states no p99."""
    exp = rec.get("expected")
    if not isinstance(exp, Mapping) or not _number(exp.get("p99_ms")):
        return None
    ci = _mapping(exp.get("ci"))
    bound = _mapping(_mapping(rec.get("sampling")).get("error_bound"))
    out: dict[str, Any] = {k: float(exp[k]) for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms") if _number(exp.get(k))}
    out["p99_ci_ms"] = float(ci["p99"]) if _number(ci.get("p99")) else None
    out["ci_method"] = exp.get("ci_method")
    out["sampling_error_pct"] = float(bound["p99_pct"]) if _number(bound.get("p99_pct")) else None
    cal = _mapping(exp.get("calibration")).get("p99_ms")
    out["calibration_p99_ms"] = ([float(min(cal)), float(max(cal))]
                                 if isinstance(cal, list) and len(cal) == 2 and all(_number(x) for x in cal) else None)
    out["source"] = f"recommendation of job {job_id}" if job_id is not None else "recommendation"
    return out


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def expected_band(expected: Mapping[str, Any], model_error_pct: float) -> tuple[float, float]:
    """[low, high] ms of the observed p99 that counts as expected (see the module doc)."""
    e = float(expected["p99_ms"])
    h = float(expected.get("p99_ci_ms") or 0.0)
    widen = 1.0 + (model_error_pct + float(expected.get("sampling_error_pct") or 0.0)) / 100.0
    cal = expected.get("calibration_p99_ms") or [e, e]
    return max(0.0, min(e - h, float(cal[0]))) / widen, max(e + h, float(cal[1])) * widen


# --- the test -------------------------------------------------------------------------------------------------
def _centers_us() -> Any:
    import numpy as np

    return np.array([bucket_mid_us(b) for b in range(BUCKETS)])


#: The most requests one bootstrap resample draws: beyond it the resampled p99 moves by far less than a bucket.
RESAMPLE_MAX = 2**31


def _resampled_quantiles(counts: Sequence[int], q: float, resamples: int, rng: Any) -> Any:
    import numpy as np

    weights = np.array(counts, dtype=np.float64)
    n = min(int(sum(counts)), RESAMPLE_MAX)
    draws = rng.multinomial(n, weights / weights.sum(), size=resamples)
    rank = max(1, math.ceil(q * n))
    idx = np.argmax(np.cumsum(draws, axis=1) >= rank, axis=1)
    return _centers_us()[idx]


def _resampled_window_quantiles(windows: Sequence[Sequence[int]], q: float, resamples: int, rng: Any) -> Any:
    """The q-quantile (bucket centre, µs) of `resamples` cluster-bootstrap resamples: each draws as many report
    windows as there are, with replacement, and merges their counts."""
    import numpy as np

    counts = np.array([list(w) for w in windows], dtype=np.int64)
    picks = rng.integers(0, len(counts), size=(resamples, len(counts)))
    merged_counts = counts[picks].sum(axis=1)
    totals = merged_counts.sum(axis=1)
    rank = np.maximum(1, np.ceil(q * totals)).astype(np.int64)
    idx = np.argmax(np.cumsum(merged_counts, axis=1) >= rank[:, None], axis=1)
    return _centers_us()[idx]


def p99_ratio_test(
    before: LogHistogram,
    after: LogHistogram,
    *,
    alpha: float,
    margin_pct: float,
    resamples: int,
    seed: int = SEED,
    before_windows: Sequence[LogHistogram] = (),
    after_windows: Sequence[LogHistogram] = (),
) -> dict[str, Any]:
    """The one-sided bootstrap test of "p99 after > p99 before × (1 + margin)" on two merged histograms
    (`observations.merge_histograms`); `worse` is its verdict at `alpha` (see the module doc). Given each side's
    report windows (`before_windows`, `after_windows`: at least `MIN_WINDOWS` each, every one non-empty), the
    resampling is over whole windows (`method` "windows"), so the windows' own spread — a host's load from one
    window to the next — is in the interval; otherwise over requests (`method` "requests")."""
    import numpy as np

    rng = np.random.default_rng(seed)
    b_win = [w.counts for w in before_windows if w.n > 0]
    a_win = [w.counts for w in after_windows if w.n > 0]
    by_windows = len(b_win) >= MIN_WINDOWS and len(a_win) >= MIN_WINDOWS
    if by_windows:
        ratios = (_resampled_window_quantiles(a_win, 0.99, resamples, rng)
                  / _resampled_window_quantiles(b_win, 0.99, resamples, rng))
    else:
        ratios = (_resampled_quantiles(after.counts, 0.99, resamples, rng)
                  / _resampled_quantiles(before.counts, 0.99, resamples, rng))
    threshold = 1.0 + margin_pct / 100.0
    p = (1 + int(np.count_nonzero(ratios <= threshold))) / (resamples + 1)
    p_before, p_after = percentile_ms(before, 0.99), percentile_ms(after, 0.99)
    return {
        "name": TEST,
        "null_hypothesis": f"p99 after <= p99 before x {threshold:g}",
        "alpha": alpha,
        "margin_pct": margin_pct,
        "resamples": resamples,
        "seed": seed,
        "ratio": (p_after / p_before) if p_after is not None and p_before else None,
        "lower_bound": float(np.quantile(ratios, alpha)),
        "upper_bound": float(np.quantile(ratios, 1.0 - alpha)),
        "p_value": p,
        "worse": p < alpha,
        "method": "windows" if by_windows else "requests",
        "windows": [len(b_win), len(a_win)],
    }


# --- server side ----------------------------------------------------------------------------------------------
def _ms(raw: Any) -> float | None:
    return float(raw) * 1000.0 if _number(raw) else None


def _p99(figs: Mapping[str, Any]) -> Any:
    return figs.get("p99th_ms", figs.get("99th_ms"))


def server_comparison(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, *, margin_pct: float
) -> dict[str, Any] | None:
    """The coordinator read latency before the publish and now (raw snapshots of
    `kinds.cassandra.publisher.read_coordinator_latency`): reads since the publish, and the worst p99 (ms) over the
    nodes and tables before and after, with the threshold rule's verdict (`worse`). None without both snapshots."""
    if not before or not after or not before.get("nodes") or not after.get("nodes"):
        return None
    reads = 0
    p99_before: float | None = None
    p99_after: float | None = None
    pairs: dict[str, Any] = {}
    for node, tables in after["nodes"].items():
        for table, now_figs in tables.items():
            then = ((before["nodes"].get(node) or {}).get(table)) or {}
            count_now, count_then = int(now_figs.get("count") or 0), int(then.get("count") or 0)
            delta = count_now - count_then if count_now >= count_then else count_now  # a restart resets it
            reads += delta
            b, a = _ms(_p99(then)), _ms(_p99(now_figs))
            pairs[f"{node} {table}"] = {"reads": delta, "p99_before_ms": b, "p99_after_ms": a}
            if b is not None:
                p99_before = b if p99_before is None else max(p99_before, b)
            if a is not None and delta > 0:
                p99_after = a if p99_after is None else max(p99_after, a)
    worse = (
        p99_before is not None and p99_after is not None
        and p99_after > max(p99_before, SERVER_RESOLUTION_MS) * (1.0 + margin_pct / 100.0)
        and p99_after - p99_before >= 2 * SERVER_RESOLUTION_MS
    )
    return {
        "name": SERVER_TEST,
        "rule": f"worst p99 after > max(p99 before, {SERVER_RESOLUTION_MS:g} ms) x {1 + margin_pct / 100:g} "
        f"and by at least {2 * SERVER_RESOLUTION_MS:g} ms",
        "source": after.get("source"),
        "unit": after.get("unit"),
        "note": after.get("note"),
        "reads_since_publish": reads,
        "p99_before_ms": p99_before,
        "p99_after_ms": p99_after,
        "per_node_table": pairs,
        "worse": bool(worse),
        "before": dict(before),
        "after": dict(after),
    }


# --- the environment's reference ------------------------------------------------------------------------------
REFERENCE_TEST = "reference-explains"


def _reference_hist(ref: Mapping[str, Any] | None) -> LogHistogram | None:
    if not isinstance(ref, Mapping) or "histogram" not in ref:
        return None
    try:
        hist = LogHistogram.from_json(ref["histogram"])
    except (ValueError, TypeError):
        return None
    return hist if hist.n > 0 else None


def reference_comparison(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, ratio: float | None, settings: Settings
) -> dict[str, Any]:
    """Whether the environment's reference (`DeploymentKind.reference_figures`: a trivial request's round trips,
    measured by the publisher at publish time and by the verify job now) explains an apparent regression of
    `ratio` (p99 after / p99 before) between windows that are not concurrent. The rule: the reference is itself
    worse (the same one-sided bootstrap test, `verify_alpha`, `verify_min_regression_pct`) and `ratio` is at most
    the upper end of the reference's own ratio interval (its 1 − alpha bootstrap quantile) × (1 + margin):
    `explains`. Without a reference in both windows: `explains` None and a note saying so."""
    b, a = _reference_hist(before), _reference_hist(after)
    out: dict[str, Any] = {"name": REFERENCE_TEST, "request": (after or before or {}).get("request"),
                           "before": dict(before) if before else None, "after": dict(after) if after else None}
    if b is None or a is None:
        missing = [w for w, h, raw in (("at the publish", b, before), ("now", a, after)) if h is None]
        why = "; ".join(f"{w}: {raw['error']}" for w, _, raw in (("at the publish", b, before), ("now", a, after))
                        if isinstance(raw, Mapping) and raw.get("error"))
        out["explains"] = None
        out["note"] = (f"no measured reference {' and '.join(missing)}" + (f" ({why})" if why else "")
                       + ": the environment's share of the change is not known")
        return out
    test = p99_ratio_test(b, a, alpha=settings.verify_alpha, margin_pct=settings.verify_min_regression_pct,
                          resamples=settings.verify_bootstrap_resamples)
    cover = test["upper_bound"] * (1.0 + settings.verify_min_regression_pct / 100.0)
    out.update({"test": test, "covers_ratio": cover,
                "rule": "reference worse (p < alpha) and ratio <= its upper bound x (1 + margin)",
                "explains": bool(test["worse"] and ratio is not None and ratio <= cover)})
    return out


def _environment(
    verdict: dict[str, Any], row: ConfigVersionRow, kind: str, reference: Mapping[str, Any] | None,
    ratio: float | None, settings: Settings, worse_reason: str,
) -> dict[str, Any] | None:
    """Windows that are not concurrent and a regression: the reference decides whether it is the environment's
    (an `environment_changed` verdict, returned) or stands (None; the comparison and its note are recorded)."""
    before = ((row.published or {}).get(kind) or {}).get("reference")
    cmp = reference_comparison(before, reference, ratio, settings)
    verdict["environment"] = cmp
    if cmp["explains"]:
        rt = cmp["test"]
        return {**verdict, "status": "environment_changed", "reason": (
            f"{worse_reason}; but the environment changed as much: the reference ({cmp['request']}) p99 "
            f"{rt['ratio']:.2f}x its value at the publish (p = {rt['p_value']:.3g}), which covers x{ratio:.2f} "
            f"(up to x{cmp['covers_ratio']:.2f}): not judged, nothing rolled back")}
    return None


# --- the check ------------------------------------------------------------------------------------------------
def is_canary(config: Mapping[str, Any]) -> bool:
    f = config.get("canary_fraction")
    return isinstance(f, int | float) and not isinstance(f, bool) and 0 < f < 1


def _observations(s: Session, deployment_id: int) -> tuple[dict[int, list[Reported]], int]:
    """The readable reports per version, and how many stored rows were skipped (unreadable)."""
    rows = s.scalars(select(ObservationRow).where(ObservationRow.deployment_id == deployment_id)).all()
    reported, skipped = readable(rows)
    return by_version(reported), skipped


def _client_figures(rows: Sequence[Reported], version: int) -> dict[str, Any]:
    out = {"version": version, **figures(merged(rows))}
    out["failed_requests"] = sum(r.obs.failed_requests for r in rows)
    out["clients"] = len({r.client_id for r in rows})
    if version == BOOTSTRAP_VERSION:
        out["bootstrap"] = True  # the clients' own config, before tailtune published one
    return out


def _concurrent(ref: Sequence[Reported], rows: Sequence[Reported]) -> list[Reported]:
    start, end = min(r.window_start for r in rows), max(r.window_end for r in rows)
    return [r for r in ref if r.window_end > start and r.window_start < end]


def _status_of(row: ConfigVersionRow) -> str | None:
    v = row.verification or {}
    status = v.get("status")
    return str(status) if status is not None else None


def _reference(
    s: Session, deployment_id: int, version: int, obs: Mapping[int, Sequence[Reported]]
) -> int | None:
    """The newest earlier version the clients reported, not itself rolled back: what the system did before
    (version 0: the clients' bootstrap config, when they reported nothing else before)."""
    known = set(
        s.scalars(
            select(ConfigVersionRow.version).where(
                ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version < version
            )
        ).all()
    )
    for v in sorted((v for v in obs if v in known), reverse=True):
        row = get_version(s, deployment_id, v)
        if _status_of(row) != "rolled_back" and merged(obs[v]).n > 0:
            return v
    if version > BOOTSTRAP_VERSION and merged(obs.get(BOOTSTRAP_VERSION, [])).n > 0:
        return BOOTSTRAP_VERSION
    return None


def _previous_published(s: Session, dep: DeploymentRow, version: int) -> int | None:
    rows = s.scalars(
        select(ConfigVersionRow)
        .where(ConfigVersionRow.deployment_id == dep.id, ConfigVersionRow.version < version)
        .order_by(ConfigVersionRow.version.desc())
    ).all()
    return next((r.version for r in rows if dep.kind in (r.published or {}) and _status_of(r) != "rolled_back"), None)


def _identical(s: Session, dep: DeploymentRow, row: ConfigVersionRow, ref: int, out: dict[str, Any]
               ) -> dict[str, Any] | None:
    """An `identical` verdict when `row`'s config equals version `ref`'s in canonical form (nothing to judge)."""
    if ref == BOOTSTRAP_VERSION:
        return None
    other = get_version(s, dep.id, ref)
    if not same_config(dict(other.config), dict(row.config), dep):
        return None
    return {**out, "status": "identical", "reference_version": ref, "reason": (
        f"version {row.version}'s config is identical to version {ref}'s (compared in canonical form): "
        "nothing to judge, nothing rolled back")}


def _per_window(rows: Sequence[Reported]) -> list[LogHistogram]:
    """The reported rows merged per report window (every client's rows of one window start together), in time
    order: the units the test resamples."""
    per: dict[float, list[Reported]] = {}
    for r in rows:
        per.setdefault(float(r.window_start), []).append(r)
    return [merged(per[k]) for k in sorted(per)]


def _windows(rows: Sequence[Reported]) -> int:
    """The most report windows one client sent of a version."""
    per: dict[str, set[float]] = {}
    for r in rows:
        per.setdefault(r.client_id, set()).add(r.window_start)
    return max((len(w) for w in per.values()), default=0)


def _judge(
    s: Session, settings: Settings, dep: DeploymentRow, row: ConfigVersionRow, server: Mapping[str, Any] | None,
    reference: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The verdict on `row` from the data there is now (no writes)."""
    need = settings.verify_min_requests
    stored = (row.verification or {}).get("expected")
    expected: dict[str, Any] | None = dict(stored) if isinstance(stored, Mapping) else None
    out: dict[str, Any] = {"test": None, "reference_version": None, "before": None, "after": None,
                           "expected": expected, "server": None}
    published = (row.published or {}).get(dep.kind) or {}
    if server is not None:
        if server.get("error"):
            out["server"] = {"error": server["error"]}
        elif server.get("nodes"):
            out["server"] = server_comparison(
                published.get("latency"), server, margin_pct=settings.verify_min_regression_pct
            ) or {"before": published.get("latency"), "after": dict(server),
                  "note": "no coordinator latency was read before the publish: nothing to compare with"}
    obs, skipped = _observations(s, dep.id)
    if skipped:
        out["skipped"], out["note"] = skipped, skipped_note(skipped)
    mine = obs.get(row.version, [])
    after = _client_figures(mine, row.version) if mine else None
    if after is not None and after["requests"] > 0:
        return _judge_clients(s, settings, dep, row, obs, after, out, reference)
    srv = out["server"]
    if srv and "worse" in srv:
        out["before"] = {"source": srv["source"], "p99_ms": srv["p99_before_ms"]}
        out["after"] = {"source": srv["source"], "p99_ms": srv["p99_after_ms"],
                        "reads_since_publish": srv["reads_since_publish"]}
        out["test"] = {k: srv[k] for k in ("name", "rule", "worse")}
        if expected is not None:
            expected["compared"] = "no: the server's figures are per read of one partition, the expectation per request"
        if srv["reads_since_publish"] < need:
            return {**out, "status": "pending", "reason": f"{srv['reads_since_publish']} coordinator reads since the "
                    f"publish; at least {need} needed (verify_min_requests), and no client has reported the version"}
        prev = _previous_published(s, dep, row.version)
        same = _identical(s, dep, row, prev, out) if prev is not None else None
        if same is not None:
            return same
        if srv["worse"]:
            ref = prev
            reason = (f"coordinator p99 {srv['p99_after_ms']:.0f} ms after the publish vs {srv['p99_before_ms']:.0f} "
                      f"ms before ({srv['rule']})")
            ratio = srv["p99_after_ms"] / max(srv["p99_before_ms"], SERVER_RESOLUTION_MS)
            env = _environment(out, row, dep.kind, reference, ratio, settings, reason)
            if env is not None:
                return env
            if out["environment"]["explains"] is None:
                reason += f"; {out['environment']['note']}"
            if ref is None:
                return {**out, "status": "unexpected", "reason": reason + "; no earlier version to roll back to"}
            return {**out, "status": "rolled_back", "reference_version": ref, "reason": reason}
        return {**out, "status": "verified", "reason": f"coordinator p99 {srv['p99_after_ms']:.0f} ms after the "
                f"publish vs {srv['p99_before_ms']:.0f} ms before: not worse ({srv['rule']} does not hold)"}
    why = f"no client has reported version {row.version}"
    if srv and srv.get("error"):
        why += f", and the server's figures could not be read ({srv['error']})"
    elif srv:
        why += ", and there is no coordinator latency from before its publish to compare with"
    return {**out, "status": "pending", "reason": why}


def _judge_clients(
    s: Session, settings: Settings, dep: DeploymentRow, row: ConfigVersionRow,
    obs: Mapping[int, Sequence[Reported]], after: dict[str, Any], out: dict[str, Any],
    reference: Mapping[str, Any] | None,
) -> dict[str, Any]:
    need = settings.verify_min_requests
    out["after"] = after
    ref = _reference(s, dep.id, row.version, obs)
    if ref is not None and (same := _identical(s, dep, row, ref, out)) is not None:
        return same
    mine = obs[row.version]
    windows, horizon = _windows(mine), settings.verify_after_windows
    after["windows_reported"] = windows
    if windows < horizon:
        return {**out, "status": "pending", "reason": f"{windows} report window(s) of version {row.version} in; "
                f"it is judged once, when {horizon} are (verify_after_windows)"}
    if after["requests"] < need:
        return {**out, "status": "pending", "reason": f"{after['requests']} requests of version {row.version} "
                f"reported; at least {need} needed (verify_min_requests)"}
    worse_reason = None
    if ref is not None:
        ref_rows = list(obs[ref])
        concurrent = _concurrent(ref_rows, mine)
        use = concurrent if concurrent and merged(concurrent).n >= need else ref_rows
        before = _client_figures(use, ref)
        before["windows"] = "concurrent" if use is concurrent else "all"
        out["before"], out["reference_version"] = before, ref
        if before["requests"] < need:
            return {**out, "status": "pending", "reason": f"{before['requests']} requests of the version before "
                    f"(version {ref}) reported; at least {need} needed (verify_min_requests)"}
        test = p99_ratio_test(merged(use), merged(mine), alpha=settings.verify_alpha,
                              margin_pct=settings.verify_min_regression_pct,
                              resamples=settings.verify_bootstrap_resamples,
                              before_windows=_per_window(use), after_windows=_per_window(mine))
        out["test"] = test
        if test["worse"]:
            worse_reason = (
                f"worse than {_name(ref)}: p99 {after['p99_ms']:.3f} ms vs {before['p99_ms']:.3f} ms "
                f"(x{test['ratio']:.2f}; one-sided bootstrap p = {test['p_value']:.3g} < alpha {test['alpha']:g} "
                f"against 'at most x{1 + test['margin_pct'] / 100:g}')"
            )
            if use is not concurrent:  # not the same time: the environment may have changed in between
                env = _environment(out, row, dep.kind, reference, test["ratio"], settings, worse_reason)
                if env is not None:
                    return env
                if out["environment"]["explains"] is None:
                    worse_reason += f"; {out['environment']['note']}"
                else:
                    worse_reason += "; the reference does not explain it"
            if ref == BOOTSTRAP_VERSION:  # the clients' own config: tailtune never published it
                return {**out, "status": "unexpected", "reason": worse_reason + "; no published version before "
                        "it to roll back to"}
            return {**out, "status": "rolled_back", "reason": worse_reason}
    not_worse = (
        f"not worse than {_name(ref)} (p99 {after['p99_ms']:.3f} ms vs {out['before']['p99_ms']:.3f} ms, "
        f"p = {out['test']['p_value']:.3g})" if ref is not None else "no earlier version reported to compare with"
    )
    expected = out["expected"]
    if expected is None or not _number(expected.get("p99_ms")):
        if ref is None:
            return {**out, "status": "no_reference", "reason": not_worse + ", and no expectation is stored"}
        return {**out, "status": "verified", "reason": not_worse + "; no expectation stored (judged on the "
                "comparison alone)"}
    lo, hi = expected_band(expected, settings.verify_model_error_pct)
    within = lo <= float(after["p99_ms"]) <= hi
    expected.update({"band_ms": [lo, hi], "model_error_pct": settings.verify_model_error_pct, "within": within})
    where = (f"p99 {after['p99_ms']:.3f} ms {'within' if within else 'outside'} the expected "
             f"{expected['p99_ms']:.3f} ms band [{lo:.3f}, {hi:.3f}]")
    return {**out, "status": "verified" if within else "unexpected", "reason": f"{not_worse}; {where}"}


def _name(version: int) -> str:
    if version == BOOTSTRAP_VERSION:
        return f"version {version} (the clients' bootstrap config, before tailtune)"
    return f"version {version}"


def horizon_s(settings: Settings) -> float:
    """Seconds from a publish to its version's check: `verify_after_windows` report windows of `verify_window_s`."""
    return settings.verify_after_windows * settings.verify_window_s


def _enqueue_check(s: Session, settings: Settings, deployment_id: int, version: int, n: int,
                   delay_s: float | None = None) -> int | None:
    """A verify job for `version` due after `delay_s` (default verify_recheck_s; one per version and check
    number: the first, number 0, is the publish's, due at the horizon)."""
    delay = settings.verify_recheck_s if delay_s is None else delay_s
    try:
        with s.begin_nested():
            job = enqueue(s, settings, "verify", {"version": version}, deployment_id=deployment_id,
                          dedupe_key=f"verify:{deployment_id}:{version}:{n}", run_after=now() + delay)
    except IntegrityError:
        return None
    return job.id


def _drop_stale_checks(s: Session, deployment_id: int, version: int) -> list[int]:
    """Cancel the queued scheduled checks (not the on-demand ones) of versions older than `version`: only the
    latest version is ever judged, so they would only find it superseded. Their versions still waiting for a
    verdict are recorded `superseded` now. Returns the cancelled jobs' ids."""
    rows = s.scalars(select(JobRow).where(JobRow.deployment_id == deployment_id, JobRow.kind == "verify",
                                          JobRow.status == "queued")).all()
    dropped: list[int] = []
    for job in rows:
        v = (job.payload or {}).get("version")
        if not isinstance(v, int) or isinstance(v, bool) or v >= version or (job.payload or {}).get("force"):
            continue
        stop_job(s, job.id, reason=f"superseded: version {version} was published before this check of version "
                 f"{v} ran")
        dropped.append(job.id)
        try:
            old = get_version(s, deployment_id, v)
        except Missing:
            continue
        if _status_of(old) not in FINAL:
            _record(old, {"status": "superseded", "reason": f"version {version} was published before a verdict "
                          f"(its scheduled check, job {job.id}, was dropped)"}, None)
    return dropped


def schedule_after_publish(s: Session, settings: Settings, deployment_id: int, version: int) -> dict[str, Any]:
    """What every publish (manual, console, nightly, rollback, promotion) does once its version is on the target:
    its check is queued for the horizon (`horizon_s`: verify_after_windows report windows after now) and the
    queued checks of older versions are dropped. A republished older version (the target keeps the newest)
    schedules nothing. Returns `{"verify_job_id", "next_check_at", "dropped"}`."""
    newest = latest(s, deployment_id)
    if newest.version != version:
        return {"verify_job_id": None, "next_check_at": None, "dropped": []}
    dropped = _drop_stale_checks(s, deployment_id, version)
    job_id = _enqueue_check(s, settings, deployment_id, version, 0, horizon_s(settings))
    job = (s.get(JobRow, job_id) if job_id is not None  # else queued already (a rollback's, a promotion's)
           else s.scalar(select(JobRow).where(JobRow.dedupe_key == f"verify:{deployment_id}:{version}:0")))
    return {"verify_job_id": job.id if job is not None else None,
            "next_check_at": job.run_after if job is not None and job.status == "queued" else None,
            "dropped": dropped}


def _record(row: ConfigVersionRow, verdict: dict[str, Any], job_id: int | None) -> dict[str, Any]:
    old = dict(row.verification or {})
    log = list(old.get("log") or [])
    if old.get("status") not in (None, "unchecked"):
        log.append({k: old.get(k) for k in ("status", "reason", "at", "job_id")})
    new = {**verdict, "at": now(), "job_id": job_id, "checks": int(old.get("checks") or 0) + 1,
           "log": log[-LOG_MAX:]}
    if new.get("expected") is None and old.get("expected") is not None:
        new["expected"] = old["expected"]
    row.verification = new
    return new


def _follow_up(s: Session, settings: Settings, dep: DeploymentRow, row: ConfigVersionRow,
               verdict: dict[str, Any]) -> None:
    """What a verdict on the latest version does: roll back, promote a canary, schedule the next check."""
    status = verdict["status"]
    if status == "rolled_back":
        ref = int(verdict["reference_version"])
        back = rollback(s, settings, dep.id, ref, note=f"automatic rollback of version {row.version}: "
                        f"{verdict['reason']}")
        ref_expected = (get_version(s, dep.id, ref).verification or {}).get("expected")
        back.verification = {"status": "unchecked", "expected": ref_expected} if ref_expected else None
        verdict["rollback_version"] = back.version
        verdict["publish_job_id"] = schedule_publish(s, settings, dep.id, back.version).id
        verdict["recheck_job_id"] = _enqueue_check(s, settings, dep.id, back.version, 0, horizon_s(settings))
    elif status in ("verified", "unexpected") and is_canary(row.config):
        config = {k: v for k, v in row.config.items() if k != "canary_fraction"}
        promoted = add_version(s, dep.id, config, settings=settings, source="promotion",
                               note=f"promotion of canary version {row.version}: {verdict['reason']}")
        expected = verdict.get("expected")
        promoted.verification = {"status": "unchecked", "expected": expected} if expected else None
        verdict["promoted_version"] = promoted.version
        verdict["publish_job_id"] = schedule_publish(s, settings, dep.id, promoted.version).id
        verdict["recheck_job_id"] = _enqueue_check(s, settings, dep.id, promoted.version, 0, horizon_s(settings))
    elif status == "pending":
        checks = int((row.verification or {}).get("checks") or 0) + 1
        if checks < settings.verify_max_checks:
            verdict["recheck_job_id"] = _enqueue_check(s, settings, dep.id, row.version, checks)
        else:
            verdict["reason"] += (f"; {checks} checks made (verify_max_checks): the nightly job checks it again")
    recheck = verdict.get("recheck_job_id")
    job = s.get(JobRow, recheck) if isinstance(recheck, int) else None
    if job is not None:
        verdict["next_check_at"] = job.run_after


def verify_version(
    s: Session,
    settings: Settings,
    deployment_id: int,
    version: int | None = None,
    *,
    server: Mapping[str, Any] | None = None,
    reference: Mapping[str, Any] | None = None,
    job_id: int | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Check `version` (default: the latest) of a deployment and record the outcome on it (see the module doc);
    `server` is the coordinator latency the worker read just now (stock Cassandra; `{"error": ...}` when it could
    not), `reference` the environment's reference it measured just now (`DeploymentKind.reference_figures`). A
    version already judged is left alone unless `force`. Only the latest version is rolled back or promoted; an
    older one still waiting is `superseded`. The deployment's row is locked while this runs, so two checks of one
    deployment never both roll back. Returns what was recorded (plus `checked: False` when nothing was)."""
    dep = s.scalar(select(DeploymentRow).where(DeploymentRow.id == deployment_id).with_for_update())
    if dep is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    newest = latest(s, deployment_id)
    row = newest if version is None else get_version(s, deployment_id, version)
    status = _status_of(row)
    if status in FINAL and not force:
        return {"version": row.version, "status": status, "checked": False,
                "reason": f"version {row.version} is already {status}"}
    verdict = _judge(s, settings, dep, row, server, reference)
    if row.version != newest.version:
        if status in FINAL:
            return {"version": row.version, "status": status, "checked": False,
                    "reason": f"version {row.version} is not the latest ({newest.version}): its verdict stays"}
        verdict["reason"] = (f"version {newest.version} was added before a verdict ({verdict['status']}: "
                             f"{verdict['reason']})")
        verdict["status"] = "superseded"
    else:
        _follow_up(s, settings, dep, row, verdict)
    recorded = _record(row, verdict, job_id)
    s.flush()
    latest_cache.drop(deployment_id)
    return {"version": row.version, "checked": True, **recorded}


def schedule_verify(s: Session, settings: Settings, deployment_id: int, version: int | None) -> JobRow:
    """The API's on-demand check: a `verify` job (the worker connects to the deployment's hosts, never the API)
    of `version` (default: the latest), which judges it again even if it was judged before."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    v = latest(s, deployment_id).version if version is None else get_version(s, deployment_id, version).version
    return enqueue(s, settings, "verify", {"version": v, "force": True}, deployment_id=deployment_id)
