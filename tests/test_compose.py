"""docker-compose.yml (no Docker engine here): services, healthchecks, commands and settings are real, and every
healthcheck, run as Docker runs it, passes against the real service started on 127.0.0.1 (and fails without it).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from base.settings import Settings
from tests.servers.cassandra_server import CassandraNode, free_port
from tests.servers.memcached_server import MemcachedNode
from tests.servers.postgres_server import PostgresServer
from tests.servers.prometheus_server import PrometheusServer

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent  # the venv the tests run in (the image: /opt/venv/bin)
SERVICES = {"api", "worker", "spark-master", "spark-worker", "mlflow", "postgres", "cassandra", "memcached",
            "prometheus", "grafana"}


def _compose() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_services_healthchecks_and_dependencies() -> None:
    services = _compose()["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert "test" in svc["healthcheck"], name
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in SERVICES and cond == {"condition": "service_healthy"}, (name, dep)
    assert set(services["worker"]["depends_on"]) >= {
        "postgres",
        "cassandra",
        "memcached",
        "mlflow",
        "spark-master",
    }
    assert set(services["api"]["depends_on"]) >= {"postgres"}


def test_every_setting_is_documented_in_operations() -> None:
    """docs/operations.md names every setting's variable: a field added to `Settings` alone fails here."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    missing = [name for name in Settings.model_fields if f"TAILTUNE_{name.upper()}" not in doc]
    assert not missing, f"settings not in docs/operations.md: {missing}"


def test_every_tailtune_env_var_is_a_setting() -> None:
    fields = set(Settings.model_fields)
    seen = set()
    for svc in _compose()["services"].values():
        for key in svc.get("environment") or {}:
            if key.startswith("TAILTUNE_"):
                seen.add(key)
                assert key.removeprefix("TAILTUNE_").lower() in fields, key
    assert {
        "TAILTUNE_DATABASE_URL",
        "TAILTUNE_MLFLOW_TRACKING_URI",
        "TAILTUNE_OPTUNA_STORAGE",
        "TAILTUNE_SPARK_MASTER",
        "TAILTUNE_HOME",
    } <= seen


def test_every_command_exists_in_the_project() -> None:
    from tailtune.cli import app

    services = _compose()["services"]
    built = {n for n, s in services.items() if "build" in s}
    assert built == {"api", "worker", "spark-master", "spark-worker", "mlflow"}
    assert (ROOT / services["api"]["build"] / "Dockerfile").is_file()
    runner = CliRunner()
    for name in built:
        cmd = services[name]["command"]
        assert (VENV_BIN / cmd[0]).is_file(), (name, cmd[0])  # installed by `pip install .` in the image
        if cmd[0] == "tailtune":
            result = runner.invoke(app, [cmd[1], "--help"])
            assert result.exit_code == 0, (name, result.output)
            for opt in (a for a in cmd[2:] if a.startswith("--")):
                assert opt in result.output, (name, opt)
        if cmd[0] == "spark-class":
            import pyspark

            klass = cmd[1].replace(".", "/") + ".class"
            jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
            assert jars and any(klass in zipfile.ZipFile(j).namelist() for j in jars), klass
    mounted = [v.split(":")[0] for s in services.values() for v in s.get("volumes", []) if v.startswith("./")]
    assert mounted and all((ROOT / m).is_file() for m in mounted)


def test_healthcheck_urls_are_real_routes() -> None:
    from service.main import create_app

    paths = set(create_app().openapi()["paths"])
    text = (ROOT / "docker-compose.yml").read_text()
    for path in re.findall(r"127\.0\.0\.1:8000(/[a-z0-9/]+)", text):
        assert path in paths, path


