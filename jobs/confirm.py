"""The nightly's `confirm` step: before a recommendation is published, the live replay measures it against the
current config on the deployment's `confirm_on` (itself, or a staging deployment of its kind), and only a
recommendation the real replay does not show worse is published (docs/replay.md § confirm_on).

What runs: `control.replay.run_replay` at the `confirm_on` deployment, of the nightly's own dataset at its own
rate, with two arms — `current` (the config the tuner compared against: the recommendation's baseline) and
`recommended` (the recommendation, given as a config: the running job is not a succeeded one yet) — for
`TAILTUNE_REPLAY_CONFIRM_DURATION_S` measured seconds in blocks of `TAILTUNE_REPLAY_CONFIRM_BLOCK_S`.

The gate (`tuner.fidelity.gate` on the p99 comparison, `TAILTUNE_REPLAY_CONFIRM_MAX_WORSE`): the upper end of the
interval of the recommendation's p99 difference against current below the setting passes. The outcomes:

* `confirmed`: the version is made, with the replay's headline in its `evidence` (`{"confirm": ...}`), and the
  nightly publishes it;
* `refused`: the replay showed the recommendation worse (the interval's lower end above the gate) or did not
  bound it below the gate (the interval reaches across it): no version is made — a made version would be the
  deployment's latest, which `GET /configs/{id}` serves and the next replay's `current` names — nothing is
  published, and the result carries a finding (the model against the cluster), not an error;
* `not_replayed`: the replay could not run or is no comparison — `confirm_on` names no deployment of this kind,
  the deployment does not allow the live replay (its admin record included), the engine refused the configs
  (e.g. configs differing in a cluster-wide setting), the generator lagged (`LagTooHigh`), too few or too short
  blocks, a run shorter than the gate's duration: nothing is published either, and the result says why.

The step's output (the job's `result.confirm`) is `{outcome, on, reason, gate, headline, finding, version,
report}`: `report` is the whole `ReplayReport.as_dict()` (None when the replay did not run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from control.db import ConfigVersionRow, DeploymentRow
from control.redact import public
from control.replay import LagTooHigh, ReplayRefused, ReplayReport, run_replay, spec_text
from jobs.context import JobContext
from tuner.fidelity import Comparison, gate
from tuner.recommendation import Recommendation

__all__ = ["OUTCOMES", "confirm_recommendation", "current_config", "headline"]

#: The confirm step's outcomes (module doc).
OUTCOMES = ("confirmed", "refused", "not_replayed")
#: The arms of the confirm replay (their names are the report's keys).
CURRENT, RECOMMENDED = "current", "recommended"


def current_config(rec: Recommendation, dep: Mapping[str, Any]) -> dict[str, Any] | None:
    """The config the recommendation is measured against: the one the tuner compared it with (its baseline),
    else the deployment's `current_config`; None when neither names a policy."""
    for doc in (rec.baseline, dep.get("current_config") or {}):
        if isinstance(doc, Mapping) and isinstance(doc.get("policy"), str):
            return {"policy": doc["policy"], "params": dict(doc.get("params") or {})}
    return None


def headline(report: Mapping[str, Any], comparison: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None
             ) -> dict[str, Any]:
    """What a version's evidence keeps of a confirm replay: where and what ran, each arm's observed and predicted
    p99, the p99 comparison with its interval and method, the duration, the blocks and the gate."""
    return {
        "on": report.get("deployment"),
        "dataset": report.get("dataset"),
        "at": report.get("at"),
        "arms": [{"name": a.get("name"), "spec": a.get("spec"), "config": a.get("config"), "mode": a.get("mode")}
                 for a in report.get("arms") or []],
        "observed_p99_ms": {k: v.get("p99_ms") for k, v in (report.get("observed") or {}).items()},
        "predicted_p99_ms": {k: v.get("p99_ms") for k, v in (report.get("predicted") or {}).items()},
        "comparison": dict(comparison) if comparison is not None else None,
        "method": (comparison or {}).get("method"),
        "duration_s": report.get("duration_s"),
        "blocks": report.get("blocks"),
        "block_s": report.get("block_s"),
        "rate": report.get("rate"),
        "gate": dict(verdict) if verdict is not None else None,
    }


