"""The `calibrate` job: measure the deployment's service time and network (Cassandra) or client overhead
(memcached) on the live system and store them as calibrated model inputs (`control.calibration`).

Like `discover`, the API enqueues it (`POST /api/v1/deployments/{id}/calibrate`) rather than connecting itself to
hosts a write token named; the worker measures under the egress rules.
"""

from __future__ import annotations

from typing import Any

from control.calibration import calibrate_deployment
from control.discovery import DiscoveryFailed
from control.errors import Missing
from jobs.context import JobContext, JobFailed

__all__ = ["run_calibrate"]


def run_calibrate(ctx: JobContext) -> dict[str, Any]:
    if ctx.deployment_id is None:
        raise JobFailed("a calibrate job needs a deployment")
    dep_id = ctx.deployment_id

    def step() -> dict[str, Any]:
        try:
            return calibrate_deployment(ctx.db, ctx.settings, dep_id, log=ctx.log)
        except DiscoveryFailed as exc:
            if exc.permanent:
                raise JobFailed(str(exc)) from None
            raise
        except Missing as exc:
            raise JobFailed(exc.detail) from None

    return ctx.step("calibrate", step)