# --- healthchecks, run the way Docker runs them against the real services on 127.0.0.1 ---------------------------
# Docker runs a healthcheck `test` ["CMD", argv...] as that argv, ["CMD-SHELL", cmd] (or a bare string) as the
# image's `/bin/sh -c cmd`. The images are Debian-based (tailtune's python:3.11-slim-bookworm, postgres:16,
# memcached:1.6) or Ubuntu-based (cassandra:5.0): /bin/sh is dash; prom/prometheus (busybox) runs its check as an
# argv, grafana/grafana (Alpine) under busybox's POSIX sh, whose command is parsed here by dash (no Grafana here).
# The services' own ports are rewritten to free ones; nothing else in a command changes.

DASH = shutil.which("dash")
#: A start-up limit for a service to become healthy (Docker's interval × retries is of this order), not a timed
#: assertion.
STARTUP_S = 180.0


def _check_argv(test: list[str] | str) -> list[str]:
    """The argv Docker runs for a healthcheck `test`."""
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    kind, *rest = test
    if kind == "CMD":
        return rest
    assert kind == "CMD-SHELL" and len(rest) == 1, test
    if DASH is None:
        pytest.fail("dash is not installed (scripts/setup.sh installs it): the images' /bin/sh", pytrace=False)
    return [DASH, "-c", rest[0]]


def _health_argv(service: str, ports: dict[int, int] | None = None) -> list[str]:
    argv = _check_argv(_compose()["services"][service]["healthcheck"]["test"])
    for old, new in (ports or {}).items():
        rewritten = [re.sub(rf"(?<![0-9]){old}(?![0-9])", str(new), a) for a in argv]
        assert rewritten != argv, (service, old)  # the check must not reach the real port
        argv = rewritten
    return argv


class _Env(dict[str, str]):
    """A process environment that an assertion message does not print."""

    def __repr__(self) -> str:
        return f"<environment of {len(self)} variables>"

    def __or__(self, other: dict[str, str]) -> _Env:  # type: ignore[override]
        return _Env({**self, **other})


def _env(**extra: str) -> _Env:
    """This environment without TAILTUNE_* settings, the venv's bin first on PATH (the image's /opt/venv/bin)."""
    env = _Env({k: v for k, v in os.environ.items() if not k.startswith("TAILTUNE_")})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | extra


