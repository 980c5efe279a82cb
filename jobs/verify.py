"""The `verify` job: judge a published version on what the real system now does (`control.verify`).

The worker reads what only it may reach — what the target itself reports (`DeploymentKind.server_figures`: a stock
Cassandra deployment's coordinator read latency, through its publisher's connection under the egress rules:
allowed addresses, allowed password variable) and the environment's reference (`DeploymentKind.reference_figures`:
a trivial request's round trips, through the same connection) — and hands it to the control plane's check
together with the clients' reports in the metadata DB. The API only enqueues this job
(`POST /api/v1/deployments/{id}/verify`); the nightly job runs the same check as its last step.
"""

from __future__ import annotations

from typing import Any

from control.configs import get_version, latest
from control.db import DeploymentRow
from control.egress import Egress
from control.errors import Missing
from control.grants import PASSWORD, granted
from control.kind import Target
from control.kinds import operations
from control.verify import FINAL, verify_version
from jobs.context import JobContext, JobFailed

__all__ = ["environment_reference", "run_verify", "server_latency", "verify_deployment"]


def _target(ctx: JobContext, dep: dict[str, Any]) -> Target:
    return Target(dep["name"], dep["connection"], Egress.of(ctx.settings).bound(dep["password_grant"]),
                  tuple(dep["tables"]), dep["server"], dep["driver"])


def server_latency(ctx: JobContext, dep: dict[str, Any]) -> dict[str, Any] | None:
    """What the deployment's target reports now (its kind's `server_figures`: a stock Cassandra deployment's
    coordinator read latency per node and table); None for kinds that report none; `{"error": why}` when the
    target could not be read (the check goes on with the clients')."""
    return operations(dep["kind"]).server_figures(_target(ctx, dep), ctx.settings, log=ctx.log)


def environment_reference(ctx: JobContext, dep: dict[str, Any]) -> dict[str, Any] | None:
    """The environment's reference now (its kind's `reference_figures`: a trivial request's round trips), which
    the check compares with the one the publisher measured; None for a kind without one; `{"error": why}`."""
    return operations(dep["kind"]).reference_figures(_target(ctx, dep), ctx.settings, log=ctx.log)


def verify_deployment(
    ctx: JobContext, deployment_id: int, version: int | None = None, *, force: bool = False
) -> dict[str, Any]:
    """Check `version` (default: the latest) of the deployment; the outcome is recorded on the version."""
    with ctx.db.session() as s:
        row = s.get(DeploymentRow, deployment_id)
        if row is None:
            raise JobFailed(f"deployment {deployment_id} no longer exists")
        dep = {"name": row.name, "kind": row.kind, "connection": dict(row.connection),
               "server": row.server or "stock", "driver": row.driver or "java4", "tables": list(row.tables or []),
               "password_grant": granted(s, deployment_id, PASSWORD)}
        try:
            target = latest(s, deployment_id) if version is None else get_version(s, deployment_id, version)
        except Missing as exc:
            if version is None:
                return {"version": None, "status": None, "checked": False, "reason": exc.detail}
            raise JobFailed(exc.detail) from None
        already = (target.verification or {}).get("status")
    if already in FINAL and not force:  # nothing to do: no connection made
        return {"version": target.version, "status": already, "checked": False,
                "reason": f"version {target.version} is already {already}"}
    server = server_latency(ctx, dep)
    reference = environment_reference(ctx, dep)
    with ctx.db.session() as s:
        out = verify_version(s, ctx.settings, deployment_id, target.version, server=server, reference=reference,
                             job_id=ctx.job_id, force=force)
    ctx.log(f"verify: version {out['version']} {out['status']}: {out['reason']}")
    return out


def run_verify(ctx: JobContext) -> dict[str, Any]:
    if ctx.deployment_id is None:
        raise JobFailed("a verify job needs a deployment")
    dep_id = ctx.deployment_id
    raw = ctx.payload.get("version")
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int)):
        raise JobFailed(f"job payload: field 'version': must be an integer, got {raw!r}")
    force = bool(ctx.payload.get("force", False))
    return ctx.step("verify", lambda: verify_deployment(ctx, dep_id, raw, force=force))
