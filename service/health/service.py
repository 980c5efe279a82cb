"""Readiness checks. `ready` needs the DB, a live worker and the MLflow store; targets are reported alongside.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import func, select, text

from service.health.schemas import Check, Readiness
from tailtune.base.settings import Settings
from tailtune.control.db import Database, DeploymentRow, WorkerRow

__all__ = ["check_db", "check_mlflow", "check_targets", "check_worker", "readiness"]


def check_db(db: Database) -> Check:
    try:
        with db.session() as s:
            s.execute(text("SELECT 1"))
    except Exception as exc:
        return Check(name="database", ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Check(name="database", ok=True, detail=db.engine.dialect.name)


def check_worker(db: Database, settings: Settings) -> Check:
    limit = settings.worker_lease_s + 3 * settings.worker_poll_s
    try:
        with db.session() as s:
            newest = s.scalar(select(func.max(WorkerRow.heartbeat_at)))
    except Exception as exc:
        return Check(name="worker", ok=False, detail=f"{type(exc).__name__}: {exc}")
    if newest is None:
        return Check(name="worker", ok=False, detail="no worker has ever run (start `tailtune worker`)")
    age = time.time() - newest
    return Check(name="worker", ok=age <= limit, detail=f"last heartbeat {age:.1f}s ago (limit {limit:.0f}s)")


def check_mlflow(settings: Settings) -> Check:
    uri = settings.resolved_mlflow_tracking_uri
    try:
        if uri.startswith(("http://", "https://")):
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=2) as resp:
                ok = resp.status == 200
            return Check(name="mlflow", ok=ok, detail=f"{uri} answered {resp.status}")
        path = Path(uri.split(":///", 1)[1] if ":///" in uri else uri.removeprefix("file:"))
        folder = path if uri.startswith("file:") or path.is_dir() else path.parent
        folder.mkdir(parents=True, exist_ok=True)
        ok = os.access(folder, os.W_OK)
        return Check(name="mlflow", ok=ok, detail=f"{uri} ({'writable' if ok else 'not writable'})")
    except Exception as exc:
        return Check(name="mlflow", ok=False, detail=f"{uri}: {type(exc).__name__}: {exc}")


def _tcp(name: str, endpoints: list[tuple[str, int]], timeout: float) -> Check:
    bad = []
    for host, port in endpoints:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as exc:
            bad.append(f"{host}:{port} ({exc})")
    if not endpoints:
        return Check(name=name, ok=False, detail="no endpoints configured")
    return Check(name=name, ok=not bad, detail="unreachable: " + ", ".join(bad) if bad else "reachable")


def check_targets(db: Database, timeout: float = 1.0) -> list[Check]:
    """TCP reachability of every endpoint of every deployment (in parallel)."""
    with db.session() as s:
        deps = [(d.name, d.kind, dict(d.connection)) for d in s.scalars(select(DeploymentRow))]
    jobs: list[tuple[str, list[tuple[str, int]]]] = []
    for name, kind, conn in deps:
        if kind == "cassandra":
            eps = [(h, int(conn.get("port", 9042))) for h in conn.get("contact_points", [])]
        else:
            eps = [
                (s.rpartition(":")[0].strip("[]"), int(s.rpartition(":")[2])) for s in conn.get("servers", [])
            ]
        jobs.append((f"{name} ({kind})", eps))
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
        return list(pool.map(lambda j: _tcp(j[0], j[1], timeout), jobs))


def readiness(db: Database, settings: Settings) -> Readiness:
    checks = [check_db(db), check_worker(db, settings), check_mlflow(settings)]
    targets = check_targets(db) if checks[0].ok else []
    return Readiness(ready=all(c.ok for c in checks), checks=checks, targets=targets)
