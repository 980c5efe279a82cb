"""Analyses: trigger (an `analyze` job), list, show, and the two output files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from base.settings import Settings
from control.common import now
from control.db import AnalysisRow, TraceRow
from control.queue import enqueue
from service.analyses.schemas import AnalysisCreate
from service.errors import Conflict, Missing

__all__ = ["OUTPUTS", "analysis_dir", "create", "get", "list_all", "output_file"]

OUTPUTS = ("summary.json", "report.html")


def analysis_dir(settings: Settings, analysis_id: int) -> Path:
    return settings.home_dir / "analyses" / str(analysis_id)


def create(s: Session, settings: Settings, body: AnalysisCreate) -> AnalysisRow:
    dataset_id = body.dataset_id
    if body.trace_id is not None:
        trace = s.get(TraceRow, body.trace_id)
        if trace is None:
            raise Missing(f"trace {body.trace_id} not found", field="trace_id")
        if trace.dataset_id is None:
            raise Conflict(f"trace {trace.id} is {trace.status}, not ingested yet", field="trace_id")
        dataset_id = trace.dataset_id
    else:
        from ingest.store import DatasetStore

        assert dataset_id is not None
        if DatasetStore(settings).find(dataset_id) is None:
            raise Missing(f"dataset {dataset_id} not found", field="dataset_id")
    assert dataset_id is not None
    row = AnalysisRow(
        trace_id=body.trace_id,
        dataset_id=dataset_id,
        options={"servers": body.servers, "replication": body.replication},
        status="queued",
        out_dir="",
        error=None,
        created_at=now(),
    )
    s.add(row)
    s.flush()
    row.out_dir = str(analysis_dir(settings, row.id))
    job = enqueue(s, settings, "analyze", {"analysis_id": row.id})
    row.job_id = job.id
    s.flush()
    return row


def get(s: Session, analysis_id: int) -> AnalysisRow:
    row = s.get(AnalysisRow, analysis_id)
    if row is None:
        raise Missing(f"analysis {analysis_id} not found", field="analysis_id")
    return row


def list_all(s: Session, *, limit: int = 100, offset: int = 0) -> Sequence[AnalysisRow]:
    return s.scalars(select(AnalysisRow).order_by(AnalysisRow.id.desc()).limit(limit).offset(offset)).all()


def output_file(s: Session, analysis_id: int, name: str) -> Path:
    row = get(s, analysis_id)
    if row.status != "succeeded":
        raise Conflict(f"analysis {analysis_id} is {row.status}", field="analysis_id")
    path = Path(row.out_dir) / name
    if name not in OUTPUTS or not path.is_file():
        raise Missing(f"{name} of analysis {analysis_id} not found", field="analysis_id")
    return path
