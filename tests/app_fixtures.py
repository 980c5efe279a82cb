"""The app's fixtures, for tests/service, tests/control, tests/jobs and tests/clients (a plugin of tests/conftest.py):
an app with an isolated TAILTUNE_HOME and tokens, the metadata-DB backends, and a real memcached server; and the
deployment bodies those tests register.

The server is session-scoped, bound to a free 127.0.0.1 port, and always stopped. What the fixtures need of the
service is imported when a test first uses them, so a run that uses none does not import the app.

Metadata-DB backends: a test (or module, via `pytestmark`) marked `db_backends` runs once per backend in
`BACKENDS` — SQLite (the default) and PostgreSQL (a fresh database on the session's throw-away server, handed to
the app, the worker and any spawned process through `TAILTUNE_DATABASE_URL`). Unmarked tests use SQLite.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from base.settings import Settings, get_settings

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from control.db import Database
    from tests.servers.memcached_server import MemcachedNode
    from tests.servers.postgres_server import PostgresServer

FAST_ENV = {
    "TAILTUNE_WORKER_LEASE_S": "2",
    "TAILTUNE_WORKER_POLL_S": "0.05",
    "TAILTUNE_JOB_BACKOFF_S": "0.01",
    "TAILTUNE_PUBLISH_BACKOFF_S": "0.05",
    "TAILTUNE_PUBLISH_TIMEOUT_S": "1.5",
    "TAILTUNE_PUBLISH_ATTEMPTS": "3",
    "TAILTUNE_OPEN_READS_ON_LOCALHOST": "true",
    "TAILTUNE_SELFTEST_JOBS": "true",  # the tests' job kind (production leaves it off)
    # TestClient sends `Host: testserver`
    "TAILTUNE_API_ALLOWED_HOSTS": '["localhost", "127.0.0.1", "::1", "testserver"]',
}


BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "db_backends: run once per metadata-DB backend (sqlite, postgresql)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("db_backends"):
        metafunc.parametrize("db_backend", BACKENDS, indirect=True)


@pytest.fixture
def db_backend(request: pytest.FixtureRequest) -> str:
    """The metadata-DB backend of this test: `sqlite` unless the test is marked `db_backends`."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def database_url(
    db_backend: str, tailtune_home: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The metadata-DB URL of this test; for PostgreSQL a fresh database, dropped afterwards."""
    if db_backend == "sqlite":
        yield get_settings().resolved_database_url
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    with server.database() as url:
        monkeypatch.setenv("TAILTUNE_DATABASE_URL", url)
        get_settings.cache_clear()
        yield url


@dataclass
class Svc:
    home: Path
    settings: Settings
    db: Database
    client: TestClient
    write: dict[str, str]
    read: dict[str, str]


@pytest.fixture
def svc(tailtune_home: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Svc]:
    from fastapi.testclient import TestClient

    from service.auth import create_token
    from service.deps import database_for
    from service.main import create_app

    for k, v in FAST_ENV.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    settings = get_settings()
    assert settings.resolved_database_url == database_url
    db = database_for(settings.resolved_database_url)
    write = {"Authorization": f"Bearer {create_token(db, 'test-writer', 'write')}"}
    read = {"Authorization": f"Bearer {create_token(db, 'test-reader', 'read')}"}
    with TestClient(create_app(settings)) as client:
        yield Svc(tailtune_home, settings, db, client, write, read)
    db.dispose()


def admin_headers(svc: Svc) -> dict[str, str]:
    """An admin token's header (as `tailtune serve --create-token admin` mints one): it may bind a deployment's
    password variable (control.grants)."""
    from service.auth import create_token

    return {"Authorization": f"Bearer {create_token(svc.db, 'test-admin', 'admin')}"}


@pytest.fixture(scope="session")
def memcached_node() -> Iterator[MemcachedNode]:
    from tests.servers.memcached_server import MemcachedNode

    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed (apt-get install -y memcached)")
    node = MemcachedNode()
    node.start()
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def two_memcached() -> Iterator[list[MemcachedNode]]:
    """Two real memcached servers of 2 worker threads each (`-t 2`)."""
    from tests.servers.memcached_server import MemcachedNode

    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed (apt-get install -y memcached)")
    nodes = [MemcachedNode(threads=2), MemcachedNode(threads=2)]
    try:
        for n in nodes:
            n.start()
        yield nodes
    finally:
        for n in nodes:
            n.close()


def memcached_deployment(name: str, servers: list[str]) -> dict[str, object]:
    return {
        "name": name,
        "kind": "memcached",
        "timezone": "Europe/Berlin",
        "topology": {"servers": 4, "replication": 1},  # memcached: `slots` would declare its worker threads
        "connection": {"servers": servers},
        "current_config": {"policy": "batching", "params": {}},
    }


def cassandra_deployment(name: str, port: int, keyspace: str = "tailtune_test") -> dict[str, object]:
    return {
        "name": name,
        "kind": "cassandra",
        "timezone": "UTC",
        "topology": {"servers": 6, "slots": 4, "replication": 3},
        "connection": {"contact_points": ["127.0.0.1"], "port": port, "keyspace": keyspace},
        "current_config": {"policy": "fifo", "params": {}},
    }
