"""The `discover` job: read the deployment's live system and store its model (`control.discovery`).

The API enqueues it (`POST /api/v1/deployments/{id}/discover`) rather than connecting itself to hosts a write
token named; the worker connects under the egress rules. A refused login, a missing permission, a rule or an
unsupported version fails the job at once; a node that does not answer is retried with the job backoff.
"""

from __future__ import annotations

from typing import Any

from control.discovery import DiscoveryFailed, discover_deployment
from control.errors import Missing
from jobs.context import JobContext, JobFailed

__all__ = ["run_discover"]


def run_discover(ctx: JobContext) -> dict[str, Any]:
    if ctx.deployment_id is None:
        raise JobFailed("a discover job needs a deployment")
    dep_id = ctx.deployment_id
    profile = bool(ctx.payload.get("profile_servers", False))

    def step() -> dict[str, Any]:
        try:
            return discover_deployment(ctx.db, ctx.settings, dep_id, profile_servers=profile, log=ctx.log)
        except DiscoveryFailed as exc:
            if exc.permanent:
                raise JobFailed(str(exc)) from None
            raise
        except Missing as exc:  # deleted meanwhile
            raise JobFailed(exc.detail) from None

    return ctx.step("discover", step)
