"""A private memcached (Debian package) on a free 127.0.0.1 port that can be stopped and restarted on that
port.

As root memcached needs `-u memcache`; its pidfile folder must be writable by that user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from service.testing.cassandra_server import free_port

__all__ = ["MemcachedNode", "running_memcached"]


class MemcachedNode:
    def __init__(self, port: int | None = None, memory_mb: int = 32, item_max: str | None = None) -> None:
        exe = shutil.which("memcached")
        if exe is None:
            raise RuntimeError("memcached is not installed: apt-get install -y memcached")
        self.exe = exe
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.memory_mb = memory_mb
        self.item_max = item_max  # memcached -I (item size limit, e.g. "1k"); None: its default (1m)
        self.rundir = Path(tempfile.mkdtemp(prefix="tailtune-memcached-"))
        os.chmod(self.rundir, 0o777)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        cmd = [
            self.exe,
            "-l",
            self.host,
            "-p",
            str(self.port),
            "-U",
            "0",
            "-t",
            "2",
            "-m",
            str(self.memory_mb),
            "-P",
            str(self.rundir / "memcached.pid"),
        ]
        if self.item_max is not None:
            cmd += ["-I", self.item_max, "-o", "slab_chunk_max=512"]  # chunks must not exceed small items
        if os.geteuid() == 0:
            cmd += ["-u", "memcache"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memcached exited at start with {self.proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=0.2):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"memcached did not listen on {self.address} within {timeout_s}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.rundir, ignore_errors=True)


@contextlib.contextmanager
def running_memcached() -> Iterator[MemcachedNode]:
    node = MemcachedNode()
    try:
        node.start()
        yield node
    finally:
        node.close()
