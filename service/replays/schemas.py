"""Request/response bodies of /api/v1/deployments/{id}/replays and /api/v1/deployments/{id}/fidelity."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from control.common import RequestBody
from control.jobspec import ARM_NAME_PATTERN, MAX_ARMS, ReplayOptions

__all__ = ["FidelityOut", "FidelityRecordOut", "ReplayArm", "ReplayCreate"]


class ReplayArm(RequestBody):
    """One config under test: its arm's name and its SPEC (`current`, `recommended`, `recommended@JOB`,
    `version:N`, or a config as `tailtune tune --current` takes it: `stock:speculative_retry=NEVER`)."""

    name: str = Field(pattern=ARM_NAME_PATTERN, description="The arm's name, [A-Za-z0-9_-]{1,64}.")
    spec: str = Field(min_length=1, max_length=2000, description="What config the arm runs (docs/replay.md).")


class ReplayCreate(ReplayOptions):
    """A live replay of the deployment (`tailtune replay`'s options): the worker runs it as a `replay` job."""

    configs: list[ReplayArm] = Field(
        min_length=2, max_length=MAX_ARMS, description="The configs side by side, the first the baseline.")

    @model_validator(mode="after")
    def _distinct(self) -> ReplayCreate:
        names = [a.name for a in self.configs]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must be distinct: {', '.join(names)}")
        return self

    def payload(self) -> dict[str, Any]:
        """The replay job's payload (`control.jobspec.ReplayPayload`): configs as `[[name, SPEC], ...]`."""
        out = self.model_dump(exclude={"configs"})
        out["configs"] = [[a.name, a.spec] for a in self.configs]
        return out


class FidelityRecordOut(BaseModel):
    """One stored live replay (`control.fidelity_store.record_out`)."""

    id: int
    deployment_id: int
    job_id: int | None
    source: str
    at: float = Field(description="When the replay ran, epoch seconds.")
    flag: str | None = Field(description="Why the record is kept but not pooled (lag_too_high); null: pooled.")
    pooled: bool
    arms: int
    duration_s: float
    blocks: int
    agreement: dict[str, int] = Field(description="This replay's p99 sign agreement: k of the m resolved pairs.")
    contradicts: bool = Field(description="A resolved pair whose predicted difference had the other sign.")
    report: dict[str, Any] = Field(description="The replay's report (ReplayReport.as_dict(), docs/replay.md).")


class FidelityOut(BaseModel):
    """The model's fidelity on the deployment, pooled over its stored replays, and the newest of them."""

    summary: dict[str, Any] = Field(description="control.fidelity_store.summary (docs/replay.md § Fidelity).")
    records: list[FidelityRecordOut]
