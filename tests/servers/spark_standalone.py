"""A Spark standalone cluster, a master and one worker started from the pip package's `spark-class` (as the
docker-compose services run them), for a job that must run unchanged on a real cluster."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers.cassandra_server import free_port

__all__ = ["running_standalone"]


def _wait_port(port: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


@contextmanager
def running_standalone(folder: Path) -> Iterator[str]:
    """A master and one worker (1 core, 1 GiB) on free 127.0.0.1 ports, their work and log folders under
    `folder` (`work/`, `logs/`, `master.log`, `worker.log`); yields the master's `spark://` URL once the worker
    has registered; always stopped."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(folder / "work"), SPARK_LOG_DIR=str(folder / "logs"))
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    logs = [open(folder / name, "wb") for name in ("master.log", "worker.log")]  # noqa: SIM115
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(free_port())],
            env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True))
        _wait_port(port, 60)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
             "--memory", "1g", "--webui-port", str(free_port())],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True))
        end = time.monotonic() + 60
        while b"Successfully registered with master" not in (folder / "worker.log").read_bytes():
            if time.monotonic() > end or procs[1].poll() is not None:
                raise TimeoutError("worker did not register: " + (folder / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            _stop(p)
        for f in logs:
            f.close()
