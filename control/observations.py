"""Expected vs observed: the latency histograms a deployment's clients report (`tailtune_client`), stored per
client, report window and config version, merged per version and set beside the figures the tuner expected for
that version.

The histogram scheme is the client's, declared once in `tailtune_client.histogram` (clients/python/README.md,
"stats()"): log10 buckets, 20 per decade from 1 µs, sparse `[[bucket, count], ...]`; histograms of one scheme
merge by adding counts; percentiles are nearest-rank on the buckets (the ⌈q·n⌉-th value's bucket, its geometric
middle, clamped to the observed min/max) — the client's own estimator, so the service and the client report the
same figure for the same data. The product imports the client package (it depends on it already for the key →
server hash) and never the other way round.

A report is validated completely at the door (`record`: `tailtune_client.report.Observation.from_json`, the one
reader of an observation) and stored in the form that reader gives back, so what is stored can be merged. A
report from a client still on its bootstrap config (`config_version` null, before any publish) is stored as
version 0, "before tailtune". Every reader still reads stored rows through the same reader (`readable`) and skips
a row it cannot use — one written by another version, or straight into the database — saying how many it
skipped (`skipped` in the answer, a note on the console), so one bad row never fails a page.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

from sqlalchemy import select
from sqlalchemy.orm import Session
from tailtune_client.histogram import SIZE_CLASSES, LogHistogram, SchemeError
from tailtune_client.report import REPORT_SCHEMA, Observation

from base.settings import Settings, get_settings
from control.common import now
from control.db import ConfigVersionRow, DeploymentRow, JobRow, ObservationRow
from control.errors import Invalid, Missing

__all__ = [
    "BOOTSTRAP_VERSION",
    "SCHEMA",
    "Reported",
    "Timeline",
    "by_version",
    "figures",
    "merge_histograms",
    "merged",
    "percentile_ms",
    "readable",
    "record",
    "skipped_note",
    "summary",
    "timeline",
]

SCHEMA = REPORT_SCHEMA
#: The version a client's bootstrap config (no version: nothing published yet) is reported under.
BOOTSTRAP_VERSION = 0
#: `observations.config_version` is an INTEGER column.
VERSION_MAX = 2**31 - 1
_CLASSES = tuple(c[0] for c in SIZE_CLASSES)
_log = logging.getLogger(__name__)


def merge_histograms(hists: Iterable[Mapping[str, Any] | LogHistogram]) -> LogHistogram:
    """Adds histograms of the client's scheme (documents are read with `LogHistogram.from_json`, which raises
    `SchemeError` for one that does not follow it)."""
    out = LogHistogram()
    for h in hists:
        out.merge(h if isinstance(h, LogHistogram) else LogHistogram.from_json(h))
    return out


def percentile_ms(h: LogHistogram, q: float) -> float | None:
    """Nearest-rank percentile of a merged histogram, in ms (None when empty)."""
    us = h.quantile_us(q)
    return None if us is None else us / 1000.0


def figures(h: LogHistogram) -> dict[str, Any]:
    """Requests, p50/p95/p99 and mean (ms) of a merged histogram."""
    n = h.n
    return {"requests": n, "p50_ms": percentile_ms(h, 0.50), "p95_ms": percentile_ms(h, 0.95),
            "p99_ms": percentile_ms(h, 0.99), "mean_ms": (h.sum_us / n / 1000.0) if n else None}


@dataclass(frozen=True, slots=True)
class Reported:
    """A stored row and its observation, read back."""

    row: ObservationRow
    obs: Observation

    @property
    def version(self) -> int:
        return self.row.config_version

    @property
    def client_id(self) -> str:
        return self.row.client_id

    @property
    def window_start(self) -> float:
        return self.row.window_start

    @property
    def window_end(self) -> float:
        return self.row.window_end


def _read_row(row: ObservationRow) -> Observation:
    if not (isinstance(row.window_start, float | int) and isinstance(row.window_end, float | int)
            and math.isfinite(row.window_start) and math.isfinite(row.window_end)):
        raise SchemeError("window", "must be finite times")
    return Observation.from_json(row.observation)


def readable(rows: Iterable[ObservationRow]) -> tuple[list[Reported], int]:
    """The rows every reader can use, and how many it skipped (each logged with its problem)."""
    out: list[Reported] = []
    skipped = 0
    for row in rows:
        try:
            out.append(Reported(row, _read_row(row)))
        except SchemeError as exc:
            skipped += 1
            _log.warning("observation row %s (deployment %s, client %r) skipped: %s", row.id, row.deployment_id,
                         str(row.client_id)[:64], exc)
    return out, skipped


def skipped_note(skipped: int) -> str | None:
    """What a reader says about the rows it skipped (None: none)."""
    if not skipped:
        return None
    return (f"{skipped} stored report row(s) could not be read (not of the client histogram scheme) and were "
            "left out; the service log names each")


def merged(reported: Iterable[Reported], size_class: str | None = None) -> LogHistogram:
    """The reported rows' histograms merged: all requests, or those of one size class."""
    return merge_histograms(r.obs.histogram() if size_class is None else r.obs.classes[size_class]
                            for r in reported)


