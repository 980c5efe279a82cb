"""The metadata DB on both backends: migrations up from empty (and down and up again), models = migrations,
values PostgreSQL would truncate or reject, concurrent config writers, URL spelling.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text

from base.errors import BadInputError
from control.configs import add_version
from control.db import (
    Base,
    Database,
    DatabaseUnavailable,
    DeploymentRow,
    JobRow,
    TraceRow,
    WorkerRow,
    normalize_url,
)
from control.db.session import MIGRATIONS
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.auth import create_token
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.cassandra_server import free_port

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL

API = "/api/v1"
TABLES = {
    "alembic_version",
    "analyses",
    "api_tokens",
    "config_versions",
    "deployment_grants",
    "deployments",
    "fidelity_records",
    "jobs",
    "observations",
    "schedules",
    "traces",
    "workers",
}


def _head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def test_migrations_up_from_empty_down_and_up(database_url: str, db_backend: str) -> None:
    from alembic import command
    from alembic.config import Config

    db = Database(database_url, run_migrations=False)
    try:
        assert db.engine.dialect.name == db_backend
        assert set(inspect(db.engine).get_table_names()) == set()  # really empty
        db_again = Database(database_url)  # migrates
        db_again.dispose()
        assert set(inspect(db.engine).get_table_names()) == TABLES
        with db.engine.connect() as c:
            assert c.scalar(text("SELECT version_num FROM alembic_version")) == _head() == "0013"
            assert compare_metadata(MigrationContext.configure(c), Base.metadata) == []  # models = migrations
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with db.engine.begin() as c:
            cfg.attributes["connection"] = c
            command.downgrade(cfg, "base")
        assert set(inspect(db.engine).get_table_names()) == {"alembic_version"}
        Database(database_url).dispose()  # and up again
        assert set(inspect(db.engine).get_table_names()) == TABLES
    finally:
        db.dispose()


def test_values_postgres_would_truncate_round_trip(svc: Svc) -> None:
    big = 3 * 1024**3 + 7  # a 3 GiB upload: over a 32-bit INTEGER
    epoch = 1782907200.123456  # a lease expiry: needs double precision, not REAL
    with svc.db.session() as s:
        s.add(
            TraceRow(name="big", format="csv", size_bytes=big, sha256="0" * 64, status="uploaded", created_at=epoch)
        )
        s.add(
            JobRow(
                kind="selftest", payload={"ü": [1, None]}, status="queued", run_after=epoch, steps=[], created_at=0.5
            )
        )
    with svc.db.session() as s:
        trace = s.scalars(select(TraceRow)).one()
        job = s.scalars(select(JobRow)).one()
        assert trace.size_bytes == big and trace.created_at == epoch
        assert job.run_after == epoch and job.payload == {"ü": [1, None]} and job.attempts == 0
        assert job.cancel_requested is False and job.logs == ""


def test_concurrent_config_writers_get_distinct_versions(svc: Svc) -> None:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("conc", ["h:1"]), headers=svc.write)
    dep_id = int(dep.json()["id"])
    barrier = threading.Barrier(6)
    got: list[int] = []
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            barrier.wait()
            for i in range(3):
                config = {"policy": "chisel", "params": {"merge": n + 1, "split_keys": i + 1, "elephant_threshold": 9}}
                with svc.db.session() as s:
                    got.append(add_version(s, dep_id, config, settings=svc.settings, source="manual").version)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(got) == list(range(1, 19))
    r = svc.client.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()
    assert [v["version"] for v in r] == list(range(18, 0, -1))


def test_over_long_values_are_refused_before_the_db(svc: Svc) -> None:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("long", ["h:1"]), headers=svc.write)
    cron = "0 " + ",".join(str(h) for h in range(24)) * 2 + " * * *"  # valid cron syntax, > 100 characters
    assert len(cron) > 100
    r = svc.client.post(f"{API}/schedules", json={"deployment_id": dep.json()["id"], "cron": cron}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "cron"
    with pytest.raises(BadInputError, match="worker id"):
        Worker(svc.settings, svc.db, "w" * 101, handlers=default_handlers())
    w = Worker(svc.settings, svc.db, "w" * 100, handlers=default_handlers())
    w.beat()
    w.beat(7)  # the upsert updates the row
    with svc.db.session() as s:
        assert [(r.id, r.current_job_id) for r in s.scalars(select(WorkerRow))] == [("w" * 100, 7)]
    with pytest.raises(BadInputError, match="token name"):
        create_token(svc.db, "t" * 101, "read")
    with svc.db.session() as s:
        assert s.scalar(select(DeploymentRow.name)) == "long"  # nothing else was written


def test_bare_postgresql_urls_mean_psycopg() -> None:
    assert normalize_url("postgresql://u:p@h:5432/d") == "postgresql+psycopg://u:p@h:5432/d"
    assert normalize_url("postgres://h/d") == "postgresql+psycopg://h/d"
    assert normalize_url("postgresql+psycopg://h/d") == "postgresql+psycopg://h/d"
    assert normalize_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_unusable_urls_fail_clearly() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(DatabaseUnavailable, match="TAILTUNE_DATABASE_URL") as down:
        Database(f"postgresql://tt:s3cret@127.0.0.1:{port}/meta")
    assert "s3cret" not in str(down.value) and f"127.0.0.1:{port}" in str(down.value)
    with pytest.raises(BadInputError) as bad:
        Database("mysql://tt@127.0.0.1/meta")  # no MySQL driver is installed
    assert bad.value.problems[0].field == "TAILTUNE_DATABASE_URL"


def test_missing_postgres_binaries_say_make_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.servers.postgres_server import PostgresMissing, PostgresServer, find_bindir

    monkeypatch.setenv("TAILTUNE_PG_BINDIR", str(tmp_path))  # a folder without initdb/pg_ctl
    assert find_bindir() is None
    with pytest.raises(PostgresMissing, match="make setup"):
        PostgresServer()


@pytest.mark.db_backends
def test_ids_are_never_reused_after_delete(svc: Svc) -> None:
    body = b"request_id,ts,key\n0,1.0,a\n"
    a = svc.client.post(f"{API}/traces?name=a.csv", content=body, headers=svc.write).json()
    assert svc.client.delete(f"{API}/traces/{a['id']}", headers=svc.write).status_code == 204
    b = svc.client.post(f"{API}/traces?name=b.csv", content=body, headers=svc.write).json()
    assert b["id"] != a["id"] and b["job_id"] != a["job_id"]
    d1 = svc.client.post(f"{API}/deployments", json=memcached_deployment("re1", ["h:1"]), headers=svc.write)
    svc.client.delete(f"{API}/deployments/{d1.json()['id']}", headers=svc.write)
    d2 = svc.client.post(f"{API}/deployments", json=memcached_deployment("re2", ["h:1"]), headers=svc.write)
    assert d2.json()["id"] != d1.json()["id"]


def test_upgrade_to_autoincrement_keeps_every_row(tmp_path: Path) -> None:
    """0002 → 0003 recreates the SQLite tables: children of a recreated parent must survive."""
    from alembic import command
    from alembic.config import Config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    db = Database(url, run_migrations=False)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as c:
        cfg.attributes["connection"] = c
        command.upgrade(cfg, "0002")
        c.execute(text("INSERT INTO deployments (id, name, kind, timezone, topology, connection, objective, "
                       "constraints, publish_status, created_at) VALUES (1, 'd', 'memcached', 'UTC', "
                       "'{\"servers\": 4, \"slots\": 2, \"network_ms\": null}', '{}', "
                       "'{}', '{}', 'none', 0)"))
        c.execute(text("INSERT INTO config_versions (deployment_id, version, config, source, published, "
                       "created_at) VALUES (1, 1, '{}', 'manual', '{}', 0)"))
        c.execute(text("INSERT INTO schedules (deployment_id, cron, timezone, enabled, traces, created_at) "
                       "VALUES (1, '0 2 * * *', 'UTC', 1, 1, 0)"))
        c.execute(text("INSERT INTO traces (name, deployment_id, format, size_bytes, sha256, status, created_at) "
                       "VALUES ('t', 1, 'csv', 1, 'x', 'ready', 0)"))
    db.dispose()
    db = Database(url)  # migrates to head
    try:
        with db.engine.connect() as c:
            assert c.scalar(text("SELECT version_num FROM alembic_version")) == _head()
            for table in ("deployments", "config_versions", "schedules"):
                assert c.scalar(text(f"SELECT count(*) FROM {table}")) == 1, table
            # 0005: existing deployments read as stock, java4, no tables; existing versions apply to nothing known
            assert tuple(c.execute(text("SELECT server, driver, tables FROM deployments")).one()) == (
                "stock",
                "java4",
                "[]",
            )
            assert c.scalar(text("SELECT applies_to FROM config_versions")) is None
            # 0006: what an existing deployment stored in its topology stays the operator's
            # (0009 renames the model's `operator` to `declared`)
            assert json.loads(c.scalar(text("SELECT model FROM deployments"))) == {"declared": ["servers", "slots"]}
            assert c.scalar(text("SELECT count(*) FROM deployment_grants")) == 0  # 0009: nothing bound yet
            assert c.scalar(text("SELECT verification FROM config_versions")) is None  # 0007: never checked
            # 0008: an existing schedule takes its traces from uploads, as before
            assert c.scalar(text("SELECT capture FROM schedules")) is None
            # 0010: an existing deployment gets a nonce of its own (its identity: id + nonce)
            assert len(c.scalar(text("SELECT nonce FROM deployments"))) == 16
            # 0011: an existing deployment does not allow the live replay
            assert c.scalar(text("SELECT replay_allowed FROM deployments")) == 0
            # 0013: an existing deployment confirms on no deployment; an existing version has no evidence
            assert c.scalar(text("SELECT confirm_on FROM deployments")) is None
            assert c.scalar(text("SELECT evidence FROM config_versions")) is None
            assert c.scalar(text("SELECT deployment_id FROM traces")) == 1
            assert c.scalar(text("PRAGMA foreign_keys")) == 1
            assert "AUTOINCREMENT" in c.scalar(text("SELECT sql FROM sqlite_master WHERE name = 'traces'"))
        with db.session() as s:  # foreign keys are enforced again on new connections
            s.execute(text("DELETE FROM deployments"))
        with db.engine.connect() as c:
            assert c.scalar(text("SELECT count(*) FROM config_versions")) == 0
    finally:
        db.dispose()