def _p99(report: ReplayReport) -> Comparison | None:
    return next((c for c in report.comparisons if c.metric == "p99" and c.candidate == RECOMMENDED), None)


def _finding(doc: Mapping[str, Any]) -> str | None:
    """One sentence when the cluster contradicts the model: the model predicted the recommendation better, the
    replay measured it worse (or could not bound it)."""
    head = doc.get("headline") or {}
    predicted, comparison = head.get("predicted_p99_ms") or {}, head.get("comparison") or {}
    if comparison.get("diff_pct") is None:
        return None
    lo, hi = comparison.get("interval_pct") or (math.nan, math.nan)
    observed = (f"measured the recommendation's p99 {comparison['diff_pct']:+.1f} % [{lo:+.1f} %, {hi:+.1f} %] "
                "against current")
    pc, pr = predicted.get(CURRENT), predicted.get(RECOMMENDED)
    model = (f", where the model predicted {100.0 * (pr / pc - 1.0):+.1f} %" if isinstance(pc, int | float)
             and isinstance(pr, int | float) and pc > 0 else "")
    return f"the live replay at {head.get('on')!r} {observed}{model}: the model is not the cluster here"


def _outcome(outcome: str, on: str, reason: str, **more: Any) -> dict[str, Any]:
    doc = {"outcome": outcome, "on": on, "reason": reason, "gate": None, "headline": None, "finding": None,
           "version": None, "report": None, "fidelity_record": None}
    doc.update(more)
    return doc


def _judge(ctx: JobContext, report: ReplayReport, on: str) -> dict[str, Any]:
    settings = ctx.settings
    whole = report.as_dict()
    c = _p99(report)
    if c is None:
        return _outcome("not_replayed", on, "the replay holds no p99 comparison of the recommendation",
                        report=whole)
    comparison = whole["comparisons"][report.comparisons.index(c)]
    block_s = settings.replay_confirm_block_s
    # the gate's duration: the whole blocks the setting asks for (a trace shorter at its rate falls short of it)
    wanted = math.floor(settings.replay_confirm_duration_s / block_s + 1e-9) * block_s
    verdict = gate(c, 100.0 * settings.replay_confirm_max_worse, min_duration_s=wanted - 1e-6 * max(1.0, wanted))
    head = headline(whole, comparison, verdict.as_dict())
    if verdict.verdict == "pass":
        return _outcome("confirmed", on, verdict.reason, gate=verdict.as_dict(), headline=head, report=whole)
    if c.reason is not None or c.duration_s < wanted - 1e-6 * max(1.0, wanted):
        return _outcome("not_replayed", on, f"the replay is no comparison: {verdict.reason}",
                        gate=verdict.as_dict(), headline=head, report=whole)
    doc = _outcome("refused", on, verdict.reason, gate=verdict.as_dict(), headline=head, report=whole)
    doc["finding"] = _finding(doc)
    return doc


