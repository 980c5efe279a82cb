"""The one memcached launcher of the tests, validation scripts and the client package's tests: a private memcached
(Debian package) on a free 127.0.0.1 port that can be stopped, paused (SIGSTOP, a hung server) and restarted on
that port.

Started as `memcached -l 127.0.0.1 -p PORT -U 0 -t THREADS -m MEMORY_MB -P PIDFILE [-o OPTION ...] [-u memcache
when root]`: as root memcached needs `-u memcache`, and its pidfile folder must be writable by that user. Its stderr
goes to a file in that folder, quoted when it exits at start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from tests.servers.cassandra_server import free_port

__all__ = ["MemcachedNode", "running_memcached"]


class MemcachedNode:
    """One memcached process; `start()` returns once it accepts connections, `close()` stops it and removes its
    folder (also on leaving a `with` block)."""

    def __init__(
        self, port: int | None = None, memory_mb: int = 32, item_max: str | None = None, threads: int = 2,
        options: tuple[str, ...] = (),
    ) -> None:
        exe = shutil.which("memcached")
        if exe is None:
            raise RuntimeError("memcached is not installed: apt-get install -y memcached")
        self.exe = exe
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.memory_mb = memory_mb
        self.item_max = item_max  # memcached -I (item size limit, e.g. "1k"); None: its default (1m)
        self.threads = threads
        self.options = options  # memcached -o options, e.g. ("slab_automove=0",)
        self.rundir = Path(tempfile.mkdtemp(prefix="tailtune-memcached-"))
        os.chmod(self.rundir, 0o777)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [self.exe, "-l", self.host, "-p", str(self.port), "-U", "0", "-t", str(self.threads),
               "-m", str(self.memory_mb), "-P", str(self.rundir / "memcached.pid")]
        if self.item_max is not None:
            cmd += ["-I", self.item_max, "-o", "slab_chunk_max=512"]  # chunks must not exceed small items
        for option in self.options:
            cmd += ["-o", option]
        if os.geteuid() == 0:
            cmd += ["-u", "memcache"]
        return cmd

    def start(self, timeout_s: float = 10.0) -> None:
        log = self.rundir / "stderr.log"
        with log.open("wb") as err:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                said = log.read_text(errors="replace").strip()
                raise RuntimeError(f"memcached exited at start with {code}" + (f": {said}" if said else ""))
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=0.2):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"memcached did not listen on {self.address} within {timeout_s}s")

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections and answers nothing until `resume()`."""
        assert self.proc is not None, "memcached is not running"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None, "memcached is not running"
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.rundir, ignore_errors=True)

    def __enter__(self) -> MemcachedNode:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@contextlib.contextmanager
def running_memcached(threads: int = 2, memory_mb: int = 32) -> Iterator[MemcachedNode]:
    """A started MemcachedNode, always stopped (and its folder removed) on exit."""
    with MemcachedNode(memory_mb=memory_mb, threads=threads) as node:
        node.start()
        yield node
