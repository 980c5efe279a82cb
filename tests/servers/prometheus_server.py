"""Debian's `prometheus` (scripts/setup.sh installs it) on a free 127.0.0.1 port with a given configuration, its
storage and log in a folder of its own; `query` runs an instant query through its HTTP API. Always stopped (the
whole process group) and its folder removed on `close()` or on leaving a `with` block."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.servers.cassandra_server import free_port

__all__ = ["PrometheusServer"]

#: A limit for the server to answer `/-/ready` (not a timed assertion).
START_S = 60.0


class PrometheusServer:
    def __init__(self, config: str, port: int | None = None) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            raise RuntimeError("prometheus is not installed: apt-get install -y prometheus (scripts/setup.sh)")
        self.exe = exe
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tailtune-prometheus-"))
        (self.dir / "prometheus.yml").write_text(config)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        path = self.dir / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def start(self) -> PrometheusServer:
        cmd = [self.exe, f"--config.file={self.dir / 'prometheus.yml'}", f"--storage.tsdb.path={self.dir / 'data'}",
               f"--web.listen-address=127.0.0.1:{self.port}"]
        with (self.dir / "prometheus.log").open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_S
        while True:
            assert self.proc.poll() is None, f"prometheus exited ({self.proc.returncode}): {self.log()}"
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return self
            assert time.monotonic() < deadline, f"prometheus never ready: {self.log()}"
            time.sleep(0.2)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """The result of an instant query, now or at time `at` (a vector's series, a matrix's, or a scalar as one
        entry); AssertionError with Prometheus's error for a query it refuses."""
        params = {"query": expr} if at is None else {"query": expr, "time": repr(at)}
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                doc = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr}: {exc.read().decode(errors='replace')}") from None
        assert doc["status"] == "success", (expr, doc)
        data = doc["data"]
        return list(data["result"]) if data["resultType"] in ("vector", "matrix") else [{"value": data["result"]}]

    def close(self) -> None:
        if self.proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=30)
                    break
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
