"""Traces: register a finished upload (+ its ingest job), list, show, delete."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath

from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.orm import Session

from base.settings import Settings
from control.common import MAX_ID, now
from control.db import AnalysisRow, Database, DeploymentRow, TraceRow
from control.queue import enqueue, stop_job
from ingest.formats import format_choices
from service.errors import Invalid, Missing
from service.traces.schemas import TraceDetail, TraceOut
from service.traces.upload import Received

__all__ = [
    "check_format",
    "check_id",
    "clean_name",
    "delete",
    "get",
    "list_all",
    "register_upload",
    "show",
    "upload_paths",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_format(fmt: str) -> str:
    """An upload's `format`: `auto` or a format of the registry (`ingest.formats.READERS`)."""
    formats = format_choices()
    if fmt not in formats:
        raise Invalid(f"unknown format {fmt!r}; one of {', '.join(formats)}", field="format")
    return fmt


def check_id(raw: str, field: str) -> int:
    """A form field that names a row: decimal digits within the DB's id range."""
    if not re.fullmatch(r"[0-9]{1,10}", raw.strip()) or not 1 <= int(raw) <= MAX_ID:
        raise Invalid(f"must be an integer id in 1..{MAX_ID}", field=field)
    return int(raw)


def clean_name(name: str | None, filename: str | None) -> str:
    """The trace's display name: the given name, else the client's file name without folders. Only a label."""
    raw = name if name not in (None, "") else filename
    if raw is None or raw.strip() == "":
        return "upload"
    if name in (None, ""):
        raw = PureWindowsPath(PurePosixPath(raw).name).name
    raw = raw.strip()
    if len(raw) > 200 or _CONTROL.search(raw):
        raise Invalid("name must be 1..200 printable characters", field="name")
    return raw


def upload_paths(settings: Settings) -> tuple[Path, Path]:
    """(temporary path while streaming, final path): server-chosen, never derived from the client's name."""
    token = uuid.uuid4().hex
    return settings.tmp_dir / f"upload-{token}.part", settings.home_dir / "uploads" / f"{token}.trace"


def register_upload(
    db: Database,
    settings: Settings,
    tmp: Path,
    final: Path,
    received: Received,
    *,
    name: str,
    fmt: str,
    deployment_id: int | None,
) -> TraceOut:
    """Move the finished upload in place and record it with its ingest job — all or nothing."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        with db.session() as s:
            if deployment_id is not None and s.get(DeploymentRow, deployment_id) is None:
                raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
            row = TraceRow(
                name=name,
                deployment_id=deployment_id,
                format=fmt,
                size_bytes=received.size,
                sha256=received.sha256,
                status="uploaded",
                upload_path=str(final),
                dataset_id=None,
                error=None,
                created_at=now(),
            )
            s.add(row)
            s.flush()
            job = enqueue(s, settings, "ingest", {"trace_id": row.id}, deployment_id=deployment_id)
            row.job_id = job.id
            tmp.replace(final)
            s.flush()
            out = TraceOut.of(row)
    except BaseException:
        tmp.unlink(missing_ok=True)
        final.unlink(missing_ok=True)
        raise
    return out


def get(s: Session, trace_id: int) -> TraceRow:
    row = s.get(TraceRow, trace_id)
    if row is None:
        raise Missing(f"trace {trace_id} not found", field="trace_id")
    return row


def list_all(
    s: Session, deployment_id: int | None = None, *, limit: int = 100, offset: int = 0
) -> Sequence[TraceRow]:
    q = select(TraceRow).order_by(TraceRow.id.desc()).limit(limit).offset(offset)
    if deployment_id is not None:
        q = q.where(TraceRow.deployment_id == deployment_id)
    return s.scalars(q).all()


def show(s: Session, settings: Settings, trace_id: int) -> TraceDetail:
    row = get(s, trace_id)
    detail = TraceDetail(**TraceOut.of(row).model_dump())
    if row.dataset_id is not None:
        from ingest.store import DatasetStore

        info = DatasetStore(settings).find(row.dataset_id)
        detail.manifest = info.manifest if info is not None else None
    analyses = s.scalars(select(AnalysisRow).where(AnalysisRow.trace_id == trace_id).order_by(AnalysisRow.id))
    detail.analyses = [{"id": a.id, "status": a.status, "error": a.error} for a in analyses]
    return detail


def delete(s: Session, settings: Settings, trace_id: int) -> None:
    """Delete the trace, its upload file, and its dataset unless another trace still uses it.

    The row goes first, in one `DELETE ... RETURNING`, so what is cleaned up is exactly what the row held at
    that moment. An ingest that finishes after it finds no row to mark ready and removes the dataset it made
    (jobs/nightly.py); the trace's queued or running ingest job is cancelled.
    """
    gone = s.execute(
        sql_delete(TraceRow)
        .where(TraceRow.id == trace_id)
        .returning(TraceRow.dataset_id, TraceRow.upload_path, TraceRow.job_id)
    ).first()
    if gone is None:
        raise Missing(f"trace {trace_id} not found", field="trace_id")
    dataset_id, upload_path, job_id = gone
    if upload_path:
        Path(upload_path).unlink(missing_ok=True)
    if job_id is not None:
        stop_job(s, job_id, "its trace was deleted")
    if dataset_id is not None:
        others = s.scalar(select(TraceRow.id).where(TraceRow.dataset_id == dataset_id).limit(1))
        if others is None:
            from ingest.store import DatasetStore

            store = DatasetStore(settings)
            if store.find(dataset_id) is not None:
                store.delete(dataset_id)
    s.flush()
