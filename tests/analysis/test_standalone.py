"""The job runs unchanged on a standalone cluster: a master + one worker started from the pip package."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_LOG_DIR=str(tmp_path / "logs"))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    logs = [open(tmp_path / name, "wb") for name in ("master.log", "worker.log")]  # noqa: SIM115
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port())],
            env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True))
        _wait_port(port, 60)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
             "--memory", "1g", "--webui-port", str(_free_port())],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True))
        end = time.monotonic() + 60
        while b"Successfully registered with master" not in (tmp_path / "worker.log").read_bytes():
            if time.monotonic() > end or procs[1].poll() is not None:
                raise TimeoutError("worker did not register: " + (tmp_path / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            _stop(p)
        for f in logs:
            f.close()


def test_job_on_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("request_id,ts,key,value_size\n1,0.0,a,10\n1,0.0,b,20\n2,1.0,a,10\n3,2.0,c,30\n")
    out = tmp_path / "out"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               TAILTUNE_HOME=str(tmp_path / "home"))
    res = subprocess.run(
        [sys.executable, "-m", "jobs.characterize", str(csv), "--out", str(out), "--spark-master", standalone,
         "--servers", "2", "--replication", "1"],
        env=env, capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2],
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    assert doc["multiget_size"]["frac_multi"] == pytest.approx(1 / 3)
    assert doc["key_popularity"]["distinct_keys"] == 3
    assert doc["fanout"]["servers"] == 2
    assert (tmp_path / "work").is_dir()  # the executor really ran on the worker
