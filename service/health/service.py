"""Readiness checks. `ready` needs the DB, a live worker, the MLflow store, the Optuna storage and enough free
space under TAILTUNE_HOME (`min_free_bytes`); targets are reported alongside, each probed through the egress check
(`Egress.connect`: a name resolved once, checked, connected to at the checked address). Every detail is redacted
(no passwords) and every check is read-only (nothing is created).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote

from sqlalchemy import func, select, text

from base.db_url import normalize_url
from base.secrets import redact_url, scrub_fragments, url_secrets
from base.settings import Settings
from control.db import Database, DeploymentRow, WorkerRow
from control.egress import Egress, EgressRefused, EgressUnresolved
from control.kinds import operations
from control.redact import public, redact, settings_secrets
from control.storage import free_bytes
from service.errors import one_line
from service.health.schemas import Check, Readiness

__all__ = [
    "check_db",
    "check_disk",
    "check_mlflow",
    "check_optuna",
    "check_store",
    "check_targets",
    "check_worker",
    "readiness",
]


def check_db(db: Database) -> Check:
    try:
        with db.session() as s:
            s.execute(text("SELECT 1"))
    except Exception as exc:
        return Check(name="database", ok=False, detail=_why(exc))
    return Check(name="database", ok=True, detail=db.engine.dialect.name)


def _why(exc: BaseException) -> str:
    """One line about a failure, without credentials (the API's errors say the same: `service.errors.one_line`)."""
    return one_line(exc)


def check_worker(db: Database, settings: Settings) -> Check:
    limit = settings.worker_lease_s + 3 * settings.worker_poll_s
    try:
        with db.session() as s:
            newest = s.scalar(select(func.max(WorkerRow.heartbeat_at)))
    except Exception as exc:
        return Check(name="worker", ok=False, detail=_why(exc))
    if newest is None:
        return Check(name="worker", ok=False, detail="no worker has ever run (start `tailtune worker`)")
    age = time.time() - newest
    return Check(name="worker", ok=age <= limit, detail=f"last heartbeat {age:.1f}s ago (limit {limit:.0f}s)")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_store(name: str, uri: str, timeout_s: float = 2.0) -> Check:
    """Is a store (MLflow tracking, Optuna storage) usable? Checked for real and read-only: an HTTP server's
    /health answers, a database accepts a connection and `SELECT 1`, a file store's folder (or the nearest
    existing parent) is writable. Nothing is created; the detail never shows a password, nor a piece of one (the
    password is found by parsing the URL or DSN, and a driver that split it quotes only pieces)."""
    check = _check_store(name, uri, redact_url(uri), timeout_s)
    return check.model_copy(update={"detail": scrub_fragments(check.detail, url_secrets(uri))})


def _check_store(name: str, uri: str, shown: str, timeout_s: float) -> Check:
    try:
        if uri.startswith(("http://", "https://")):
            with urllib.request.urlopen(_http_health(uri), timeout=timeout_s) as resp:
                ok = resp.status == 200
            return Check(name=name, ok=ok, detail=f"{shown} answered {resp.status}")
        if "://" in uri and not uri.startswith(("file:", "sqlite:")):
            return _check_database(name, uri, shown, timeout_s)
        if uri.startswith("sqlite:"):
            raw = uri.split(":///", 1)[1] if ":///" in uri else ""
            path = Path(raw) if raw not in ("", ":memory:") else None
        else:
            path = Path(uri.removeprefix("file://").removeprefix("file:")).expanduser()
        if path is None:
            return Check(name=name, ok=True, detail=f"{shown} (in memory)")
        where = _nearest_existing(path.resolve())
        folder = where if where.is_dir() else where.parent
        ok = os.access(folder, os.W_OK)
        state = "exists" if path.exists() else "will be created"
        return Check(name=name, ok=ok, detail=f"{shown} ({state}; {'writable' if ok else 'not writable'})")
    except Exception as exc:
        return Check(name=name, ok=False, detail=f"{shown}: {_why(exc)}")


def _http_health(uri: str) -> urllib.request.Request:
    """A GET of `uri`'s /health, its user and password (if any) sent as Basic auth, never as part of the URL."""
    scheme, _, rest = uri.partition("://")
    at = rest.rfind("@")
    headers = {}
    if at >= 0:
        user, _, password = rest[:at].partition(":")
        rest = rest[at + 1:]
        token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    return urllib.request.Request(f"{scheme}://{rest.rstrip('/')}/health", headers=headers)


def _check_database(name: str, uri: str, shown: str, timeout_s: float) -> Check:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    url = normalize_url(uri)
    args = {"connect_timeout": max(1, int(timeout_s))} if url.startswith("postgresql") else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=args)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return Check(name=name, ok=False, detail=f"{shown}: {_why(exc)}")
    finally:
        engine.dispose()
    return Check(name=name, ok=True, detail=f"{shown} (connected)")


