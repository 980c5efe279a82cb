"""The nightly job's capture: its trace taken from the deployment's memcached servers instead of an upload.

`capture_trace` watches every server of `connection.servers` for `capture.duration_s` seconds into one
memcached-watch file (`control.capture`), connecting only to addresses the egress rules allow
(`control.egress`, resolved by the worker), and registers the file as a trace of the deployment (name
`capture-job<id>`, format `memcached-watch`), which the ingest step then ingests like an upload. A retried step
reuses the trace of its job's earlier attempt unless that one failed; a cancel stops the capture at once and keeps
nothing.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import select

from base.errors import BadInputError
from control.capture import (
    CaptureDiskFull,
    CaptureFailed,
    CaptureTarget,
    capture_memcached,
    parse_server,
    stats_caps,
)
from control.common import now
from control.db import DeploymentRow, TraceRow
from control.egress import Egress, EgressRefused, EgressUnresolved
from control.jobspec import CaptureOptions
from control.storage import storage_full
from jobs.context import JobContext, JobFailed

__all__ = ["capture_trace"]

FORMAT = "memcached-watch"


def _targets(ctx: JobContext, servers: list[str]) -> list[CaptureTarget]:
    egress = Egress.of(ctx.settings)
    targets = []
    for server in servers:
        try:
            host, port = parse_server(server)
            address = egress.resolve(host, port)[0]
        except EgressUnresolved as exc:  # it may resolve later: the job is retried
            raise CaptureFailed(f"memcached {server}: {exc}", permanent=False) from None
        except EgressRefused as exc:
            raise JobFailed(f"capture: memcached {server}: {exc}") from None
        except BadInputError:  # a server the API would not have accepted (written straight into the DB)
            raise JobFailed(f"capture: connection.servers: expected HOST:PORT, got {server!r}") from None
        targets.append(CaptureTarget(server, address, port))
    return targets


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
    """Capture the deployment's memcached servers; returns the trace id to ingest and what the capture saw."""
    name = f"capture-job{ctx.job_id}"
    earlier = _earlier(ctx, dep_id, name)
    if earlier is not None:
        ctx.log(f"capture: trace {earlier} of an earlier attempt is reused")
        return earlier, {"reused": True}
    with ctx.db.session() as s:
        dep = s.get(DeploymentRow, dep_id)
        if dep is None:
            raise JobFailed(f"deployment {dep_id} no longer exists")
        kind, servers = dep.kind, [str(x) for x in (dep.connection or {}).get("servers", [])]
    if kind != "memcached":
        raise JobFailed(f"capture: only a memcached deployment can be captured, not a {kind} one")
    if not servers:
        raise JobFailed("capture: the deployment has no connection.servers to capture")
    targets = _targets(ctx, servers)
    final = ctx.settings.home_dir / "uploads" / f"{uuid.uuid4().hex}.trace"
    stop = threading.Event()
    ctx.log(f"capture: watching {', '.join(servers)} for {opts.duration_s:g} s")
    try:
        with ctx.on_stop(stop.set):  # a cancel (or the time budget) ends the capture at once
            result = capture_memcached(
                targets,
                final,
                duration_s=opts.duration_s,
                stop=stop,
                timeout_s=ctx.settings.capture_timeout_s,
                max_bytes=ctx.settings.capture_max_bytes,
                max_line=ctx.settings.capture_max_line_bytes,
                stats_caps=stats_caps(ctx.settings),
                gap_us=ctx.settings.memcached_watch_gap_us,
            )
    except CaptureDiskFull as exc:  # the path as the API shows paths: relative to TAILTUNE_HOME
        raise JobFailed(f"capture: {storage_full(ctx.settings, exc.cause, exc.path)}") from None
    except CaptureFailed as exc:
        if exc.permanent:
            raise JobFailed(f"capture: {exc}") from None
        raise
    if ctx.stop_reason is not None:
        final.unlink(missing_ok=True)
        raise ctx.stop_reason
    seen = result.as_dict()
    ctx.log(
        f"capture: {result.seconds:g} s ({result.stopped}), {result.lines:,} watch lines, {result.fetches:,} "
        f"fetches, {result.requests:,} requests, {result.lost:,} lines lost"
    )
    if result.lost:
        ctx.log(
            f"warning: the watch lost {result.lost:,} line(s) (memcached skipped {result.skipped:,}, its worker "
            f"threads dropped {result.dropped:,}): the trace misses their fetches"
        )
    for server in result.closed:
        ctx.log(f"warning: {server} closed the watch before the end of the capture")
    if result.fetches == 0:
        final.unlink(missing_ok=True)
        raise JobFailed(
            f"capture: no get/gets reached {', '.join(servers)} in {result.seconds:g} s: nothing to tune on"
        )
    trace_id = _register(ctx, dep_id, name, final, result.bytes)
    ctx.log(f"capture: trace {trace_id} ({name})")
    kept = ("servers", "seconds", "stopped", "lines", "fetches", "requests", "skipped", "dropped", "lost", "complete",
            "closed", "gap_us")
    return trace_id, {k: seen[k] for k in kept}


def _register(ctx: JobContext, dep_id: int, name: str, path: Path, size: int) -> int:
    from ingest.pipeline import sha256_file

    try:
        with ctx.db.session() as s:
            row = TraceRow(
                name=name,
                deployment_id=dep_id,
                format=FORMAT,
                size_bytes=size,
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