def _check(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _until_healthy(argv: list[str], env: dict[str, str], proc: subprocess.Popen[bytes] | None = None,
                   log: Path | None = None) -> None:
    """Run the check as Docker does, again until it passes (the service is starting), within STARTUP_S."""
    deadline = time.monotonic() + STARTUP_S
    while (done := _check(argv, env)).returncode != 0:
        said = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
        assert proc is None or proc.poll() is None, f"the service exited ({proc.returncode if proc else ''}): {said}"
        assert time.monotonic() < deadline, f"never healthy: {done.stdout[-500:]}{done.stderr[-1500:]}\n{said}"
        time.sleep(0.5)


def _command(service: str, ports: dict[int, int]) -> list[str]:
    """The service's compose command on 127.0.0.1 and free ports; `tailtune` runs as `python -m tailtune` from the
    checkout (the image installs the same entry point as a script)."""
    cmd = [a.replace("0.0.0.0", "127.0.0.1") for a in _compose()["services"][service]["command"]]
    for old, new in ports.items():
        cmd = [re.sub(rf"(?<![0-9]){old}(?![0-9])", str(new), a) for a in cmd]
    return [sys.executable, "-m", "tailtune", *cmd[1:]] if cmd[0] == "tailtune" else cmd


@contextlib.contextmanager
def _running(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait_s)
                break


def test_every_healthcheck_parses_in_the_shell_or_program_that_runs_it() -> None:
    for name, svc in _compose()["services"].items():
        argv = _check_argv(svc["healthcheck"]["test"])
        if argv[0] == DASH:
            assert _check([DASH, "-n", "-c", argv[2]], _env()).returncode == 0, (name, argv)
        elif argv[0] == "bash":
            assert argv[1] == "-c" and _check(["bash", "-n", "-c", argv[2]], _env()).returncode == 0, name
        elif argv[0] == "python":
            assert argv[1] == "-c", name
            compile(argv[2], name, "exec")
        else:  # procps: see the Dockerfile; wget: the prom/prometheus image's busybox
            assert (name, argv[0]) in {("spark-worker", "pgrep"), ("prometheus", "wget")}, (name, argv)
    assert "procps" in (ROOT / "Dockerfile").read_text()


def test_memcached_healthcheck_against_a_real_memcached() -> None:
    node = MemcachedNode()
    try:
        argv = _health_argv("memcached", {11211: node.port})
        assert _check(argv, _env()).returncode != 0  # nothing listens yet
        node.start()
        done = _check(argv, _env())
        assert done.returncode == 0, done.stderr
        node.stop()
        assert _check(argv, _env()).returncode != 0
    finally:
        node.close()


def test_postgres_healthcheck_against_a_real_postgres(postgres_server: PostgresServer) -> None:
    argv = _health_argv("postgres")
    # pg_isready reads its server from PG* variables; the image's is its own, on the default socket and port
    env = _env(PGHOST=postgres_server.host, PATH=f"{postgres_server.bindir}{os.pathsep}{_env()['PATH']}")
    done = _check(argv, env | {"PGPORT": str(postgres_server.port)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert _check(argv, env | {"PGPORT": str(free_port())}).returncode != 0


def _tailtune_env(tmp_path: Path, database_url: str, port: int) -> _Env:
    """The compose environment of the api and worker, its addresses pointed at this machine."""
    env = {k: str(v) for k, v in _compose()["services"]["api"]["environment"].items()}
    env = {k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v) for k, v in env.items()}  # ${VAR:-default}, VAR unset
    local = {
        "TAILTUNE_HOME": str(tmp_path / "home"),
        "TAILTUNE_DATABASE_URL": database_url,
        "TAILTUNE_OPTUNA_STORAGE": f"sqlite:///{tmp_path / 'optuna.db'}",
        "TAILTUNE_MLFLOW_TRACKING_URI": str(tmp_path / "mlruns"),
        "TAILTUNE_SPARK_MASTER": "local[1]",
        "TAILTUNE_API_HOST": "127.0.0.1",
        "TAILTUNE_API_PORT": str(port),
        "TAILTUNE_METRICS_PORT": str(free_port()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    assert set(local) <= set(env)
    return _env(**(env | local))


def _scraped_as_prometheus_is(env: dict[str, str], api_port: int) -> None:
    """`tailtune serve` with the api service's TAILTUNE_METRICS_PORT serves the exposition format on that port
    and the path docker/prometheus/prometheus.yml scrapes, without a token; the API's own port has no metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    from service.metrics.collector import METRICS

    config = yaml.safe_load((ROOT / "docker" / "prometheus" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    port = _compose()["services"]["api"]["environment"]["TAILTUNE_METRICS_PORT"]
    assert job["static_configs"] == [{"targets": [f"api:{port}"]}]
    url = f"http://127.0.0.1:{env['TAILTUNE_METRICS_PORT']}{job.get('metrics_path', '/metrics')}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        names = {f.name for f in text_string_to_metric_families(resp.read().decode())}
    assert set(METRICS) <= names
    made = subprocess.run([sys.executable, "-m", "tailtune", "serve", "--create-token", "read"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    req = urllib.request.Request(f"http://127.0.0.1:{api_port}/metrics",
                                 headers={"Authorization": f"Bearer {made.stdout.strip()}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=10)
    assert refused.value.code == 404


@pytest.mark.slow
def test_api_and_worker_healthchecks_against_the_real_services(tmp_path: Path,
                                                               postgres_server: PostgresServer) -> None:
    port = free_port()
    api_check, worker_check = _health_argv("api", {8000: port}), _health_argv("worker")
    with postgres_server.database() as url:
        env = _tailtune_env(tmp_path, url, port)
        assert _check(api_check, env).returncode != 0
        with _running(_command("api", {8000: port}), env, tmp_path / "api.log") as api:
            _until_healthy(api_check, env, api, tmp_path / "api.log")
            _scraped_as_prometheus_is(env, port)
            assert _check(worker_check, env).returncode != 0  # no worker has run
            with _running(_command("worker", {}), env, tmp_path / "worker.log") as worker:
                _until_healthy(worker_check, env, worker, tmp_path / "worker.log")


@pytest.mark.slow
def test_mlflow_healthcheck_against_the_real_server(tmp_path: Path, postgres_server: PostgresServer) -> None:
    port = free_port()
    check = _health_argv("mlflow", {5000: port})
    env = _env(**{k: str(v) for k, v in _compose()["services"]["mlflow"]["environment"].items()})
    assert _check(check, env).returncode != 0
    with postgres_server.database() as url:
        cmd = _command("mlflow", {5000: port})
        backend = cmd.index("--backend-store-uri") + 1
        assert cmd[backend].startswith("postgresql+psycopg://")  # the same kind of store, on the test server
        cmd[backend] = url
        cmd[cmd.index("--artifacts-destination") + 1] = str(tmp_path / "artifacts")
        with _running(cmd, env, tmp_path / "mlflow.log") as mlflow:
            _until_healthy(check, env, mlflow, tmp_path / "mlflow.log")


@pytest.mark.slow
def test_spark_healthchecks_against_a_real_master_and_worker(tmp_path: Path) -> None:
    import pyspark

    port = free_port()
    env = _env(SPARK_HOME=str(Path(pyspark.__file__).parent), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_LOG_DIR=str(tmp_path / "logs"),
               PYSPARK_PYTHON=sys.executable)
    master_check = _health_argv("spark-master", {7077: port})
    worker_check = _health_argv("spark-worker")
    # the worker's check finds no process of its own: with a pattern nothing runs, it fails
    unique = [*worker_check[:-1], f"{worker_check[-1]}-{uuid.uuid4().hex}"]
    assert _check(unique, env).returncode != 0
    assert _check(master_check, env).returncode != 0
    master_cmd = [*_command("spark-master", {7077: port}), "--webui-port", str(free_port())]  # not 8080
    with _running(master_cmd, env, tmp_path / "master.log") as master:
        _until_healthy(master_check, env, master, tmp_path / "master.log")
        worker_cmd = [a.replace("spark-master", "127.0.0.1") for a in _command("spark-worker", {7077: port})]
        worker_cmd += ["--webui-port", str(free_port())]  # not 8081
        with _running(worker_cmd, env, tmp_path / "worker.log") as worker:
            _until_healthy(worker_check, env, worker, tmp_path / "worker.log")


def test_cassandra_healthcheck_query_on_a_real_node(cassandra_node: CassandraNode) -> None:
    """cqlsh is not installed here (the Cassandra jars come from Maven Central): the command parses under dash
    (test above) and its query runs on a real node."""
    argv = _health_argv("cassandra")
    words = shlex.split(argv[2])
    assert words[:2] == ["cqlsh", "-e"] and len(words) == 3
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        rows = list(cluster.connect().execute(words[2]))
    finally:
        cluster.shutdown()
    assert len(rows) == 1 and rows[0].release_version.startswith("5.0")


def test_docker_compose_config_is_valid() -> None:
    """Debian's docker-compose (v1; this machine's docker has no compose plugin) reads the file, its anchors,
    variables and every service."""
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (scripts/setup.sh installs Debian's): the file is not validated")
    done = subprocess.run([exe, "-f", str(ROOT / "docker-compose.yml"), "config", "--services"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == SERVICES


def test_prometheus_healthcheck_against_debian_prometheus() -> None:
    """The prometheus service's check (busybox wget in its image; wget here) fails before the server answers and
    passes once it does."""
    prom = PrometheusServer("global:\n  scrape_interval: 15s\n")
    try:
        argv = _health_argv("prometheus", {9090: prom.port})
        assert _check(argv, _env()).returncode != 0  # nothing listens yet
        prom.start()
        done = _check(argv, _env())
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        prom.close()