def check_mlflow(settings: Settings) -> Check:
    return check_store("mlflow", settings.resolved_mlflow_tracking_uri)


def check_optuna(settings: Settings) -> Check:
    return check_store("optuna", settings.resolved_optuna_storage)


def _reach(egress: Egress, name: str, endpoints: list[tuple[str, int]], timeout: float) -> Check:
    """One deployment's endpoints, each connected to through the egress check (`Egress.connect`: resolved
    once, checked, connected to at the checked address); one outside the allowed networks is reported, never
    connected to."""
    if not endpoints:
        return Check(name=name, ok=False, detail="no endpoints configured")
    outside, bad = [], []
    for host, port in endpoints:
        try:
            egress.connect(host, port, timeout).close()
        except EgressUnresolved as exc:
            bad.append(f"{host}:{port} ({redact(str(exc))})")
        except EgressRefused:
            outside.append(f"{host}:{port}")
        except OSError as exc:
            bad.append(f"{host}:{port} ({redact(str(exc))})")
    if outside:
        return Check(name=name, ok=False, detail="outside TAILTUNE_CONNECT_NETWORKS: " + ", ".join(outside))
    return Check(name=name, ok=not bad, detail="unreachable: " + ", ".join(bad) if bad else "reachable")


def check_targets(db: Database, timeout: float = 1.0, egress: Egress | None = None) -> list[Check]:
    """TCP reachability of every endpoint of every deployment (its kind's `endpoints`, in parallel); an endpoint
    outside the networks the egress rules allow is reported, never connected to."""
    egress = egress or Egress()
    with db.session() as s:
        deps = [(d.name, d.kind, dict(d.connection)) for d in s.scalars(select(DeploymentRow))]
    jobs: list[tuple[str, list[tuple[str, int]]]] = []
    for name, kind, conn in deps:
        eps = [(ep.host, ep.port) for ep in operations(kind).endpoints(conn)]  # the kind's own endpoints
        jobs.append((f"{name} ({kind})", eps))
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
        return list(pool.map(lambda j: _reach(egress, j[0], j[1], timeout), jobs))


def check_disk(settings: Settings) -> Check:
    """Free space of TAILTUNE_HOME's filesystem (uploads, datasets, scratch, the SQLite DB) against
    `min_free_bytes`."""
    need = settings.min_free_bytes
    try:
        free = free_bytes(settings.home_dir)
    except OSError as exc:
        return Check(name="disk", ok=False, detail=f"TAILTUNE_HOME: {_why(exc)}")
    ok = free >= need
    detail = f"TAILTUNE_HOME: {free} bytes free (minimum {need}, min_free_bytes)"
    return Check(name="disk", ok=ok, detail=detail if ok else f"{detail}; free space or move TAILTUNE_HOME")


def readiness(db: Database, settings: Settings) -> Readiness:
    checks = [
        check_db(db),
        check_worker(db, settings),
        check_mlflow(settings),
        check_optuna(settings),
        check_disk(settings),
    ]
    try:
        egress = Egress.of(settings)
    except EgressRefused as exc:
        checks.append(Check(name="egress", ok=False, detail=str(exc)))
        egress = Egress(networks=(ipaddress.ip_network("0.0.0.0/32"),))  # a bad rule reaches nothing
    targets = check_targets(db, egress=egress) if checks[0].ok else []
    # no credentials and no server paths in the answer (a file store shows as a path under TAILTUNE_HOME)
    secrets = settings_secrets(settings)
    checks = [c.model_copy(update={"detail": public(scrub_fragments(c.detail, secrets), settings)}) for c in checks]
    targets = [c.model_copy(update={"detail": public(c.detail, settings)}) for c in targets]
    return Readiness(ready=all(c.ok for c in checks), checks=checks, targets=targets)
