"""/api/v1/deployments/{id}/observations: clients report what they observed (a `report` token suffices);
readers get expected vs observed p50/p95/p99 per config version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from control import observations
from service.auth import check_report_for
from service.deps import ReadAuth, ReportAuth, SessionDep, SettingsDep
from service.params import PathId

__all__ = ["router"]

router = APIRouter(prefix="/deployments", tags=["observations"])


@router.post("/{deployment_id}/observations")
def report(
    deployment_id: PathId, body: dict[str, Any], s: SessionDep, settings: SettingsDep, who: ReportAuth
) -> dict[str, int]:
    """Store a `tailtune_client` report (schema `tailtune.client.observations/1`), checked whole against the
    client's histogram scheme (422 naming the field); a resent window replaces the earlier one. A report token
    reports only for the deployments it is bound to."""
    check_report_for(who, s, deployment_id)
    return {"stored": observations.record(s, deployment_id, body, settings)}


@router.get("/{deployment_id}/observations")
def expected_vs_observed(deployment_id: PathId, s: SessionDep, _: ReadAuth) -> list[dict[str, Any]]:
    """Per config version: expected (from the tuning job behind it) vs observed (all clients merged); version 0
    is the clients' bootstrap config; `skipped` counts stored rows that could not be read (left out)."""
    return observations.summary(s, deployment_id)
