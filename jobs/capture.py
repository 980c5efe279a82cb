"""The nightly job's capture: its trace taken from the deployment's live system instead of an upload.

`capture_trace` takes it from where `capture.source` says:

* `watch` (or `fql`): the deployment's kind captures its servers for `capture.duration_s` seconds
  (`DeploymentKind.capture`, the kind's `capture_source`: memcached watches every server of `connection.servers`
  into one memcached-watch file, `kinds.memcached.capture`), connecting only to addresses the egress rules allow
  (`control.egress`, resolved by the worker);
* `clients`: the application's requests as its clients recorded them before reshaping them — the `tailtune-client`
  traces the clients (`tailtune_client.capture.RequestCapture`, `deployment_id` set) upload to `POST /traces`
  during the `capture.duration_s` seconds (`_from_clients`): each upload's dataset (an upload still waiting for its
  own ingest job is ingested here from its file, into the same dataset that job then finds; one another job is
  ingesting is awaited at most `capture_clients_wait_s`), merged into one trace in time order with request ids kept
  apart. A client uploads what it sampled since its previous upload, so the trace covers about the capture's
  seconds plus the clients' upload interval before them. No upload in the window fails the job, saying what a
  client needs.

Either way the file is registered as a trace of the deployment (name `capture-job<id>`, in the format written),
which the ingest step then ingests like an upload. A kind that cannot be captured that way fails the job, naming
the kinds that can. A retried step reuses the trace of its job's earlier attempt unless that one failed; a cancel
stops the capture at once and keeps nothing.
"""

from __future__ import annotations

import shutil
import threading
import time
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

#: The trace format the clients upload (`ingest.formats.tailtune_client`).
CLIENT_FORMAT = "tailtune-client"

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
        return earlier, {"reused": True, "source": opts.source}
    with ctx.db.session() as s:
        dep = s.get(DeploymentRow, dep_id)
        if dep is None:
            raise JobFailed(f"deployment {dep_id} no longer exists")
        kind, target = dep.kind, Target.of(dep, Egress())
    ops = operations(kind)
    if opts.source == "clients":
        if not ops.client_captures:
            raise JobFailed(f"capture: a {kind} deployment's clients record no requests")
        return _from_clients(ctx, dep_id, name, opts)
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
    return trace_id, {"source": opts.source, **captured.seen}


#: The columns a merged client capture keeps (those its datasets have).
_CLIENT_COLUMNS = ("request_id", "ts", "key", "value_size", "op", "client_id", "latency_us", "table")


def _uploads(ctx: JobContext, dep_id: int, start: float, end: float) -> list[int]:
    with ctx.db.session() as s:
        return [int(t) for t in s.scalars(
            select(TraceRow.id)
            .where(TraceRow.deployment_id == dep_id, TraceRow.format == CLIENT_FORMAT,
                   TraceRow.created_at >= start, TraceRow.created_at <= end, TraceRow.status != "failed")
            .order_by(TraceRow.created_at, TraceRow.id)
        )]


def _dataset_of(ctx: JobContext, trace_id: int, deadline: float) -> str | None:
    """The dataset of one client upload: its own (ready), or made here from its file (still uploaded), or awaited
    (another job ingests it); None when it failed or was deleted."""
    from ingest.pipeline import ingest_file

    while True:
        with ctx.db.session() as s:
            row = s.get(TraceRow, trace_id)
            if row is None or row.status == "failed":
                return None
            status, dataset, upload, name = row.status, row.dataset_id, row.upload_path, row.name
        if status == "ready" and dataset is not None:
            return dataset
        if status == "uploaded" and upload is not None:
            copy = ctx.settings.home_dir / "uploads" / f".capture-{uuid.uuid4().hex}.part"
            try:
                with open(upload, "rb") as src, copy.open("wb") as dst:  # open: readable even once unlinked
                    shutil.copyfileobj(src, dst)
            except FileNotFoundError:  # its own job ingested it meanwhile: look again
                copy.unlink(missing_ok=True)
                continue
            try:
                return ingest_file(copy, fmt=CLIENT_FORMAT, name=name, settings=ctx.settings).id
            finally:
                copy.unlink(missing_ok=True)
        if time.time() > deadline:
            raise CaptureFailed(f"the client upload trace {trace_id} is still being ingested after "
                                f"{ctx.settings.capture_clients_wait_s:g} s (capture_clients_wait_s)", permanent=False)
        ctx.check_cancel()
        time.sleep(0.2)


