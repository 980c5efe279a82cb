"""Shared fixtures: an isolated TAILTUNE_HOME per test, the CLI, ../shared/data, one session SparkSession.

The app's fixtures (`svc`, the metadata-DB backends, `memcached_node`), which tests/service, tests/control,
tests/jobs and tests/clients share, are the plugin `tests/app_fixtures.py`; the servers the tests start are the test
kit, `tests/servers/`. Package-specific fixtures live in the conftest.py of each test sub-folder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from base.settings import Settings, get_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.servers.cassandra_server import CassandraNode
    from tests.servers.postgres_server import PostgresServer

# The tests' JVMs (Spark, the Spark standalone cluster, the Cassandra node) run tiny workloads and exit: with the JIT
# stopped at C1 they spend about a quarter less CPU than with C2 (bench/RESULTS.md § Test suite); nothing else changes.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

pytest_plugins = ("tests.app_fixtures",)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def tailtune_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh TAILTUNE_HOME for one test; the cached settings are reset around it."""
    home = tmp_path / "home"
    monkeypatch.setenv("TAILTUNE_HOME", str(home))
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


@pytest.fixture
def settings(tailtune_home: Path) -> Settings:
    return get_settings()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public trace samples in ../shared/data (tests only; the project never needs them at run time)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present")
    return SHARED_DATA


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(tailtune_home: Path, capsys: pytest.CaptureFixture[str]) -> object:
    """Run `tailtune ARGS...` in-process through the real entry point (exit codes and error lines included)."""
    from tailtune.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole test session (created on first use: ~7 s)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tailtune-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throw-away PostgreSQL server for the session (started on first use: ~2-3 s); tests take a fresh
    database each with `postgres_server.database()`. Missing binaries fail (not skip): run `make setup`.
    """
    from tests.servers.postgres_server import PostgresMissing, PostgresServer

    try:
        server = PostgresServer()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with server:
        yield server


@pytest.fixture(scope="session")
def cassandra_node() -> Iterator[CassandraNode]:
    """One real single-node Cassandra for every test of the run that needs one (started on first use)."""
    import shutil

    from tests.servers.cassandra_server import running_cassandra

    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java/mvn not installed (scripts/setup.sh installs them)")
    with running_cassandra(heap="384M") as node:
        yield node


#: Tests run in parallel worker processes (pytest-xdist, `--dist loadgroup`): every test that uses one of these
#: session servers runs in the same worker, so each heavy server starts once per run, not once per worker.
XDIST_GROUPS = {"cassandra_node": "cassandra", "spark": "spark"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marker to name the test's group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        group = next((g for fx, g in XDIST_GROUPS.items() if fx in names), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """In an xdist worker under `--dist loadgroup`, a grouped test's id must carry its group (`...@spark`): that is
    how xdist sends a group to one worker. Without it each worker would start its own servers; the test fails."""
    if ("PYTEST_XDIST_WORKER" in os.environ and item.config.getoption("loadgroup", False)
            and item.get_closest_marker("xdist_group") and "@" not in item.nodeid):
        pytest.fail("pytest-xdist did not group this test: the installed pytest and pytest-xdist do not work "
                    "together; install the versions pyproject.toml pins (make setup)", pytrace=False)
