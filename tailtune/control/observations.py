"""Expected vs observed: the latency histograms a deployment's clients report (`tailtune_client`), stored per
client, report window and config version, merged per version and set beside the figures the tuner expected for
that version.

The histogram scheme is the client's (clients/python/README.md, "stats()"): log10 buckets, 20 per decade from
1 µs, sparse `[[bucket, count], ...]`; histograms of one scheme merge by adding counts; percentiles are
nearest-rank on the buckets (the ⌈q·n⌉-th value's bucket, its geometric middle, clamped to the observed
min/max) — the client's own estimator, so the service and the client report the same figure for the same data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tailtune.control.common import now
from tailtune.control.db import ConfigVersionRow, DeploymentRow, JobRow, ObservationRow
from tailtune.control.errors import Invalid, Missing

__all__ = ["SCHEMA", "figures", "merge_histograms", "percentile_ms", "record", "summary", "timeline"]

SCHEMA = "tailtune.client.observations/1"
BUCKETS_PER_DECADE = 20
LAST_BUCKET = 161
_CLASSES = ("1", "2-10", "11-50", "51+")


def _bounds_us(bucket: int) -> tuple[float, float]:
    if bucket <= 0:
        return 0.0, 1.0
    lo = 10 ** ((bucket - 1) / BUCKETS_PER_DECADE)
    return lo, (math.inf if bucket >= LAST_BUCKET else 10 ** (bucket / BUCKETS_PER_DECADE))


def merge_histograms(hists: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Adds histograms of the client's scheme (counts, sums, observed min/max)."""
    counts: dict[int, int] = {}
    total, sum_us = 0, 0.0
    lo, hi = math.inf, -math.inf
    for h in hists:
        if h.get("scheme", "log10") != "log10" or int(h.get("buckets_per_decade", 20)) != BUCKETS_PER_DECADE:
            raise Invalid("histogram scheme must be log10 with 20 buckets per decade", field="observations")
        for b, c in h.get("counts", []):
            counts[int(b)] = counts.get(int(b), 0) + int(c)
        total += int(h.get("count", 0))
        sum_us += float(h.get("sum_us", 0.0))
        if h.get("count"):
            lo = min(lo, float(h.get("min_observed_us", lo)))
            hi = max(hi, float(h.get("max_observed_us", hi)))
    return {"count": total, "sum_us": sum_us, "min_observed_us": lo if total else None,
            "max_observed_us": hi if total else None, "counts": sorted(counts.items())}


def percentile_ms(h: Mapping[str, Any], q: float) -> float | None:
    """Nearest-rank percentile of a merged histogram, in ms (None when empty)."""
    n = int(h["count"])
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    seen = 0
    for b, c in h["counts"]:
        seen += c
        if seen >= rank:
            lo, hi = _bounds_us(int(b))
            mid = lo / 2 if int(b) <= 0 else (math.sqrt(lo * hi) if math.isfinite(hi) else lo)
            mid = min(max(mid, float(h["min_observed_us"])), float(h["max_observed_us"]))
            return mid / 1000.0
    return float(h["max_observed_us"]) / 1000.0


def figures(h: Mapping[str, Any]) -> dict[str, Any]:
    """Requests, p50/p95/p99 and mean (ms) of a merged histogram."""
    n = int(h["count"])
    return {"requests": n, "p50_ms": percentile_ms(h, 0.50), "p95_ms": percentile_ms(h, 0.95),
            "p99_ms": percentile_ms(h, 0.99), "mean_ms": (h["sum_us"] / n / 1000.0) if n else None}


