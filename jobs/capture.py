"""The nightly job's capture: its trace taken from the deployment's live system instead of an upload.

`capture_trace` has the deployment's kind capture it for `capture.duration_s` seconds (`DeploymentKind.capture`:
memcached watches every server of `connection.servers` into one memcached-watch file, `kinds.memcached.capture`),
connecting only to addresses the egress rules allow (`control.egress`, resolved by the worker), and registers
the file as a trace of the deployment (name `capture-job<id>`, in the format the kind wrote), which the ingest step
then ingests like an upload. A kind that cannot be captured fails the job, naming the kinds that can. A retried step
reuses the trace of its job's earlier attempt unless that one failed; a cancel stops the capture at once and keeps
nothing.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select

from control.common import now
from control.db import DeploymentRow, TraceRow
from control.egress import Egress
from control.jobspec import CaptureOptions
from control.kind import Captured, CaptureDiskFull, CaptureFailed, Target, Unsupported
from control.kinds import operations
from control.storage import storage_full
from jobs.context import JobContext, JobFailed

__all__ = ["capture_trace"]


def _earlier(ctx: JobContext, dep_id: int, name: str) -> int | None:
    """The capture trace an earlier attempt of this job registered, unless it failed."""
    with ctx.db.session() as s:
        return s.scalar(
            select(TraceRow.id).where(
                TraceRow.deployment_id == dep_id,
                TraceRow.job_id == ctx.job_id,
                TraceRow.name == name,
                TraceRow.status != "failed",
            )
        )


def capture_trace(ctx: JobContext, dep_id: int, opts: CaptureOptions) -> tuple[int, dict[str, Any]]:
    """Capture the deployment's live system; returns the trace id to ingest and what the capture saw."""
    name = f"capture-job{ctx.job_id}"
    earlier = _earlier(ctx, dep_id, name)
    if earlier is not None:
        ctx.log(f"capture: trace {earlier} of an earlier attempt is reused")
        return earlier, {"reused": True}
    with ctx.db.session() as s:
        dep = s.get(DeploymentRow, dep_id)
        if dep is None:
            raise JobFailed(f"deployment {dep_id} no longer exists")
        kind, target = dep.kind, Target.of(dep, Egress())
    ops = operations(kind)
    if not ops.captures:
        raise JobFailed(f"capture: {Unsupported(kind, 'capture').detail}")
    target = replace(target, egress=Egress.of(ctx.settings))
    final = ctx.settings.home_dir / "uploads" / f"{uuid.uuid4().hex}.trace"
    stop = threading.Event()
    try:
        with ctx.on_stop(stop.set):  # a cancel (or the time budget) ends the capture at once
            captured = ops.capture(target, final, duration_s=opts.duration_s, stop=stop, settings=ctx.settings,
                                   log=ctx.log)
    except CaptureDiskFull as exc:  # the path as the API shows paths: relative to TAILTUNE_HOME
        raise JobFailed(f"capture: {storage_full(ctx.settings, exc.cause, exc.path)}") from None
    except CaptureFailed as exc:
        if exc.permanent:
            raise JobFailed(f"capture: {exc}") from None
        raise
    if ctx.stop_reason is not None:
        final.unlink(missing_ok=True)
        raise ctx.stop_reason
    for line in captured.report:
        ctx.log(line)
    if captured.nothing is not None:
        final.unlink(missing_ok=True)
        raise JobFailed(f"capture: {captured.nothing}")
    trace_id = _register(ctx, dep_id, name, final, captured)
    ctx.log(f"capture: trace {trace_id} ({name})")
    return trace_id, dict(captured.seen)


def _register(ctx: JobContext, dep_id: int, name: str, path: Path, captured: Captured) -> int:
    from ingest.pipeline import sha256_file

    try:
        with ctx.db.session() as s:
            row = TraceRow(
                name=name,
                deployment_id=dep_id,
                format=captured.format,
                size_bytes=captured.bytes,
                sha256=sha256_file(path),
                status="uploaded",
                upload_path=str(path),
                dataset_id=None,
                error=None,
                job_id=ctx.job_id,
                created_at=now(),
            )
            s.add(row)
            s.flush()
            return int(row.id)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