def _from_clients(ctx: JobContext, dep_id: int, name: str, opts: CaptureOptions) -> tuple[int, dict[str, Any]]:
    """The `tailtune-client` uploads of the capture's window merged into one trace (the module doc)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ingest.store import DatasetStore

    start = time.time()
    ctx.log(f"capture: taking the application's requests its clients upload for {opts.duration_s:g} s")
    stop = threading.Event()
    with ctx.on_stop(stop.set):
        stop.wait(opts.duration_s)
    if ctx.stop_reason is not None:
        raise ctx.stop_reason
    end = time.time()
    uploads = _uploads(ctx, dep_id, start, end)
    if not uploads:
        raise JobFailed(
            f"capture: no client uploaded a {CLIENT_FORMAT} trace of deployment {dep_id} during the "
            f"{opts.duration_s:g} s (a RequestCapture with deployment_id={dep_id} and upload_url .../api/v1/traces, "
            "uploading more often than the capture lasts)"
        )
    deadline = end + ctx.settings.capture_clients_wait_s
    store = DatasetStore(ctx.settings)
    tables: list[pa.Table] = []
    notes: list[str] = []
    clients: set[str] = set()
    rows = offset = 0
    left_out: list[int] = []
    for trace_id in uploads:
        dataset = _dataset_of(ctx, trace_id, deadline)
        info = store.find(dataset) if dataset is not None else None
        if info is None:
            left_out.append(trace_id)
            continue
        table = info.read_table()
        rows += table.num_rows
        if ctx.settings.ingest_max_rows and rows > ctx.settings.ingest_max_rows:
            raise JobFailed(f"capture: the clients' uploads hold more than {ctx.settings.ingest_max_rows:,} rows "
                            "(ingest_max_rows)")
        if table.num_rows:
            ids = table.column("request_id")
            table = table.set_column(table.schema.get_field_index("request_id"), "request_id",
                                     pc.add(ids, pa.scalar(offset, pa.int64())))
            offset += int(pc.max(ids).as_py()) + 1
            clients.update(str(c) for c in table.column("client_id").unique().to_pylist() if c is not None)
            tables.append(table.select([c for c in _CLIENT_COLUMNS if c in table.column_names]))
        notes.extend(n for n in info.manifest.get("notes", []) if isinstance(n, str) and n.startswith("LOST"))
    if not tables:
        raise JobFailed(f"capture: the {len(uploads)} client upload(s) of the window hold no request")
    merged = pa.concat_tables(tables, promote_options="default")
    merged = merged.take(pc.sort_indices(merged, [("ts", "ascending"), ("request_id", "ascending")]))
    final = ctx.settings.home_dir / "uploads" / f"{uuid.uuid4().hex}.trace"
    tmp = final.with_name(f".{final.name}.part")
    try:
        pq.write_table(merged, tmp)
        tmp.rename(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    requests = int(pc.count_distinct(merged.column("request_id")).as_py())
    seen: dict[str, Any] = {"source": "clients", "seconds": round(end - start, 3), "uploads": len(uploads),
                            "left_out": left_out, "clients": len(clients), "requests": requests,
                            "rows": merged.num_rows, "lost": notes}
    ctx.log(f"capture: {len(uploads)} upload(s) of {len(clients)} client(s): {requests:,} request(s)"
            + (f"; left out (failed or deleted): traces {left_out}" if left_out else ""))
    for note in notes:
        ctx.log(f"capture: {note}")
    captured = Captured(format="parquet", bytes=final.stat().st_size, seen=seen)
    trace_id = _register(ctx, dep_id, name, final, captured)
    ctx.log(f"capture: trace {trace_id} ({name})")
    return trace_id, seen


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