def _checked(payload: Mapping[str, Any], deployment_id: int, max_observations: int) -> tuple[
    str, float, float, list[tuple[int, Observation]]
]:
    if payload.get("schema") != SCHEMA:
        raise Invalid(f"schema must be {SCHEMA!r}", field="schema")
    dep = payload.get("deployment_id")
    if dep is not None and (isinstance(dep, bool) or dep != deployment_id):
        raise Invalid("the report names another deployment", field="deployment_id")
    client = payload.get("client")
    if not isinstance(client, Mapping) or not isinstance(client.get("id"), str | int) \
            or isinstance(client.get("id"), bool) or not str(client["id"]).strip():
        raise Invalid("client.id must be a non-empty string", field="client.id")
    window = payload.get("window")
    if not isinstance(window, Mapping):
        raise Invalid("window must be an object with start and end (Unix seconds)", field="window")
    times = []
    for name in ("start", "end"):
        v = window.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v < 1e11:
            raise Invalid(f"window.{name} must be a time in Unix seconds", field=f"window.{name}")
        times.append(float(v))
    start, end = times
    if start > end:
        raise Invalid("window.start must be a time before window.end", field="window")
    raw = payload.get("observations")
    if not isinstance(raw, list):
        raise Invalid("observations must be a list", field="observations")
    if len(raw) > max_observations:
        raise Invalid(f"at most {max_observations} observations per report (report_max_observations), got "
                      f"{len(raw)}", field="observations")
    out: list[tuple[int, Observation]] = []
    seen: set[int] = set()
    for i, doc in enumerate(raw):
        try:
            obs = Observation.from_json(doc, f"observations[{i}]")
        except SchemeError as exc:
            raise Invalid(f"{exc.field}: {exc.problem}", field=exc.field) from None
        version = BOOTSTRAP_VERSION if obs.config_version is None else obs.config_version
        if version > VERSION_MAX:
            raise Invalid(f"observations[{i}].config_version: must be at most {VERSION_MAX}, got {version}",
                          field=f"observations[{i}].config_version")
        if version in seen:
            raise Invalid(f"observations[{i}].config_version: version {version} is reported twice",
                          field=f"observations[{i}].config_version")
        seen.add(version)
        out.append((version, obs))
    return str(client["id"])[:64], start, end, out