def _replay(ctx: JobContext, on: str, kind: str, dataset_id: str, current: dict[str, Any],
            recommended: dict[str, Any]) -> dict[str, Any]:
    with ctx.db.session() as s:
        target = s.scalar(select(DeploymentRow).where(DeploymentRow.name == on))
        target_kind = None if target is None else target.kind
    if target_kind is None:
        return _outcome("not_replayed", on, f"confirm_on names no deployment {on!r} (deleted since it was set?)")
    if target_kind != kind:
        return _outcome("not_replayed", on, f"confirm_on {on!r} is a {target_kind} deployment, this one {kind}")
    settings = ctx.settings
    ctx.log(f"confirm: live replay at {on!r} of dataset {dataset_id}: {CURRENT}={spec_text(current)} against "
            f"{RECOMMENDED}={spec_text(recommended)}, {settings.replay_confirm_duration_s:g} s in blocks of "
            f"{settings.replay_confirm_block_s:g} s")
    try:
        report = run_replay(on, dataset_id, [(CURRENT, current), (RECOMMENDED, recommended)],
                            duration_s=settings.replay_confirm_duration_s, block_s=settings.replay_confirm_block_s,
                            seed=ctx.job_id, settings=settings, on_progress=lambda *_: ctx.check_cancel())
    except LagTooHigh as exc:
        return _outcome("not_replayed", on, public(str(exc), settings), report=exc.report.as_dict())
    except ReplayRefused as exc:
        reason = public(str(exc) + (f" ({exc.hint})" if getattr(exc, "hint", None) else ""), settings)
        return _outcome("not_replayed", on, reason)
    return _judge(ctx, report, on)


def _make_version(ctx: JobContext, dep_id: int, rec: Recommendation, rec_json: Mapping[str, Any], reason: str,
                  evidence: dict[str, Any]) -> int:
    """The recommendation's version (made once per job: a resumed step finds it), its evidence the replay's."""
    from control.configs import add_version
    from control.verify import expectation

    with ctx.db.session() as s:
        existing = s.scalar(select(ConfigVersionRow).where(ConfigVersionRow.deployment_id == dep_id,
                                                           ConfigVersionRow.job_id == ctx.job_id))
        if existing is not None:
            return existing.version
        row = add_version(s, dep_id, rec.config(), settings=ctx.settings, source="tuning", job_id=ctx.job_id,
                          note=f"nightly job {ctx.job_id}: {reason}; confirmed on {evidence['on']!r}")
        expected = expectation(dict(rec_json), job_id=ctx.job_id)
        row.verification = {"status": "unchecked", "expected": expected} if expected else None
        row.evidence = {"confirm": evidence}
        return row.version


def _keep(ctx: JobContext, on: str, report: Mapping[str, Any]) -> int | None:
    """The replay's report kept among the fidelity records of the deployment it ran at (`source` confirm; a
    lagging one kept, flagged, not pooled): its id, or None when it could not be kept (said in the log)."""
    from control.errors import ServiceError
    from control.fidelity_store import record

    with ctx.db.session() as s:
        target = s.scalar(select(DeploymentRow).where(DeploymentRow.name == on))
        if target is None:
            return None
        try:
            return record(s, target.id, report, job_id=ctx.job_id, source="confirm")
        except ServiceError as exc:
            ctx.log(f"confirm: the replay's report was not kept as a fidelity record: {exc}")
            return None


def confirm_recommendation(ctx: JobContext, dep_id: int, dep: Mapping[str, Any], on: str, dataset_id: str,
                           rec: Recommendation, rec_json: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """The confirm step (module doc): its outcome, with the version it made when the replay confirmed the
    recommendation."""
    current = current_config(rec, dep)
    if current is None:
        doc = _outcome("not_replayed", on, "the recommendation names no current config to replay it against")
    else:
        doc = _replay(ctx, on, str(dep["kind"]), dataset_id, current, {"policy": rec.policy,
                                                                       "params": dict(rec.params)})
    if doc.get("report") is not None:
        doc["fidelity_record"] = _keep(ctx, on, doc["report"])
    if doc["outcome"] == "confirmed":
        doc["version"] = _make_version(ctx, dep_id, rec, rec_json, reason, doc["headline"])
    ctx.log(f"confirm: {doc['outcome']} on {on!r}: {doc['reason']}"
            + (f" → version {doc['version']}" if doc["version"] is not None else " — nothing is published"))
    if doc["finding"]:
        ctx.log(f"finding: {doc['finding']}")
    return doc
