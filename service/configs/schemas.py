"""Request/response bodies of /api/v1/configs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from control.common import DbId, RequestBody, to_dt
from control.configs import ConfigDiff
from control.db import ConfigVersionRow
from control.verify import STATUSES

__all__ = ["ConfigCreate", "ConfigDiff", "ConfigOut", "PublishRequest", "RollbackRequest"]


class ConfigOut(BaseModel):
    deployment_id: int
    version: int
    config: dict[str, Any]
    source: str
    job_id: int | None
    note: str | None
    published: dict[str, Any]
    created_at: datetime | None
    #: The deployment's server, driver and tables when the version was added (Cassandra; None before they
    #: existed, and for memcached).
    applies_to: dict[str, Any] | None = None
    #: What the verify step found (status, test, before/after/expected figures, reason, at); None before any
    #: check of a version that stores no expectation (control/verify.py).
    verification: dict[str, Any] | None = None
    #: `verification.status`, one of `control.verify.STATUSES` (None before any check).
    verification_status: str | None = Field(default=None, json_schema_extra={"enum": [*STATUSES, None]})
    #: The figures the version was published on beyond the model's: `confirm`, the live replay of current against
    #: this config at the deployment's `confirm_on` (arms, observed and predicted p99, the p99 comparison with its
    #: interval, method, duration, blocks, the gate); None when the model alone stood behind it.
    evidence: dict[str, Any] | None = None

    @classmethod
    def of(cls, r: ConfigVersionRow) -> ConfigOut:
        return cls(
            deployment_id=r.deployment_id,
            version=r.version,
            config=r.config,
            source=r.source,
            job_id=r.job_id,
            note=r.note,
            published=r.published,
            created_at=to_dt(r.created_at),
            applies_to=r.applies_to,
            verification=r.verification,
            verification_status=(r.verification or {}).get("status"),
            evidence=r.evidence,
        )


class ConfigCreate(RequestBody):
    """A manually accepted config: becomes the next version and (by default) is published."""

    config: dict[str, Any] = Field(
        description="{'policy': NAME, 'params': {...}}: a policy of the deployment's kind and its parameters."
    )
    note: str | None = Field(default=None, max_length=2000)
    publish: bool = True


class PublishRequest(RequestBody):
    version: DbId | None = Field(default=None, description="Default: the latest version.")


class RollbackRequest(RequestBody):
    version: DbId = Field(description="The earlier version whose config becomes the new latest version.")
    note: str | None = Field(default=None, max_length=2000)
    publish: bool = True