def record(s: Session, deployment_id: int, payload: Mapping[str, Any]) -> int:
    """Stores a client report (idempotent per client and window start); returns the observations stored."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    if payload.get("schema") != SCHEMA:
        raise Invalid(f"schema must be {SCHEMA!r}", field="schema")
    if payload.get("deployment_id") not in (None, deployment_id):
        raise Invalid("the report names another deployment", field="deployment_id")
    client = payload.get("client") or {}
    window = payload.get("window") or {}
    try:
        client_id = str(client["id"])[:64]
        start, end = float(window["start"]), float(window["end"])
        observations = list(payload["observations"])
    except (KeyError, TypeError, ValueError):
        raise Invalid("a report needs client.id, window.start, window.end and observations", field="body") from None
    if not (math.isfinite(start) and math.isfinite(end) and start <= end):
        raise Invalid("window.start must be a time before window.end", field="window")
    stored = 0
    for obs in observations:
        if not isinstance(obs, Mapping) or not isinstance(obs.get("config_version"), int):
            raise Invalid("each observation needs an integer config_version", field="observations")
        merge_histograms([obs.get("all") or {}])  # validates the scheme
        version = int(obs["config_version"])
        row = s.scalar(select(ObservationRow).where(
            ObservationRow.deployment_id == deployment_id, ObservationRow.client_id == client_id,
            ObservationRow.window_start == start, ObservationRow.config_version == version))
        if row is None:
            s.add(ObservationRow(deployment_id=deployment_id, client_id=client_id, window_start=start,
                                 window_end=end, config_version=version, observation=dict(obs), received_at=now()))
        else:  # a resent window: the new report holds everything the earlier one did
            row.window_end, row.observation, row.received_at = end, dict(obs), now()
        stored += 1
    return stored


def _expected(s: Session, version: ConfigVersionRow) -> dict[str, Any] | None:
    stored = (version.verification or {}).get("expected")  # stored with the version (tailtune.control.verify)
    if isinstance(stored, Mapping):
        return {k: stored.get(k) for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms") if k in stored}
    if version.job_id is None:
        return None
    job = s.get(JobRow, version.job_id)
    rec = (job.result or {}).get("recommendation") if job is not None else None
    exp = rec.get("expected") if isinstance(rec, Mapping) else None
    if not isinstance(exp, Mapping):
        return None
    return {k: exp.get(k) for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms") if k in exp}


def summary(s: Session, deployment_id: int) -> list[dict[str, Any]]:
    """Per config version the clients ran: expected (stored with the version, else the tuning job behind it) vs
    observed (merged)."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    rows = s.scalars(select(ObservationRow).where(ObservationRow.deployment_id == deployment_id)).all()
    by_version: dict[int, list[ObservationRow]] = {}
    for r in rows:
        by_version.setdefault(r.config_version, []).append(r)
    out = []
    for version, obs in sorted(by_version.items()):
        merged = merge_histograms([o.observation.get("all") or {} for o in obs])
        observed = figures(merged)
        observed["classes"] = {
            c: figures(merge_histograms([(o.observation.get("classes") or {}).get(c) or {} for o in obs]))
            for c in _CLASSES
        }
        observed["failed_requests"] = sum(int(o.observation.get("failed_requests", 0)) for o in obs)
        vrow = s.scalar(select(ConfigVersionRow).where(
            ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version))
        expected = _expected(s, vrow) if vrow is not None else None
        error = None
        if expected is not None:
            error = {f"{m}_pct": (observed[f"{m}_ms"] / expected[f"{m}_ms"] - 1.0) * 100.0
                     for m in ("p50", "p95", "p99")
                     if observed.get(f"{m}_ms") is not None and expected.get(f"{m}_ms")}
        out.append({"config_version": version, "clients": len({o.client_id for o in obs}),
                    "window": {"start": min(o.window_start for o in obs), "end": max(o.window_end for o in obs)},
                    "expected": expected, "observed": observed, "error": error})
    return out


def timeline(s: Session, deployment_id: int, *, limit: int = 500) -> list[dict[str, Any]]:
    """Expected vs observed over time: per report window (all clients of a window start merged, the newest
    `limit` windows, oldest first) its config version, observed p50/p99 and the p99 the tuner expected for that
    version (None without a tuning job behind it)."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    starts = s.scalars(
        select(ObservationRow.window_start).where(ObservationRow.deployment_id == deployment_id)
        .group_by(ObservationRow.window_start).order_by(ObservationRow.window_start.desc()).limit(limit)
    ).all()
    if not starts:
        return []
    rows = s.scalars(select(ObservationRow).where(
        ObservationRow.deployment_id == deployment_id, ObservationRow.window_start >= min(starts))).all()
    groups: dict[tuple[float, int], list[ObservationRow]] = {}
    for r in rows:
        groups.setdefault((r.window_start, r.config_version), []).append(r)
    expected: dict[int, dict[str, Any] | None] = {}
    out = []
    for (start, version), obs in sorted(groups.items()):
        if version not in expected:
            vrow = s.scalar(select(ConfigVersionRow).where(
                ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version))
            expected[version] = _expected(s, vrow) if vrow is not None else None
        seen = figures(merge_histograms([o.observation.get("all") or {} for o in obs]))
        exp = expected[version] or {}
        out.append({"window_start": start, "window_end": max(o.window_end for o in obs), "config_version": version,
                    "clients": len({o.client_id for o in obs}), "requests": seen["requests"],
                    "observed_p50_ms": seen["p50_ms"], "observed_p99_ms": seen["p99_ms"],
                    "expected_p99_ms": exp.get("p99_ms")})
    return out
