"""Starting a live replay (checked at the door, run by the worker) and reading a deployment's fidelity."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from base.settings import Settings
from control import deployments, fidelity_store
from control.db import JobRow
from control.errors import Conflict, Missing
from control.grants import REPLAY_ALLOWED, granted, replay_grant_problem
from control.jobspec import check_replay_limits
from control.queue import enqueue
from service.replays.schemas import FidelityOut, FidelityRecordOut, ReplayCreate

__all__ = ["fidelity", "start"]


def start(s: Session, settings: Settings, deployment_id: int, body: ReplayCreate) -> JobRow:
    """A queued `replay` job of the deployment: 404 for an unknown deployment or dataset, 409 for a deployment
    that does not allow the live replay (or whose admin record disagrees), 422 for a duration over the limit."""
    from base.errors import NotFoundError
    from ingest.store import DatasetStore

    dep = deployments.get(s, deployment_id)
    problem = replay_grant_problem(bool(dep.replay_allowed), granted(s, dep.id, REPLAY_ALLOWED))
    if problem is not None:
        raise Conflict(f"deployment {dep.name!r}: {problem}", field="replay_allowed")
    check_replay_limits(body, settings)
    try:
        DatasetStore(settings).get(body.dataset)
    except NotFoundError:
        raise Missing(f"no dataset {body.dataset!r}: `tailtune datasets list` shows them", field="dataset") from None
    return enqueue(s, settings, "replay", body.payload(), deployment_id=dep.id)


def fidelity(s: Session, deployment_id: int, *, limit: int, offset: int) -> FidelityOut:
    """The deployment's fidelity summary and a page of its records (newest first)."""
    deployments.get(s, deployment_id)
    summary: dict[str, Any] = fidelity_store.summary(s, deployment_id)
    rows = fidelity_store.list_records(s, deployment_id, limit=limit, offset=offset)
    return FidelityOut(summary=summary, records=[FidelityRecordOut(**fidelity_store.record_out(r)) for r in rows])
