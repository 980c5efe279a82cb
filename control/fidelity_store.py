"""Fidelity records: every live replay's report of a deployment, kept (`fidelity_records`), and the model's fidelity
on that deployment pooled over them (`GET /deployments/{id}/fidelity`, the console's "the model on your cluster").

`record(s, deployment_id, report, job_id=..., source=...)` stores one `control.replay.ReplayReport.as_dict()` —
from the `replay` job (`source="replay"`), a nightly's confirm step (`"confirm"`) or the CLI (`"cli"`). The report
is checked strictly first (`check_report`: every key of docs/replay.md § The report with its type, no other
top-level key, the arms named consistently, strict JSON within `TAILTUNE_FIDELITY_REPORT_MAX_BYTES`): it is read
back later by pages, so what is not a report is refused (`Invalid`, naming the key). A report whose generator lagged
(`generator.lag_ok` false: `control.replay.LagTooHigh`) is kept with the flag `lag_too_high` and is not pooled:
its latencies are the generator's as much as the cluster's. A report whose arms interfered (`interference.flagged`:
an arm's extra reads, e.g. `ALWAYS`'s, were a large share of the cluster's reads, so every arm was measured under
them while the model replays each config alone) is kept with the flag `interference` and is not pooled either: the
model's agreement is restricted to replays where the interference is small.

`summary(s, deployment_id)` pools the deployment's unflagged records (the newest `TAILTUNE_FIDELITY_MAX_POOLED`)
through `tuner.fidelity.fidelity`, each rebuilt as a `ReplayEvidence` from its stored report (`evidence`): the
pair agreement k of m with its interval (p99, and per metric), the regret of the model's pick, the pairs'
log-ratio error, the error of predicted against observed per percentile (ln(predicted/observed) over every config
of every replay, and as %), the time series (per replay: its error per percentile, the agreement so far) and the
replays that contradicted the model: a resolved pair whose predicted difference has the other sign (a finding).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from base.settings import get_settings
from control.common import now
from control.db import DeploymentRow, FidelityRecordRow
from control.errors import Invalid, Missing
from tuner.fidelity import (
    METRICS,
    Comparison,
    Fidelity,
    Quantiles,
    ReplayEvidence,
    fidelity,
    wilson_interval,
)

__all__ = [
    "INTERFERENCE",
    "LAG_TOO_HIGH",
    "SOURCES",
    "check_report",
    "errors",
    "evidence",
    "flag_of",
    "list_records",
    "record",
    "record_out",
    "summary",
]

#: Who stored a record: the `replay` job, a nightly's confirm step, the CLI.
SOURCES = ("replay", "confirm", "cli")
#: The flag of a report kept but not pooled: its generator sent late (`generator.lag_ok` false).
LAG_TOO_HIGH = "lag_too_high"
#: The flag of a report kept but not pooled: an arm's extra reads loaded every arm (`interference.flagged`), and
#: the model replays each config alone, so the observed and predicted differences are not of the same thing.
INTERFERENCE = "interference"
_ARM = r"^[A-Za-z0-9_-]{1,64}$"
_MAX_ARMS = 16

Num = float | None
Count = Annotated[int, Field(ge=0)]


class _Part(BaseModel):
    """A nested part of the report: its keys typed, more keys allowed (a kind's counters may add some)."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _Config(_Part):
    policy: str
    params: dict[str, Any]


class _Arm(_Part):
    name: Annotated[str, Field(pattern=_ARM)]
    spec: str
    config: _Config
    mode: str


class _Rate(_Part):
    scale: Num
    intended_per_s: Num
    achieved_per_s: Num


class _Lag(_Part):
    p50: Num
    p99: Num
    max: Num


class _Generator(_Part):
    driver: str
    cpu_us_per_request: Num
    lag_ms: _Lag
    lag_ok: bool


class _Predicted(_Part):
    p50_ms: Num
    p95_ms: Num
    p99_ms: Num


class _Observed(_Predicted):
    requests: Count
    errors: Count
    timeouts: Count


class _Comparison(_Part):
    baseline: str
    candidate: str
    metric: Literal["p50", "p95", "p99"]
    design: Literal["concurrent", "alternating"]
    method: str
    blocks: Count | None
    pairs: Count | None
    duration_s: float
    level: Annotated[float, Field(gt=0, lt=1)]
    baseline_ms: Num
    candidate_ms: Num
    diff_pct: Num
    interval_pct: Annotated[list[float], Field(min_length=2, max_length=2)] | None
    resolved: bool
    resamples: Count | None
    seed: int | None
    reason: str | None


class _Agreement(_Part):
    k: Count
    m: Count


class _Fidelity(_Part):
    agreement: _Agreement


class _Report(BaseModel):
    """`ReplayReport.as_dict()` (docs/replay.md § The report): its keys fixed."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    deployment: str
    kind: str
    dataset: str
    at: Annotated[float, Field(gt=0)]
    arms: Annotated[list[_Arm], Field(min_length=2, max_length=_MAX_ARMS)]
    rate: _Rate
    duration_s: Annotated[float, Field(ge=0)]
    blocks: Count
    block_s: Annotated[float, Field(gt=0)]
    generator: _Generator
    observed: dict[str, _Observed]
    predicted: dict[str, _Predicted]
    comparisons: list[_Comparison]
    fidelity: _Fidelity
    interference: dict[str, Any]
    cluster: dict[str, Any]
    notes: list[str]


def _refuse(where: str, problem: str) -> Invalid:
    return Invalid(f"not a live replay report (ReplayReport.as_dict()): {where}: {problem}",
                   field=f"report.{where}" if where else "report")


def check_report(report: Any, *, max_bytes: int | None = None) -> dict[str, Any]:
    """`report` checked as a live replay report (module doc) and returned as plain JSON data (a copy); `Invalid`
    naming the first key that is wrong."""
    if not isinstance(report, Mapping):
        raise _refuse("", f"expected a JSON object, got {type(report).__name__}")
    limit = get_settings().fidelity_report_max_bytes if max_bytes is None else max_bytes
    try:
        text = json.dumps(report, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise _refuse("", f"not strict JSON ({exc})") from None
    if len(text.encode()) > limit:
        raise _refuse("", f"{len(text.encode()):,} bytes of JSON, over TAILTUNE_FIDELITY_REPORT_MAX_BYTES ({limit:,})")
    doc: dict[str, Any] = json.loads(text)
    try:
        shape = _Report.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise _refuse(where, str(err.get("msg", "invalid"))) from None
    names = [a.name for a in shape.arms]
    if len(set(names)) != len(names):
        raise _refuse("arms", f"arm names must be distinct: {', '.join(names)}")
    for part in ("observed", "predicted"):
        unknown = sorted(set(getattr(shape, part)) - set(names))
        if unknown:
            raise _refuse(part, f"names no arm of the report: {', '.join(unknown)}")
    for i, c in enumerate(shape.comparisons):
        for end in ("baseline", "candidate"):
            if getattr(c, end) not in names:
                raise _refuse(f"comparisons.{i}.{end}", f"{getattr(c, end)!r} is no arm of the report")
        if c.interval_pct is not None and c.interval_pct[0] > c.interval_pct[1]:
            raise _refuse(f"comparisons.{i}.interval_pct", "the low end is above the high end")
    return doc


def evidence(replay: str, report: Mapping[str, Any]) -> ReplayEvidence:
    """A checked report (`check_report`) as `tuner.fidelity`'s evidence: its observed and predicted quantiles, and
    the comparisons between arms that both have a prediction (as `control.replay` pools them)."""
    observed = {str(k): Quantiles.from_dict(v) for k, v in (report.get("observed") or {}).items()}
    predicted = {str(k): Quantiles.from_dict(v) for k, v in (report.get("predicted") or {}).items()}
    comparisons = [Comparison.from_dict(c) for c in report.get("comparisons") or []]
    known = [c for c in comparisons if c.baseline in predicted and c.candidate in predicted]
    return ReplayEvidence(replay, observed, predicted, known)


def _contradicts(ev: ReplayEvidence) -> bool:
    return any(p.agree is False for metric in METRICS for p in fidelity([ev], metric=metric).pairs)


def flag_of(report: Mapping[str, Any]) -> str | None:
    """Why a checked report is kept but not pooled (None: pooled): its generator lagged, or its arms interfered."""
    if not report["generator"]["lag_ok"]:
        return LAG_TOO_HIGH
    if (report.get("interference") or {}).get("flagged"):
        return INTERFERENCE
    return None


def record(s: Session, deployment_id: int, report: Mapping[str, Any], *, job_id: int | None, source: str) -> int:
    """Store one live replay's report of the deployment (module doc); its record's id. `Invalid` for what is not a
    report or an unknown `source`, `Missing` for an unknown deployment."""
    if source not in SOURCES:
        raise Invalid(f"must be one of {', '.join(SOURCES)}, got {source!r}", field="source")
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    doc = check_report(report)
    ev = evidence("new", doc)
    p99 = fidelity([ev]).agreement
    row = FidelityRecordRow(
        deployment_id=deployment_id, job_id=job_id, source=source, at=float(doc["at"]), report=doc,
        flag=flag_of(doc), arms=len(doc["arms"]),
        duration_s=float(doc["duration_s"]), blocks=int(doc["blocks"]), agree_k=p99.k, agree_m=p99.m,
        contradicts=_contradicts(ev), created_at=now(),
    )
    s.add(row)
    s.flush()
    return row.id


def list_records(s: Session, deployment_id: int, *, limit: int, offset: int) -> list[FidelityRecordRow]:
    """The deployment's records, newest replay first."""
    query = (select(FidelityRecordRow).where(FidelityRecordRow.deployment_id == deployment_id)
             .order_by(FidelityRecordRow.at.desc(), FidelityRecordRow.id.desc()).limit(limit).offset(offset))
    return list(s.scalars(query))


def record_out(row: FidelityRecordRow) -> dict[str, Any]:
    """A record as the API and the pages give it: its summary columns and the report."""
    return {"id": row.id, "deployment_id": row.deployment_id, "job_id": row.job_id, "source": row.source,
            "at": row.at, "flag": row.flag, "pooled": row.flag is None, "arms": row.arms,
            "duration_s": row.duration_s, "blocks": row.blocks,
            "agreement": {"k": row.agree_k, "m": row.agree_m}, "contradicts": row.contradicts,
            "report": row.report}


def _log_ratio(predicted: float, observed: float) -> float | None:
    if math.isfinite(predicted) and math.isfinite(observed) and predicted > 0 and observed > 0:
        return math.log(predicted / observed)
    return None


def _pct(log_ratio: float | None) -> float | None:
    return None if log_ratio is None else 100.0 * math.expm1(log_ratio)


def errors(evs: Sequence[ReplayEvidence]) -> dict[str, dict[str, Any]]:
    """Per percentile, ln(predicted/observed) over every config of `evs` that has both: n, mean, mean |·|, and the
    mean as % (exp(mean) − 1)."""
    out: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        logs = [lr for ev in evs for name in sorted(set(ev.observed) & set(ev.predicted))
                if (lr := _log_ratio(ev.predicted[name].value(metric), ev.observed[name].value(metric))) is not None]
        mean = sum(logs) / len(logs) if logs else None
        out[metric] = {"n": len(logs), "mean_log_ratio": mean,
                       "mean_abs_log_ratio": sum(abs(x) for x in logs) / len(logs) if logs else None,
                       "mean_pct": _pct(mean)}
    return out


def _agreement(k: int, m: int) -> dict[str, Any]:
    return {"k": k, "m": m, "rate": k / m if m else None,
            "interval": list(wilson_interval(k, m)) if m else None, "method": "wilson", "level": 0.95}


def summary(s: Session, deployment_id: int) -> dict[str, Any]:
    """The model's fidelity on the deployment, pooled over its unflagged records (module doc)."""
    if s.get(DeploymentRow, deployment_id) is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    cap = get_settings().fidelity_max_pooled
    where = FidelityRecordRow.deployment_id == deployment_id
    total = int(s.scalar(select(func.count()).select_from(FidelityRecordRow).where(where)) or 0)
    flagged = int(s.scalar(select(func.count()).select_from(FidelityRecordRow)
                           .where(where, FidelityRecordRow.flag.is_not(None))) or 0)
    rows = list(s.scalars(select(FidelityRecordRow).where(where, FidelityRecordRow.flag.is_(None))
                          .order_by(FidelityRecordRow.at.desc(), FidelityRecordRow.id.desc()).limit(cap)))
    rows.reverse()  # oldest first: the series runs forward in time
    evs = [evidence(str(r.id), r.report) for r in rows]
    pooled: Fidelity = fidelity(evs)
    by_metric = {m: fidelity(evs, metric=m) for m in METRICS}
    series, contradictions = [], []
    k = m = 0
    for row, ev in zip(rows, evs, strict=True):
        own = fidelity([ev])
        k, m = k + own.agreement.k, m + own.agreement.m
        own_errors = errors([ev])
        series.append({"record_id": row.id, "at": row.at, "job_id": row.job_id, "source": row.source,
                       "error_log_ratio": {q: e["mean_log_ratio"] for q, e in own_errors.items()},
                       "error_pct": {q: e["mean_pct"] for q, e in own_errors.items()},
                       "agreement": {"k": own.agreement.k, "m": own.agreement.m},
                       "agreement_so_far": _agreement(k, m), "contradicts": row.contradicts})
        if row.contradicts:
            pairs = [p.as_dict() for f in (fidelity([ev], metric=q) for q in METRICS) for p in f.pairs
                     if p.agree is False]
            contradictions.append({"record_id": row.id, "at": row.at, "job_id": row.job_id, "pairs": pairs})
    contradictions.reverse()  # newest first
    return {
        "deployment_id": deployment_id,
        "records": total,
        "pooled": len(rows),
        "flagged": flagged,
        "left_out": max(0, total - flagged - len(rows)),
        "metric": pooled.metric,
        "agreement": pooled.agreement.as_dict(),
        "agreement_by_metric": {q: f.agreement.as_dict() for q, f in by_metric.items()},
        "regret": {"mean_pct": pooled.mean_regret_pct, "max_pct": pooled.max_regret_pct,
                   "replays": len(pooled.regrets)},
        "mean_abs_log_ratio_error": pooled.mean_abs_log_ratio_error,
        "error": errors(evs),
        "series": series,
        "contradictions": contradictions,
    }