def record(s: Session, deployment_id: int, payload: Mapping[str, Any], settings: Settings | None = None) -> int:
    """Stores a client report (idempotent per client and window start); returns the observations stored. The
    whole report is checked before anything is stored (Invalid naming the field)."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    limit = (settings or get_settings()).report_max_observations
    client_id, start, end, observations = _checked(payload, deployment_id, limit)
    stored = 0
    for version, obs in observations:
        doc = dict(obs.to_json())
        doc["config_version"] = version
        row = s.scalar(select(ObservationRow).where(
            ObservationRow.deployment_id == deployment_id, ObservationRow.client_id == client_id,
            ObservationRow.window_start == start, ObservationRow.config_version == version))
        if row is None:
            s.add(ObservationRow(deployment_id=deployment_id, client_id=client_id, window_start=start,
                                 window_end=end, config_version=version, observation=doc, received_at=now()))
        else:  # a resent window: the new report holds everything the earlier one did
            row.window_end, row.observation, row.received_at = end, doc, now()
        stored += 1
    return stored


def _expected(s: Session, version: ConfigVersionRow) -> dict[str, Any] | None:
    stored = (version.verification or {}).get("expected")  # stored with the version (control.verify)
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


def _rows(s: Session, deployment_id: int, *conditions: Any) -> tuple[list[Reported], int]:
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    return readable(s.scalars(select(ObservationRow).where(ObservationRow.deployment_id == deployment_id,
                                                           *conditions)).all())


def by_version(reported: Iterable[Reported]) -> dict[int, list[Reported]]:
    out: dict[int, list[Reported]] = {}
    for r in reported:
        out.setdefault(r.version, []).append(r)
    return out


def summary(s: Session, deployment_id: int) -> list[dict[str, Any]]:
    """Per config version the clients ran (version 0: their bootstrap config, before tailtune): expected
    (stored with the version, else the tuning job behind it) vs observed (merged); `skipped` counts the stored
    rows of that version no reader can use (left out, `note` says so)."""
    reported, _ = _rows(s, deployment_id)
    skipped: dict[int, int] = {}
    for (version,) in s.execute(select(ObservationRow.config_version).where(
            ObservationRow.deployment_id == deployment_id)).all():
        skipped[version] = skipped.get(version, 0) + 1
    groups = by_version(reported)
    for version, obs in groups.items():
        skipped[version] -= len(obs)
    out = []
    for version in sorted(skipped):
        obs = groups.get(version, [])
        observed = figures(merged(obs))
        observed["classes"] = {c: figures(merged(obs, c)) for c in _CLASSES}
        observed["failed_requests"] = sum(o.obs.failed_requests for o in obs)
        vrow = s.scalar(select(ConfigVersionRow).where(
            ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version))
        expected = _expected(s, vrow) if vrow is not None else None
        error = None
        if expected is not None:
            error = {f"{m}_pct": (observed[f"{m}_ms"] / expected[f"{m}_ms"] - 1.0) * 100.0
                     for m in ("p50", "p95", "p99")
                     if observed.get(f"{m}_ms") is not None and _positive(expected.get(f"{m}_ms"))}
        out.append({"config_version": version, "bootstrap": version == BOOTSTRAP_VERSION,
                    "clients": len({o.client_id for o in obs}),
                    "window": {"start": min(o.window_start for o in obs), "end": max(o.window_end for o in obs)}
                    if obs else None,
                    "expected": expected, "observed": observed, "error": error,
                    "skipped": skipped[version], "note": skipped_note(skipped[version])})
    return out


def _positive(v: Any) -> TypeGuard[int | float]:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and v > 0


class Timeline(NamedTuple):
    """Expected vs observed per report window, and how many stored rows were skipped."""

    points: list[dict[str, Any]]
    skipped: int


def timeline(s: Session, deployment_id: int, *, limit: int = 500) -> Timeline:
    """Expected vs observed over time: per report window (all clients of a window start merged, the newest
    `limit` windows, oldest first) its config version, observed p50/p99 and the p99 the tuner expected for that
    version (None without a tuning job behind it); and the rows of those windows skipped (unreadable)."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    starts = s.scalars(
        select(ObservationRow.window_start).where(ObservationRow.deployment_id == deployment_id)
        .group_by(ObservationRow.window_start).order_by(ObservationRow.window_start.desc()).limit(limit)
    ).all()
    if not starts:
        return Timeline([], 0)
    reported, skipped = _rows(s, deployment_id, ObservationRow.window_start >= min(starts))
    groups: dict[tuple[float, int], list[Reported]] = {}
    for r in reported:
        groups.setdefault((r.window_start, r.version), []).append(r)
    expected: dict[int, dict[str, Any] | None] = {}
    out = []
    for (start, version), obs in sorted(groups.items()):
        if version not in expected:
            vrow = s.scalar(select(ConfigVersionRow).where(
                ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version))
            expected[version] = _expected(s, vrow) if vrow is not None else None
        seen = figures(merged(obs))
        exp = expected[version] or {}
        p99 = exp.get("p99_ms")
        out.append({"window_start": start, "window_end": max(o.window_end for o in obs), "config_version": version,
                    "clients": len({o.client_id for o in obs}), "requests": seen["requests"],
                    "observed_p50_ms": seen["p50_ms"], "observed_p99_ms": seen["p99_ms"],
                    "expected_p99_ms": float(p99) if _positive(p99) else None})
    return Timeline(out, skipped)
